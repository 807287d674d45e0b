"""The ``agentworld`` command: the app by default, and sub-commands for scripts.

Importing this module is cheap: ``--version`` and ``--help`` never import Textual or
llama.cpp; each sub-command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui import __version__

if TYPE_CHECKING:
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.base import Engine, GenerationParams


class UserError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


def _engine_flags() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("model")
    group.add_argument("--model", metavar="PATH", help="GGUF model file (overrides the config)")
    group.add_argument("--ctx", type=int, metavar="N", help="context size in tokens")
    group.add_argument(
        "--gpu-layers", type=int, metavar="N", help="layers to offload to the GPU (-1 = all)"
    )
    group.add_argument("--threads", type=int, metavar="N", help="CPU threads (default: cores)")
    group.add_argument("--log-level", metavar="LEVEL", help="log file level (DEBUG, INFO...)")
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
        "--no-thinking", action="store_true", help="answer without reasoning (faster, lower quality)"
    )
    return flags


def build_parser() -> argparse.ArgumentParser:
    engine = _engine_flags()
    parser = argparse.ArgumentParser(
        prog="agentworld",
        parents=[engine],
        description="Explore a language world model: type an agent's action, see the "
        "environment's predicted next state.",
    )
    parser.add_argument("--version", action="version", version=f"agentworld {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    predict = sub.add_parser(
        "predict", parents=[engine], help="predict one observation and print it"
    )
    predict.add_argument("--domain", default="terminal", help="terminal (default)")
    predict.add_argument("--state", metavar="FILE", help="the starting state (a text file)")
    predict.add_argument(
        "--reasoning", action="store_true", help="also stream the reasoning to stderr"
    )
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument("action", help="the action as the domain writes it, e.g. 'ls -la'")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    from agentworld_tui.config import load_settings, setup_logging

    loaded = load_settings()
    settings = loaded.settings
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
    from agentworld_tui.engines.llama import LlamaEngine

    m = settings.model
    if not m.path:
        raise UserError(
            "no model configured: pass --model PATH.gguf, or set [model] path in "
            f"{_settings_file()}"
        )
    return LlamaEngine(m.path, n_ctx=m.n_ctx, gpu_layers=m.gpu_layers, threads=m.threads)


def _settings_file() -> Path:
    from agentworld_tui.config import settings_path

    return settings_path()


def cmd_predict(args: argparse.Namespace) -> int:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.engines.base import EngineError, Finished, GenerationControl, ReasoningDelta
    from agentworld_tui.engines.turn import run_turn
    from agentworld_tui.world.action import ActionError
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.sanitize import StreamSanitizer, sanitize
    from agentworld_tui.world.session import new_session

    settings = _settings(args)
    try:
        domain = get_domain(args.domain)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    state = ""
    if args.state:
        try:
            state = Path(args.state).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read --state {args.state}: {exc}") from None
    scenario = Scenario("cli", "Command line", state=state)
    try:
        action = domain.parse_action(args.action, scenario)
    except ActionError as exc:
        raise UserError(f"invalid action: {exc}") from None
    engine = make_engine(settings)
    session, problems = new_session(domain, scenario)
    for problem in problems:
        print(f"agentworld: {problem}", file=sys.stderr)
    try:
        engine.load()
    except EngineError as exc:
        raise UserError(str(exc)) from None
    turn = session.begin_turn(action)
    live = StreamSanitizer()
    finished: Finished | None = None
    for event in run_turn(engine, session, turn, generation_params(settings), GenerationControl()):
        if isinstance(event, ReasoningDelta) and args.reasoning and not args.json:
            sys.stderr.write(live.feed(event.text))
            sys.stderr.flush()
        elif isinstance(event, Finished):
            finished = event
    if args.reasoning and not args.json:
        sys.stderr.write(live.finish() + "\n")
    assert finished is not None
    if args.json:
        print(
            json.dumps(
                {
                    "domain": domain.name,
                    "action": action.payload,
                    "observation": turn.observation,
                    "reasoning": turn.reasoning,
                    "status": turn.status,
                    "note": turn.note,
                    "stats": turn.stats,
                },
                ensure_ascii=False,
            )
        )
    elif turn.observation:
        print(sanitize(turn.observation))
    if turn.status in ("error", "no_answer"):
        print(f"agentworld: {turn.note}", file=sys.stderr)
        return 1
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from agentworld_tui.ui.app import AgentWorldApp

    app = AgentWorldApp(settings)
    app.run()
    return app.return_code or 0


COMMANDS: dict[str, Any] = {"predict": cmd_predict}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = COMMANDS.get(args.command or "", cmd_app)
    try:
        return int(handler(args))
    except UserError as exc:
        print(f"agentworld: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("agentworld: interrupted", file=sys.stderr)
        return 130
