"""The ``agentworld`` command: the app by default, and sub-commands for scripts.

Importing this module is cheap: ``--version`` and ``--help`` never import Textual or
llama.cpp; each sub-command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from agentworld_tui import __version__
from agentworld_tui.cli.launch import (
    LEADING,
    CommandLineParser,
    UserError,
    engine_flags,
    merge_leading,
    settings_from_args,
)
from agentworld_tui.cli.twin_flags import APP_TABS, add_twin_flags

# Modules that add sub-commands: each has register(sub, engine_flags) and imports
# nothing heavy at module level.
COMMAND_MODULES: tuple[str, ...] = (
    "agentworld_tui.cli.predict",
    "agentworld_tui.cli.export",
    "agentworld_tui.cli.demo",
    "agentworld_tui.cli.serve",
    "agentworld_tui.cli.models",
    "agentworld_tui.cli.bench",
    "agentworld_tui.cli.env",
    "agentworld_tui.cli.rollout",
    "agentworld_tui.cli.mcp",
    "agentworld_tui.cli.traces",
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
    parser.add_argument(
        "--tab",
        dest=LEADING + "tab",
        choices=APP_TABS,
        help="the tab the twin flags below are for (default: terminal, or mcp for "
        "--twin-command/--twin-url)",
    )
    add_twin_flags(parser, LEADING)
    if not commands:
        return parser
    engine = engine_flags()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, engine)
    return parser


def cmd_app(args: argparse.Namespace) -> int:
    # Start-up builds a few hundred thousand objects that all stay alive, and the cyclic
    # collector would walk them several times for nothing (about 20 ms here, one full
    # pass among them). The app turns it back on once its tabs are built.
    gc.disable()
    try:
        settings = settings_from_args(args)
        from agentworld_tui.cli.twin_flags import app_twin_from_args
        from agentworld_tui.ui.app import AgentWorldApp

        session = Path(args.session).expanduser() if getattr(args, "session", None) else None
        twin = app_twin_from_args(args)
        try:
            app = AgentWorldApp(settings, session_file=session, twin=twin)
            app.run()
        finally:
            if twin is not None:  # closed already when the app took it; else here
                twin[1].runner.close()
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
    from agentworld_tui.config import config_dir
    from agentworld_tui.world.folders import use_user_folder

    use_user_folder(config_dir())  # the user's prompts, scenarios, worlds and models
    import agentworld_tui.domains  # noqa: F401  (registers the shipped domains; cheap)

    try:
        return int(handler(args))
    except UserError as exc:
        print(f"agentworld: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``| head``): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("agentworld: interrupted", file=sys.stderr)
        return 130
