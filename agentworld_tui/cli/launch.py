"""From command-line flags and the settings file to a configured engine.

Shared by every sub-command that runs the model, and by the app.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from agentworld_tui.config import (
    LOG_LEVELS,
    MAX_THREADS,
    GenerationSettings,
    ModelSettings,
    ServerSettings,
    bounds_of,
)

if TYPE_CHECKING:
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.base import Engine


class UserError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


class CommandLineParser(argparse.ArgumentParser):
    """argparse, with a mistake on the command line said in one line instead of the
    usage text followed by the message (sub-commands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


LEADING = "leading_"
"""Prefix of the destinations of flags given before the sub-command (``merge_leading``)."""


def number_flag(section: type[Any], key: str) -> Callable[[str], float]:
    """An argparse type for a numeric setting: a value outside the setting's range is
    refused when the command line is read, with the range in the message."""
    default = getattr(section(), key)
    kind: type[int] | type[float] = float if isinstance(default, float) else int
    bounds = bounds_of(section, key)
    assert bounds is not None, f"{section.__name__}.{key} has no range"
    what = "a whole number" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or bounds.problem(value) is not None:
            shown = text if len(text) <= 24 else text[:21] + "..."
            raise argparse.ArgumentTypeError(f"{shown!r}: must be {what} {bounds}")
        return value

    parse.__name__ = what
    return parse


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(LOG_LEVELS)}")
    return text.upper()


def engine_flags(dest_prefix: str = "") -> argparse.ArgumentParser:
    """The model, server and generation flags. Sub-commands take them as a parent; the
    top-level parser takes a copy whose destinations start with ``dest_prefix``."""
    flags = argparse.ArgumentParser(add_help=False)

    def add(group: Any, flag: str, **kwargs: Any) -> None:
        group.add_argument(flag, dest=dest_prefix + flag[2:].replace("-", "_"), **kwargs)

    group = flags.add_argument_group("model")
    add(group, "--model", metavar="PATH", help="GGUF model file (overrides the config)")
    add(
        group,
        "--ctx",
        type=number_flag(ModelSettings, "n_ctx"),
        metavar="N",
        help="context size in tokens (0: one that fits)",
    )
    add(
        group,
        "--gpu-layers",
        type=number_flag(ModelSettings, "gpu_layers"),
        metavar="N",
        help="layers to offload to the GPU (-1 = all)",
    )
    add(
        group,
        "--threads",
        type=number_flag(ModelSettings, "threads"),
        metavar="N",
        help=f"CPU threads (default: cores; at most {MAX_THREADS})",
    )
    add(
        group,
        "--engine",
        choices=("llama-cpp-python", "xllamacpp"),
        help="in-process engine: llama-cpp-python (one turn at a time) or xllamacpp "
        "(llama.cpp's server engine, --slots turns at once)",
    )
    add(
        group,
        "--slots",
        type=number_flag(ModelSettings, "slots"),
        metavar="N",
        help="turns xllamacpp runs at once (implies --engine xllamacpp; 0: from memory)",
    )
    add(
        group,
        "--log-level",
        type=_log_level,
        metavar="LEVEL",
        help="log file level (DEBUG, INFO...)",
    )
    remote = flags.add_argument_group("remote server (vLLM, SGLang, llama.cpp server)")
    add(
        remote,
        "--server",
        metavar="URL",
        help="OpenAI-compatible endpoint to use instead of a local model",
    )
    add(remote, "--server-model", metavar="NAME", help="model name on the server")
    add(remote, "--api-key-env", metavar="VAR", help="environment variable holding the API key")
    add(
        remote,
        "--idle-timeout",
        type=number_flag(ServerSettings, "idle_timeout"),
        metavar="SECONDS",
        help="give up on a server silent this long (default 120)",
    )
    gen = flags.add_argument_group("generation")
    add(gen, "--temperature", type=number_flag(GenerationSettings, "temperature"), metavar="T")
    add(gen, "--top-p", type=number_flag(GenerationSettings, "top_p"), metavar="P")
    add(gen, "--top-k", type=number_flag(GenerationSettings, "top_k"), metavar="K")
    add(gen, "--max-tokens", type=number_flag(GenerationSettings, "max_tokens"), metavar="N")
    add(gen, "--seed", type=number_flag(GenerationSettings, "seed"), metavar="N", help="-1: random")
    add(
        gen,
        "--reasoning-budget",
        type=number_flag(GenerationSettings, "reasoning_budget"),
        metavar="N",
        help="reasoning tokens before answering (0: no cap)",
    )
    add(
        gen,
        "--no-thinking",
        action="store_true",
        help="answer without reasoning (faster, lower quality)",
    )
    if not dest_prefix:
        flags.set_defaults(takes_engine_flags=True)
    return flags


