"""The simulator service: the one place turns are run, for every front-end.

It owns the engine queue and the generation settings, knows which sessions have a turn
running, and takes a turn through its whole life: begin (or retry, or a turn a history
edit left pending), generation on the engine's thread, then, on the session's own thread,
record and save. The app, the command line and the agent front-ends all drive it; none of
them has turn logic of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentworld_tui.engines.base import Engine, GenerationParams
from agentworld_tui.simulator.queue import CallJob, EngineQueue
from agentworld_tui.simulator.run import Home, Saver, TurnRun
from agentworld_tui.world.action import Action
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.reality.grounding import Grounding
    from agentworld_tui.reality.twin import TwinRunner
    from agentworld_tui.simulator.real_run import Fallback, RealRun
    from agentworld_tui.simulator.shadow import Shadow

BUSY = "a turn is still running: stop it first"


class SimulatorError(Exception):
    """A turn that cannot start now; the message says why, for the user."""


class Simulator:
    """One engine, many sessions."""

    def __init__(
        self,
        engine: Engine | None,
        params: GenerationParams | None = None,
        *,
        home: Home | None = None,
        engine_error: str = "",
        concurrency: int = 8,
    ) -> None:
        """``concurrency``: turns in flight at once on a server (a local model runs one
        at a time, in order)."""
        self.queue = EngineQueue(engine, concurrency=concurrency)
        self.params = params or GenerationParams()
        self.home = home
        """Where finished turns are recorded for runs that do not name their own."""
        self.engine_error = engine_error
        """Why there is no usable engine ("" when there is, or it is still loading)."""
        self.loaded = False
        self._runs: dict[int, TurnRun] = {}

    # -- the model ----------------------------------------------------------------------
    @property
    def engine(self) -> Engine | None:
        return self.queue.engine

    def load(
        self,
        on_progress: Callable[[str], None] = lambda _message: None,
        on_done: Callable[[str | None], None] = lambda _error: None,
        *,
        engine: Engine | None = None,
    ) -> None:
        """Load the engine (or switch to ``engine``) on the engine's thread; ``on_done`` is
        called there with None or the error."""
        self.loaded = False
        if engine is not None:
            self.engine_error = ""

        def done(error: str | None) -> None:
            self.engine_error = error or ""
            self.loaded = error is None
            on_done(error)

        if engine is None:
            self.queue.load(on_progress, done)
        else:
            self.queue.switch(engine, on_progress, done)

    def load_and_wait(self, engine: Engine | None = None) -> str | None:
        """Load (or switch to ``engine``) and wait; returns the error, or None."""
        done = threading.Event()
        self.load(on_done=lambda _error: done.set(), engine=engine)
        done.wait()
        return self.engine_error or None

    def call(self, job: CallJob) -> None:
        """Any other use of the model, in turn with the generations."""
        self.queue.call(job)

    def problem(self) -> str:
        """Why no turn can run now ("" when one can)."""
        if self.engine is None:
            return self.engine_error or "no model is configured"
        return self.engine_error

    # -- which sessions are busy --------------------------------------------------------
    def running(self, session: Session) -> TurnRun | None:
        run = self._runs.get(id(session))
        return run if run is not None and run.session is session else None

    def busy(self, session: Session) -> bool:
        return self.running(session) is not None

    def any_busy(self) -> bool:
        return bool(self._runs)

    def waiting(self) -> list[str]:
        """Who waits for the engine, in order (for the status line)."""
        return [job.owner for job in self.queue.waiting()]

    # -- turns --------------------------------------------------------------------------
    def send(
        self,
        session: Session,
        action: Action,
        *,
        params: GenerationParams | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
        shadow: Shadow | None = None,
        grounding: Grounding | None = None,
        route: dict[str, Any] | None = None,
    ) -> TurnRun:
        """Begin a turn for ``action`` and queue it; raises SimulatorError when it cannot.

        With a ``shadow``, the twin carries the action out too, at the same time; the run
        (a ``ShadowRun``) completes when both sides are in (see ``simulator.shadow``).
        With a ``grounding``, its examples go into this turn's prompt, and the turn
        records which they were; ``route`` (where routing sent the call, and why) is
        recorded on the turn too."""
        self._check(session)
        if shadow is None:
            turn = session.begin_turn(action)
            turn.route = route
            if grounding is not None:
                turn.grounding = grounding.to_dict()
            return self._submit(session, turn, params, owner, save, home)
        if shadow.runner.domain != session.domain.name:
            raise SimulatorError(
                f"the twin is a {shadow.runner.domain} twin; this session simulates "
                f"{session.domain.name}"
            )
        from agentworld_tui.simulator.shadow import ShadowRun

        turn = session.begin_turn(action)
        turn.route = route
        if grounding is not None:
            turn.grounding = grounding.to_dict()
        if session.twin is None:
            session.twin = shadow.describe()
        real = shadow.runner.submit_act(turn.action)
        run = ShadowRun(
            session,
            turn,
            params or self.params,
            deliver=shadow.deliver,
            real=real,
            owner=owner,
            save=save,
            home=home if home is not None else self.home,
        )
        return self._track(session, run)

    def send_real(
        self,
        session: Session,
        action: Action,
        runner: TwinRunner,
        *,
        fallback: Fallback,
        params: GenerationParams | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
        route: dict[str, Any] | None = None,
    ) -> RealRun:
        """Begin a turn that reality answers alone (a call routed to a real server): the
        twin carries ``action`` out and the world model is not asked; raises
        SimulatorError when the session is busy. When reality cannot answer,
        ``fallback`` says whether the world model answers instead (see ``RealRun``)."""
        if self.busy(session):
            raise SimulatorError(BUSY)
        if runner.domain != session.domain.name:
            raise SimulatorError(
                f"the twin is a {runner.domain} twin; this session simulates {session.domain.name}"
            )
        from agentworld_tui.simulator.real_run import RealRun

        turn = session.begin_turn(action)
        turn.route = route
        run = RealRun(
            session,
            turn,
            params or self.params,
            queue=self.queue,
            fallback=fallback,
            owner=owner,
            save=save,
            home=home if home is not None else self.home,
        )
        self._track(session, run, queue=False)
        run.begin(runner.submit_act(turn.action))
        return run

    def retry(
        self,
        session: Session,
        *,
        params: GenerationParams | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> TurnRun:
        """Ask again for the last turn (its earlier answer stays among its attempts). A
        twinned turn is not carried out in reality again: the new prediction is compared
        with the real answer it has. A turn the rules sent to reality alone is refused: a
        prediction would contradict its record, and carrying the call out again is for
        the person or agent to ask by sending it again."""
        self._check(session)
        if not session.turns:
            raise SimulatorError("there is no turn to retry")
        route = session.turns[-1].route
        if isinstance(route, dict) and route.get("answered") == "real":
            tool = str(route.get("tool") or "this call")
            raise SimulatorError(
                f"this turn was the real server's to answer (the rules send {tool} there): "
                "a retry asks the world model again only for predicted turns; send the "
                "call again to ask the real server again"
            )
        turn = session.retry()
        if turn.reality is None:
            return self._submit(session, turn, params, owner, save, home)
        from agentworld_tui.simulator.shadow import ShadowRun

        run = ShadowRun(
            session,
            turn,
            params or self.params,
            deliver="real" if turn.reality.get("delivered") == "real" else "sim",
            owner=owner,
            save=save,
            home=home if home is not None else self.home,
        )
        return self._track(session, run)

    def resume(
        self,
        session: Session,
        turn: Turn,
        *,
        params: GenerationParams | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> TurnRun:
        """Run a turn that is already pending (a regenerated turn, an edited one on a new
        branch, a recorded trajectory's step)."""
        self._check(session)
        return self._submit(session, turn, params, owner, save, home)

    def stop(self, session: Session) -> bool:
        run = self.running(session)
        if run is None:
            return False
        run.stop()
        return True

    def close(self) -> None:
        """Stop every turn and end the engine's thread (the model is unloaded there)."""
        self.queue.close()

    def _check(self, session: Session) -> None:
        if self.busy(session):
            raise SimulatorError(BUSY)
        problem = self.problem()
        if problem:
            raise SimulatorError(problem)

    def _submit(
        self,
        session: Session,
        turn: Turn,
        params: GenerationParams | None,
        owner: str,
        save: Saver | None,
        home: Home | None,
    ) -> TurnRun:
        run = TurnRun(
            session,
            turn,
            params or self.params,
            owner=owner,
            save=save,
            home=home if home is not None else self.home,
        )
        return self._track(session, run)

    def _track(self, session: Session, run: TurnRun, *, queue: bool = True) -> TurnRun:
        """Count the session busy until ``run`` is recorded, and queue its generation
        (unless ``queue`` is False: a run that queues its own, if any)."""
        key = id(session)
        self._runs[key] = run

        def done(finished: TurnRun) -> None:
            if self._runs.get(key) is finished:
                del self._runs[key]

        run.on_complete.append(done)
        if queue:
            self.queue.submit(run.job)
        return run

    def with_thinking(self, thinking: bool | None) -> GenerationParams:
        """The settings with a session's own thinking switch (None follows the settings)."""
        if thinking is None or thinking == self.params.enable_thinking:
            return self.params
        return replace(self.params, enable_thinking=thinking)
