"""One model, many tabs: turns run one at a time, in the order they were asked for.

The engine lives on a single worker thread (llama.cpp contexts are not thread-safe, and a
model load must never block the UI). Every local model decodes there, a judge's too:
llama.cpp's CPU threads come from OpenMP, which keeps a pool of them for each thread that
starts compute, and a second pool leaves more pool threads than cores, so that each of
them sleeps after a few spins at every barrier (the same model then decodes at a half or
less of its speed here). Jobs report their events through a callback called on
that thread; the caller decides how to hand them to its own thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
)
from agentworld_tui.engines.turn import run_turn
from agentworld_tui.world.session import Session, Turn

log = logging.getLogger("agentworld.queue")

EventSink = Callable[[EngineEvent], None]


@dataclass(eq=False)
class TurnJob:
    """One turn to stream; its events go to ``sink`` from the engine thread."""

    owner: str
    """Who asked (a tab name), for the status bar."""
    session: Session
    turn: Turn
    params: GenerationParams
    sink: EventSink
    control: GenerationControl = field(default_factory=GenerationControl)


@dataclass(eq=False)
class LoadJob:
    """Load the model (or replace the engine), reporting progress from the engine thread."""

    on_progress: Callable[[str], None]
    on_done: Callable[[str | None], None]
    """Called with None on success, else the error message."""
    engine: Engine | None = None
    """A new engine replacing the current one (which is unloaded first)."""


@dataclass(eq=False)
class CallJob:
    """Any other use of the loaded model (a judgement, say), in turn with the rest."""

    call: Callable[[Engine], object]
    on_done: Callable[[object, str | None], None]
    """Called with the result, or with None and the error message."""
    needs_model: bool = True
    """False for a call that brings its own model (a judge's): it runs with none loaded,
    and is handed the queue's engine, whatever its state, or None."""


class EngineQueue:
    def __init__(self, engine: Engine | None) -> None:
        self.engine = engine
        self._jobs: queue.Queue[TurnJob | LoadJob | CallJob | None] = queue.Queue()
        self._waiting: list[TurnJob] = []
        self._lock = threading.Lock()
        self.running: TurnJob | None = None
        self._thread = threading.Thread(target=self._work, name="engine", daemon=True)
        self._thread.start()

    # -- asking ---------------------------------------------------------------------------
    def load(
        self, on_progress: Callable[[str], None], on_done: Callable[[str | None], None]
    ) -> None:
        self._jobs.put(LoadJob(on_progress, on_done))

    def switch(
        self,
        engine: Engine,
        on_progress: Callable[[str], None],
        on_done: Callable[[str | None], None],
    ) -> None:
        """Use another model from now on: turns already asked for finish on the old one."""
        self._jobs.put(LoadJob(on_progress, on_done, engine))

    def call(self, job: CallJob) -> None:
        self._jobs.put(job)

    def submit(self, job: TurnJob) -> None:
        with self._lock:
            self._waiting.append(job)
        self._jobs.put(job)

    def waiting(self) -> list[TurnJob]:
        with self._lock:
            return list(self._waiting)

    def cancel(self, job: TurnJob) -> None:
        """Stop a running job at once; a waiting one never starts."""
        job.control.cancel()

    def close(self) -> None:
        if self.running is not None:
            self.running.control.cancel()
        with self._lock:
            for job in self._waiting:
                job.control.cancel()
        self._jobs.put(None)

    # -- the worker -----------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            if isinstance(job, LoadJob):
                self._load(job)
                continue
            if isinstance(job, CallJob):
                self._call(job)
                continue
            with self._lock:
                if job in self._waiting:
                    self._waiting.remove(job)
                self.running = job
            try:
                self._run(job)
            finally:
                self.running = None
        if self.engine is not None and self.engine.loaded:
            self.engine.unload()

    def _load(self, job: LoadJob) -> None:
        if job.engine is not None:
            if self.engine is not None and self.engine.loaded:
                self.engine.unload()
            self.engine = job.engine
        if self.engine is None:
            job.on_done("no model configured")
            return
        try:
            self.engine.load(job.on_progress)
        except EngineError as exc:
            job.on_done(str(exc))
        except Exception as exc:  # never let the worker die: report it instead
            log.exception("model load failed")
            job.on_done(f"could not load the model: {exc}")
        else:
            job.on_done(None)

    def _call(self, job: CallJob) -> None:
        if job.needs_model and (self.engine is None or not self.engine.loaded):
            job.on_done(None, "no model is loaded")
            return
        try:
            result = job.call(self.engine)  # type: ignore[arg-type]  # None: needs_model off
        except Exception as exc:  # reported, never fatal to the worker
            log.exception("engine call failed")
            job.on_done(None, str(exc))
        else:
            job.on_done(result, None)

    def _run(self, job: TurnJob) -> None:
        if job.control.cancelled:
            job.session.finish_turn(
                job.turn,
                observation="",
                reasoning="",
                status="interrupted",
                note="stopped before it started",
            )
            job.sink(Finished("", "", False, GenerationStats(stop_reason="cancelled")))
            return
        if self.engine is None or not self.engine.loaded:
            reason = "no model is loaded"
            job.session.finish_turn(
                job.turn, observation="", reasoning="", status="error", note=reason
            )
            job.sink(Finished("", "", False, GenerationStats(stop_reason="error"), error=reason))
            return
        try:
            for step in run_turn(self.engine, job.session, job.turn, job.params, job.control):
                job.sink(step)
        except Exception as exc:  # a bug must not kill the worker or lose the turn
            log.exception("turn failed")
            message = f"internal error: {exc}"
            job.session.finish_turn(
                job.turn, observation="", reasoning="", status="error", note=message
            )
            job.sink(Finished("", "", False, GenerationStats(stop_reason="error"), error=message))
