"""``agentworld demo SCRIPT``: play a scripted run into the real app, typing at a human
pace, so a screen recorder captures a clean take; ``--screenshots DIR`` saves an SVG after
each action. The script's format is ``SCRIPT_FORMAT`` (shown by ``demo --help``); examples
ship in ``agentworld_tui/demos`` and are played by name (``agentworld demo tour``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError
from agentworld_tui.ui.demo_script import (
    DEFAULT_SIZE,
    SCRIPT_FORMAT,
    SHIPPED_DEMOS,
    DemoScript,
    DemoScriptError,
    demo_script_path,
    load_demo,
)

if TYPE_CHECKING:
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.base import Engine
    from agentworld_tui.ui.demo import DemoOutcome


def _size(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError("give the size as WIDTHxHEIGHT, e.g. 132x40")
    size = int(width), int(height)
    if not (40 <= size[0] <= 500 and 12 <= size[1] <= 300):
        raise argparse.ArgumentTypeError("the size must be 40x12 to 500x300 cells")
    return size


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "demo",
        parents=[engine],
        help="play a demo script into the app (for screen recordings)",
        description="Play a demo script (TOML: per tab, the actions to type and the pauses) "
        "into the real app at a human typing pace, waiting for every turn to finish.",
        epilog=SCRIPT_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "script",
        metavar="SCRIPT",
        help=f"the demo script (.toml), or a shipped example: {', '.join(SHIPPED_DEMOS)}",
    )
    parser.add_argument(
        "--screenshots", metavar="DIR", help="save an SVG of the screen after each action here"
    )
    parser.add_argument(
        "--cps", type=float, metavar="N", help="typing speed in characters per second (0: at once)"
    )
    parser.add_argument(
        "--headless",
        action="store_true",
        help="run without showing the app (with --screenshots: make screenshots only)",
    )
    parser.add_argument(
        "--size",
        type=_size,
        metavar="WxH",
        help=f"screen size in cells when headless (default {DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]})",
    )
    parser.add_argument(
        "--stay", action="store_true", help="keep the app open after the last action"
    )
    parser.add_argument(
        "--session",
        metavar="FILE",
        help="save the demo's turns to this session file (default: a temporary one)",
    )
    parser.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from agentworld_tui.cli.launch import make_engine, settings_from_args

    try:
        script = load_demo(demo_script_path(args.script))
    except DemoScriptError as exc:
        raise UserError(str(exc)) from None
    if args.cps is not None:
        if args.cps < 0:
            raise UserError("--cps must be 0 or more")
        script = DemoScript(script.tabs, args.cps, script.pause, script.start_pause)
    if args.stay and args.headless:
        raise UserError("--stay needs the app on screen: leave out --headless")
    settings = settings_from_args(args)
    engine = make_engine(settings)
    shots = Path(args.screenshots).expanduser() if args.screenshots else None
    with tempfile.TemporaryDirectory(prefix="agentworld-demo-") as scratch:
        session = Path(args.session).expanduser() if args.session else None
        outcome = run_demo(
            settings,
            engine,
            script,
            screenshots=shots,
            headless=args.headless,
            size=args.size or DEFAULT_SIZE,
            stay=args.stay,
            session_file=session or Path(scratch) / "demo-session.json",
        )
    for path in outcome.screenshots:
        print(f"agentworld: screenshot {path}", file=sys.stderr)
    for warning in outcome.warnings:
        print(f"agentworld: {warning}", file=sys.stderr)
    if outcome.error:
        print(f"agentworld: demo stopped: {outcome.error}", file=sys.stderr)
        return 1
    return 1 if outcome.warnings else 0


def run_demo(
    settings: Settings,
    engine: Engine,
    script: DemoScript,
    *,
    screenshots: Path | None,
    headless: bool,
    size: tuple[int, int],
    stay: bool,
    session_file: Path,
) -> DemoOutcome:
    """Start the app and play ``script`` into it; returns the ``DemoOutcome``."""
    from agentworld_tui.ui.app import AgentWorldApp
    from agentworld_tui.ui.demo import DemoPlayer

    app = AgentWorldApp(settings, engine=engine, offer_resume=False)
    app.workspace.path = session_file
    player = DemoPlayer(script, screenshots=screenshots, quit_at_end=not stay)
    if headless:
        app.run(headless=True, size=size, auto_pilot=player.play)
    else:
        app.run(auto_pilot=player.play)
    return player.outcome
