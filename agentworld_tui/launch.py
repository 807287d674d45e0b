"""From command-line flags and the settings file to a configured engine.

Shared by every sub-command that runs the model, and by the app.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.base import Engine, GenerationParams


class UserError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


def engine_flags() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("model")
    group.add_argument("--model", metavar="PATH", help="GGUF model file (overrides the config)")
    group.add_argument("--ctx", type=int, metavar="N", help="context size in tokens")
    group.add_argument(
        "--gpu-layers", type=int, metavar="N", help="layers to offload to the GPU (-1 = all)"
    )
    group.add_argument("--threads", type=int, metavar="N", help="CPU threads (default: cores)")
    group.add_argument("--log-level", metavar="LEVEL", help="log file level (DEBUG, INFO...)")
    remote = flags.add_argument_group("remote server (vLLM, SGLang, llama.cpp server)")
    remote.add_argument(
        "--server", metavar="URL", help="OpenAI-compatible endpoint to use instead of a local model"
    )
    remote.add_argument("--server-model", metavar="NAME", help="model name on the server")
    remote.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the API key"
    )
    gen = flags.add_argument_group("generation")
    gen.add_argument("--temperature", type=float)
    gen.add_argument("--top-p", type=float)
    gen.add_argument("--top-k", type=int)
    gen.add_argument("--max-tokens", type=int)
    gen.add_argument("--seed", type=int)
    gen.add_argument(
        "--reasoning-budget", type=int, metavar="N", help="reasoning tokens before answering"
    )
    gen.add_argument(
        "--no-thinking",
        action="store_true",
        help="answer without reasoning (faster, lower quality)",
    )
    return flags


settings_problems: list[str] = []
"""What was wrong with the settings file last read (the app shows these too)."""


def settings_from_args(args: argparse.Namespace) -> Settings:
    from agentworld_tui.config import load_settings, setup_logging

    loaded = load_settings()
    settings = loaded.settings
    settings_problems[:] = loaded.problems
    for problem in loaded.problems:
        print(f"agentworld: config: {problem}", file=sys.stderr)
    if args.model:
        settings.model.path = args.model
    for flag, attr in (("ctx", "n_ctx"), ("gpu_layers", "gpu_layers"), ("threads", "threads")):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(settings.model, attr, value)
    gen = settings.generation
    for flag in ("temperature", "top_p", "top_k", "max_tokens", "seed", "reasoning_budget"):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(gen, flag, value)
    if getattr(args, "no_thinking", False):
        gen.enable_thinking = False
    for flag, attr in (
        ("server", "url"),
        ("server_model", "model"),
        ("api_key_env", "api_key_env"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(settings.server, attr, value)
    if args.log_level:
        settings.log_level = args.log_level
    setup_logging(settings.log_level)
    return settings


def generation_params(settings: Settings) -> GenerationParams:
    from agentworld_tui.engines.base import GenerationParams

    g = settings.generation
    return GenerationParams(
        temperature=g.temperature,
        top_p=g.top_p,
        top_k=g.top_k,
        max_tokens=g.max_tokens,
        reasoning_budget=g.reasoning_budget,
        enable_thinking=g.enable_thinking,
        seed=g.seed,
    )


def make_engine(settings: Settings) -> Engine:
    if settings.server.url:
        from agentworld_tui.engines.remote import RemoteEngine

        s = settings.server
        return RemoteEngine(
            s.url, model=s.model, api_key_env=s.api_key_env, n_ctx=settings.model.n_ctx
        )
    m = settings.model
    if not m.path:
        raise UserError(
            "no model configured: pass --model PATH.gguf (or --server URL), or set "
            f"[model] path in {_settings_file()}"
        )
    from agentworld_tui.engines.llama import LlamaEngine  # numpy: only with a model

    return LlamaEngine(m.path, n_ctx=m.n_ctx, gpu_layers=m.gpu_layers, threads=m.threads)


def _settings_file() -> Path:
    from agentworld_tui.config import settings_path

    return settings_path()
