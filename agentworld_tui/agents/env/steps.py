"""An environment's steps on their way: ``PendingStep`` (wait, await or cancel one),
the waits a plan yields for them (``Recorded``, ``Results``), and what a routed step
settles once its turn is recorded (``RoutedStep``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agentworld_tui.agents.env.plans import Plan
from agentworld_tui.agents.env.results import StepResult
from agentworld_tui.agents.env.routing import keep_later
from agentworld_tui.agents.schedule import Decision
from agentworld_tui.reality.routing import Decision as RouteDecision
from agentworld_tui.simulator import TurnRun, home_on
from agentworld_tui.simulator.real_run import RealRun
from agentworld_tui.simulator.routing import RoutedSession

if TYPE_CHECKING:
    from agentworld_tui.reality.observation import RealObservation

__all__ = ["PendingStep", "Recorded", "Results", "RoutedStep"]


class StepOwner(Protocol):
    """What a step needs of the environment it is taken in (``Environment``)."""

    def _result_of(self, pending: PendingStep) -> StepResult: ...

    def _after_step_plan(self, result: StepResult, pending: PendingStep) -> Plan[StepResult]: ...


class PendingStep:
    """A step on its way: wait for it (``wait``, or ``await result()``), or ``cancel`` it."""

    def __init__(
        self,
        environment: StepOwner,
        run: TurnRun,
        *,
        started: float,
        preset: str,
        decisions: Sequence[Decision] = (),
    ) -> None:
        self.environment = environment
        self.run = run
        self.started = started
        self.preset = preset
        self.decisions = tuple(decisions)
        self.ended = 0.0
        self.routed: RoutedSession | None = None
        """The episode's routing, where the step went through it."""
        self.keeping: concurrent.futures.Future[int] | None = None
        """Reality's answers on their way into the trace store."""
        self._result: StepResult | None = None
        run.on_complete.append(self._mark_end)

    def _mark_end(self, _run: object) -> None:
        self.ended = time.monotonic()

    @property
    def done(self) -> bool:
        return self.run.completed

    def cancel(self) -> None:
        """Stop the request in flight; the turn is kept, interrupted."""
        self.run.stop()

    def wait(self) -> StepResult:
        """Block until the step is recorded (the calling thread owns the environment)."""
        self.run.wait()
        return self._finish()

    async def result(self) -> StepResult:
        """Wait on the event loop; cancelling the waiting task stops the request (the turn
        is recorded, interrupted, before the cancellation goes on)."""
        try:
            await self.recorded()
        except asyncio.CancelledError:
            self.run.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.recorded())
            raise
        return self._finish()

    async def recorded(self) -> None:
        """Wait on the event loop until the turn is recorded (and saved)."""
        if self.run.completed:
            return
        done = asyncio.Event()
        self.run.on_complete.append(lambda _run: done.set())
        if self.run.home is None:  # begun without a loop: this one records it
            self.run.home = home_on(asyncio.get_running_loop())
            self.run.home(self.run.complete)
        if self.run.completed:
            return
        await done.wait()

    def _finish(self) -> StepResult:
        if self._result is None:
            self._result = self.environment._result_of(self)
            routed = self.routed
            found = routed.exchanges(self.run) if routed is not None else []
            if routed is not None and found:
                self.keeping = keep_later(routed, found)
        return self._result


class Recorded:
    """A plan's wait for a step left in flight (cancelled, or never waited for) to be
    recorded, so that the history is settled; cancelling the waiting task waits on."""

    def __init__(self, pending: PendingStep) -> None:
        self.pending = pending

    def block(self) -> None:
        self.pending.wait()

    async def wait(self) -> None:
        await asyncio.shield(self.pending.recorded())


class Results:
    """A plan's wait for steps begun together, their results in the same order.
    Cancelling the waiting task stops them all, and every turn is recorded, interrupted,
    before the cancellation goes on."""

    def __init__(self, pending: Sequence[PendingStep]) -> None:
        self.pending = tuple(pending)

    def block(self) -> list[StepResult]:
        return [p.wait() for p in self.pending]

    async def wait(self) -> list[StepResult]:
        try:
            return list(await asyncio.gather(*(p.result() for p in self.pending)))
        except asyncio.CancelledError:
            for p in self.pending:
                p.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(asyncio.gather(*(p.recorded() for p in self.pending)))
            raise


class RoutedStep:
    """One routed step: where it was decided to go, and its run once begun. Settled on
    the session's thread when the turn is recorded, before it is saved."""

    def __init__(self, routed: RoutedSession) -> None:
        self.routed = routed
        self.decision: RouteDecision | None = None
        self.run: TurnRun | None = None

    def settle(self) -> None:
        """A shadowed step whose real answer was to be delivered and failed: the rule's
        ``on_failure`` has the world model's answer stand (the route says so), or fails
        the step (nothing is delivered; the prediction stays in the turn's raw text)."""
        run = self.run
        if run is None:
            return
        turn = run.turn
        why = self.routed.settle(run, self.decision)
        if why:
            turn.status = "error"
            turn.note = f"{REAL_FAILED}: {why}"
            turn.observation = ""
        elif isinstance(run, RealRun) and not run.fell_back and turn.status == "error":
            failed = (turn.route or {}).get("failed")
            if failed:
                turn.note = f"{REAL_FAILED}: {failed}"


REAL_FAILED = "the twin could not answer"


def real_of(run: TurnRun) -> RealObservation | None:
    """Reality's answer to a step routed to it alone (None for any other step)."""
    return run.real if isinstance(run, RealRun) else None


def grounding_figures(grounding: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a step says of its examples: which were shown and what they took, without
    their text (the session file keeps it)."""
    if not isinstance(grounding, dict):
        return None
    return {k: v for k, v in grounding.items() if k != "text"}