def merge_leading(args: argparse.Namespace) -> str | None:
    """Move the flags given before the sub-command (``agentworld --server URL predict``)
    to the sub-command, which takes them as its own; a flag the sub-command gave itself
    wins. Returns why a flag cannot be used by the sub-command, or None."""
    leading = {
        dest[len(LEADING) :]: value
        for dest, value in vars(args).items()
        if dest.startswith(LEADING)
    }
    for name in leading:
        delattr(args, LEADING + name)
    command = getattr(args, "command", None)
    refused: list[str] = []
    for name, value in leading.items():
        if command is None:
            setattr(args, name, value)
            continue
        if value is None or value is False:
            continue
        engine_flag = name != "session"
        takes = hasattr(args, name) and (
            not engine_flag or getattr(args, "takes_engine_flags", False)
        )
        if not takes:
            refused.append("--" + name.replace("_", "-"))
        elif getattr(args, name) in (None, False):
            setattr(args, name, value)
    if not refused:
        return None
    many = len(refused) > 1
    return (
        f"{', '.join(refused)} {'are' if many else 'is'} given before {command!r}, "
        f"which does not take {'them' if many else 'it'}"
    )


"""What was wrong with the settings file last read, summed up in a few lines (the app
shows each as a notification)."""


def settings_from_args(args: argparse.Namespace) -> Settings:
    from agentworld_tui.config import config_dir, load_settings, setup_logging
    from agentworld_tui.world.folders import use_user_folder

    use_user_folder(config_dir())  # the user's prompts, scenarios, worlds and models
    loaded = load_settings()
    settings = loaded.settings
    settings.problems = loaded.summary()
    for problem in settings.problems:
        print(f"agentworld: config: {problem}", file=sys.stderr)
    if getattr(args, "model", None):
        settings.model.path = args.model
    for flag, attr in (("ctx", "n_ctx"), ("gpu_layers", "gpu_layers"), ("threads", "threads")):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(settings.model, attr, value)
    if getattr(args, "engine", None):
        settings.model.engine = args.engine
    if getattr(args, "slots", None) is not None:
        settings.model.slots = args.slots
        if not getattr(args, "engine", None):
            settings.model.engine = "xllamacpp"
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
        ("idle_timeout", "idle_timeout"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(settings.server, attr, value)
    if getattr(args, "log_level", None):
        settings.log_level = args.log_level
    setup_logging(settings.log_level)
    return settings


def make_engine(settings: Settings) -> Engine:
    """The engine the settings name; raises UserError when they name none."""
    from agentworld_tui.engines.base import EngineError
    from agentworld_tui.engines.factory import make_engine as engine_for

    try:
        return engine_for(settings.engine_spec())
    except EngineError as exc:
        if settings.engine_spec().given:
            raise UserError(str(exc)) from None
        raise UserError(
            "no model configured: pass --model PATH.gguf (or --server URL), or set "
            f"[model] path in {_settings_file()}"
        ) from None


def _settings_file() -> Path:
    from agentworld_tui.config import settings_path

    return settings_path()
