"""One implementation for the blocking methods and their asyncio twins.

An operation that waits (settle a step left in flight, load the model, wait for steps) is
written once, as a generator that yields each ``Wait`` it needs and is sent what the wait
gave, or has its error raised at the ``yield``, as a coroutine would at its ``await``.
``run_blocking`` runs it by blocking the calling thread at each wait, ``run_async`` by
awaiting on the running event loop: ``env.step`` and ``env.astep`` are the same plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any, Protocol, TypeVar

from agentworld_tui.simulator import Home, home_on

__all__ = ["HOME", "Plan", "Wait", "run_async", "run_blocking"]

T = TypeVar("T")


class Wait(Protocol):
    """What a plan stops for; whoever runs the plan chooses how to wait."""

    def block(self) -> Any:
        """Wait by blocking the calling thread; the plan is sent what this returns."""

    async def wait(self) -> Any:
        """Wait on the running event loop; the plan is sent what this returns."""


Plan = Generator[Wait, Any, T]


def run_blocking(plan: Plan[T]) -> T:
    try:
        wait = next(plan)
        while True:
            try:
                given = wait.block()
            except BaseException as exc:
                wait = plan.throw(exc)
            else:
                wait = plan.send(given)
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]
    finally:
        plan.close()


async def run_async(plan: Plan[T]) -> T:
    try:
        wait = next(plan)
        while True:
            try:
                given = await wait.wait()
            except BaseException as exc:
                wait = plan.throw(exc)
            else:
                wait = plan.send(given)
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]
    finally:
        plan.close()


class _Home:
    """Where the turns a plan begins are recorded: on the running event loop, or (None)
    by the blocked thread that waits for them."""

    def block(self) -> Home | None:
        return None

    async def wait(self) -> Home | None:
        return home_on(asyncio.get_running_loop())


HOME: Wait = _Home()
