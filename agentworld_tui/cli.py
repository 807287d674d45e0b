"""The ``agentworld`` command: the app by default, and sub-commands for scripts.

Importing this module is cheap: ``--version`` and ``--help`` never import Textual or
llama.cpp; each sub-command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from agentworld_tui import __version__
from agentworld_tui.launch import (
    LEADING,
    CommandLineParser,
    UserError,
    engine_flags,
    generation_params,
    make_engine,
    merge_leading,
    settings_from_args,
)

# Modules that add sub-commands: each has register(sub, engine_flags) and imports
# nothing heavy at module level.
COMMAND_MODULES: tuple[str, ...] = (
    "agentworld_tui.commands.export",
    "agentworld_tui.commands.demo",
    "agentworld_tui.commands.serve",
    "agentworld_tui.models.commands",
    "agentworld_tui.evaluation.commands",
)


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """The command line; without ``commands``, the app's flags only (no sub-command can be
    named then: ``main`` leaves them out when every word is a flag, as in a plain start)."""
    parser = CommandLineParser(
        prog="agentworld",
        parents=[engine_flags(LEADING)],
        description="Explore a language world model: type an agent's action, see the "
        "environment's predicted next state.",
    )
    parser.add_argument("--version", action="version", version=f"agentworld {__version__}")
    parser.add_argument(
        "--session",
        dest=LEADING + "session",
        metavar="FILE",
        help="open (or create) this session file and save to it",
    )
    if not commands:
        return parser
    engine = engine_flags()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    predict = sub.add_parser(
        "predict", parents=[engine], help="predict one observation and print it"
    )
    predict.add_argument(
        "--domain",
        default="terminal",
        help="terminal (default), mcp, web, android, search, swe or os",
    )
    predict.add_argument(
        "--state",
        metavar="FILE",
        help="the starting state: a text file, a scenario (.toml), or a tool list (.json)",
    )
    predict.add_argument(
        "--reasoning", action="store_true", help="also stream the reasoning to stderr"
    )
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument(
        "--session",
        metavar="FILE",
        help="append the turn to this session file (created if missing); its earlier turns "
        "for the domain are the history",
    )
    predict.add_argument("action", help="the action as the domain writes it, e.g. 'ls -la'")
    predict.set_defaults(handler=cmd_predict)
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, engine)
    return parser


def cmd_predict(args: argparse.Namespace) -> int:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.engines.base import EngineError, Finished, GenerationControl, ReasoningDelta
    from agentworld_tui.engines.turn import run_turn
    from agentworld_tui.world.action import ActionError
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.sanitize import StreamSanitizer, safe_json, sanitize
    from agentworld_tui.world.session import new_session

    settings = settings_from_args(args)
    try:
        domain = get_domain(args.domain)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    scenario = Scenario("cli", "Command line")
    if args.state:
        from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file

        try:
            scenario = load_scenario_file(args.state)
        except ScenarioFileError as exc:
            raise UserError(f"--state: {exc}") from None
    workspace = None
    if args.session:
        from agentworld_tui.commands.session_file import open_session_tab, save_turn

        workspace, session, problems = open_session_tab(
            Path(args.session), domain, scenario, state_given=bool(args.state)
        )
        scenario = session.scenario
    else:
        session, problems = new_session(domain, scenario)
    try:
        action = domain.parse_action(args.action, scenario)
    except ActionError as exc:
        raise UserError(f"invalid action: {exc}") from None
    engine = make_engine(settings)
    for problem in problems:
        print(f"agentworld: {problem}", file=sys.stderr)
    try:
        engine.load()
    except EngineError as exc:
        raise UserError(str(exc)) from None
    turn = session.begin_turn(action)
    live = StreamSanitizer()
    finished: Finished | None = None
    not_saved = ""
    try:
        for event in run_turn(
            engine, session, turn, generation_params(settings), GenerationControl()
        ):
            if isinstance(event, ReasoningDelta) and args.reasoning and not args.json:
                sys.stderr.write(live.feed(event.text))
                sys.stderr.flush()
            elif isinstance(event, Finished):
                finished = event
    finally:
        if workspace is not None:
            try:
                save_turn(workspace, session, turn)
            except UserError as exc:
                not_saved = f"the turn was not saved: {exc}"
                if finished is None:  # stopped before the end: this is the last chance
                    print(f"agentworld: {not_saved}", file=sys.stderr)
    if args.reasoning and not args.json:
        sys.stderr.write(live.finish() + "\n")
    assert finished is not None
    if args.json:
        print(
            safe_json(
                {
                    "domain": domain.name,
                    "turn": turn.number,
                    "action": action.payload,
                    "observation": turn.observation,
                    "reasoning": turn.reasoning,
                    "status": turn.status,
                    "note": turn.note,
                    "stats": turn.stats,
                }
            )
        )
    elif turn.observation:
        print(sanitize(turn.observation))
    failed = turn.status in ("error", "no_answer")
    if failed:
        print(f"agentworld: {turn.note}", file=sys.stderr)
    if not_saved:
        # The prediction is printed above all the same: a failed save must not lose it.
        print(f"agentworld: {not_saved}", file=sys.stderr)
    return 1 if failed or not_saved else 0


def cmd_app(args: argparse.Namespace) -> int:
    import gc

    # Start-up builds a few hundred thousand objects that all stay alive, and the cyclic
    # collector would walk them several times for nothing (about 20 ms here, one full
    # pass among them). The app turns it back on once its tabs are built.
    gc.disable()
    try:
        settings = settings_from_args(args)
        from agentworld_tui.ui.app import AgentWorldApp

        session = Path(args.session).expanduser() if getattr(args, "session", None) else None
        app = AgentWorldApp(settings, session_file=session)
        app.run()
        return app.return_code or 0
    finally:
        gc.enable()  # if the app ended before its tabs were built


def _asks_for_help(word: str) -> bool:
    """``-h``, ``--help``, or an abbreviation of it that argparse accepts (``--he``)."""
    return word == "-h" or (len(word) > 2 and "--help".startswith(word))


@contextlib.contextmanager
def sanitized_output() -> Iterator[None]:
    """Everything the command line writes to stdout and stderr goes through a sanitizer:
    error messages quote servers, files and the environment, and no place that prints
    can forget to clean them. The app's own screen is drawn on ``sys.__stderr__`` and
    bytes written to ``.buffer`` pass as they are."""
    from agentworld_tui.world.sanitize import SanitizingWriter

    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, SanitizingWriter):
        sys.stdout = SanitizingWriter(sys.stdout)
    if not isinstance(sys.stderr, SanitizingWriter):
        sys.stderr = SanitizingWriter(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def main(argv: list[str] | None = None) -> int:
    with sanitized_output():
        return _run(sys.argv[1:] if argv is None else argv)


def _run(words: list[str]) -> int:
    # A plain start (flags only) needs no sub-command: importing their modules and building
    # their parsers would cost the first frame about 7 ms.
    flags_only = all(w.startswith("-") and not _asks_for_help(w) for w in words)
    parser = build_parser(commands=not flags_only)
    args = parser.parse_args(words)
    problem = merge_leading(args)
    if problem is not None:
        parser.error(problem)
    handler = getattr(args, "handler", None) or cmd_app
    try:
        return int(handler(args))
    except UserError as exc:
        print(f"agentworld: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``| head``): not an error worth a traceback.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("agentworld: interrupted", file=sys.stderr)
        return 130
