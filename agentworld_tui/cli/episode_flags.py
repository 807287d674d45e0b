"""``--max-steps N`` and ``--concurrency N``: the flags of every command that plays
episodes on the simulator (``env serve``, ``rollout``), each with its own default and help,
and the whole-number type they and the other counts of those commands are read with."""

from __future__ import annotations

import argparse
from collections.abc import Callable

MAX_CONCURRENCY = 4096
"""The most requests in flight a command asks a server for."""


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, refused with the range."""

    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}")
        return int(text)

    parse.__name__ = "a whole number"
    return parse


def add_max_steps(
    parser: argparse._ActionsContainer, *, most: int, default: int | None, help: str
) -> None:
    """An episode's step limit (``parser``: a parser or an argument group)."""
    parser.add_argument("--max-steps", type=whole(1, most), default=default, metavar="N", help=help)


def add_concurrency(parser: argparse._ActionsContainer, *, default: int | None, help: str) -> None:
    """The world-model requests in flight on a server at once (a local model runs one at a
    time whatever it is)."""
    parser.add_argument(
        "--concurrency",
        type=whole(1, MAX_CONCURRENCY),
        default=default,
        metavar="N",
        help=help,
    )
