"""``--schedule FILE`` and ``--schedule-seed N``: the same two flags on every server that
injects perturbations (``mcp serve``, ``env serve``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError

if TYPE_CHECKING:
    from agentworld_tui.agents.schedule import Schedule


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("the seed must be a whole number") from None


def add_schedule_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--schedule", metavar="FILE", help="a perturbation schedule (TOML or JSON, docs/agents.md)"
    )
    parser.add_argument(
        "--schedule-seed", type=_seed, metavar="N", help="replace the schedule's seed"
    )


def schedule_from_args(args: argparse.Namespace, domain: str) -> Schedule | None:
    """The schedule the flags name, or None; a bad file is a UserError saying why."""
    if not args.schedule:
        if args.schedule_seed is not None:
            raise UserError("--schedule-seed goes with --schedule")
        return None
    from agentworld_tui.agents.schedule import ScheduleError, load_schedule

    try:
        schedule = load_schedule(args.schedule, domain)
    except ScheduleError as exc:
        raise UserError(str(exc)) from None  # it names the file
    return schedule if args.schedule_seed is None else schedule.with_seed(args.schedule_seed)
