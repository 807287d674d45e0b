"""A turn reality answers alone (a call routed to a real server, ``simulator.routing``):
the twin carries the action out, and the world model answers only when reality could not
and the front-end's fallback says so."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from agentworld_tui.engines.base import Finished, GenerationParams, GenerationStats
from agentworld_tui.reality.observation import RealObservation, TwinStatus, failed
from agentworld_tui.simulator.queue import EngineQueue
from agentworld_tui.simulator.run import Home, RealSide, Saver, TurnRun
from agentworld_tui.world.session import Session, Turn, TurnStatus

__all__ = ["STOPPED_NOTE", "Fallback", "RealRun"]

log = logging.getLogger("agentworld.routing")

Fallback = Callable[[Turn, RealObservation], bool]
"""Called on the session's thread when reality could not answer a turn routed to it:
True has the world model answer it instead, False fails the turn. It records why on the
turn itself."""

STOPPED_NOTE = "stopped before reality answered"


class RealRun(TurnRun):
    """A turn reality answers alone. The twin carries the action out; the world model is
    not asked. The turn is recorded with reality's answer as its observation (status
    complete, an empty answer included), its ``stats["real"]`` saying how reality
    answered. When reality fails, ``fallback`` decides on the session's thread: the run
    then becomes an ordinary generation of the same turn, or ends in error. Stopped while
    reality works, it ends at once, interrupted (reality's action still runs its course:
    it cannot be called back)."""

    def __init__(
        self,
        session: Session,
        turn: Turn,
        params: GenerationParams,
        *,
        queue: EngineQueue,
        fallback: Fallback,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> None:
        super().__init__(session, turn, params, owner=owner, save=save, home=home)
        self.queue = queue
        self.fallback = fallback
        self.real: RealObservation | None = None
        """Reality's answer, once it came."""
        self.fell_back = False
        """Reality failed and the world model answered instead."""
        self._lock = threading.Lock()
        self._phase: Literal["real", "deciding", "generating", "done"] = "real"

    def begin(self, real: concurrent.futures.Future[RealObservation]) -> None:
        real.add_done_callback(self._real_in)

    def _real_in(self, future: concurrent.futures.Future[RealObservation]) -> None:
        try:
            seen = future.result()
        except BaseException as exc:  # TwinRunner's futures hold values; be sure anyway
            seen = failed(TwinStatus.CRASHED, f"the twin's answer was lost ({type(exc).__name__})")
        with self._lock:
            if self._phase != "real":
                return  # stopped meanwhile
            self.real = seen
            self._phase = "done" if seen.ok else "deciding"
        self.sink(RealSide(seen))
        if seen.ok:
            stats = GenerationStats(elapsed=seen.elapsed)
            self.sink(Finished("", seen.text, True, stats))
        elif self.home is not None:
            self.home(self._decide)
        else:
            self._decide()

    def _decide(self) -> None:
        real = self.real
        assert real is not None
        with self._lock:
            if self._phase != "deciding":
                return
        try:
            again = self.fallback(self.turn, real)
        except Exception:  # a front-end's bug must not lose the turn
            log.exception("deciding a fallback failed")
            again = False
        with self._lock:
            if self._phase != "deciding":
                return
            self._phase = "generating" if again else "done"
        if again:
            self.fell_back = True
            self.queue.submit(self.job)
            return
        why = real.error or f"reality's answer: {real.status.value}"
        self.sink(Finished("", "", False, GenerationStats(stop_reason="error"), error=why))

    def stop(self) -> None:
        super().stop()
        with self._lock:
            waiting = self._phase in ("real", "deciding")
            if waiting:
                self._phase = "done"
        if waiting:
            self.sink(Finished("", "", False, GenerationStats(stop_reason="cancelled")))

    def on_final(self, event: object) -> None:
        assert isinstance(event, Finished)
        if self.fell_back:
            super().on_final(event)
            return
        real = self.real
        stats: dict[str, Any] = {}
        if real is not None:
            stats = {"elapsed": real.elapsed, "real": _how(real)}
        status: TurnStatus
        if event.stats.stop_reason == "cancelled":
            status, note, text = "interrupted", STOPPED_NOTE, ""
        elif event.error or real is None:
            status, note, text = "error", event.error or "reality did not answer", ""
        else:
            status, note, text = "complete", "", real.text
        self.session.finish_turn(
            self.turn, observation=text, reasoning="", status=status, note=note, stats=stats
        )
        if self.save is not None:
            self.save_error = self.save(self.session)


def _how(real: RealObservation) -> dict[str, Any]:
    """How reality answered, without its text (the turn's observation holds it)."""
    return {k: v for k, v in real.to_dict().items() if k != "text"}
