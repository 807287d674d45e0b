"""Shadow mode: every action goes to the world model and to a real twin at once.

``Simulator.send(session, action, shadow=Shadow(runner))`` submits the action to the twin
(``TwinRunner.submit_act``) and queues the generation; the turn completes when both sides
are in. Then, off the session's thread, the prediction is compared with reality
(``divergence``), and on the session's thread, as for every turn, the turn is recorded with
its reality record and saved. The agent receives the side ``deliver`` names; reality's
only when it answered (a twin that failed leaves the episode going on in simulation, and
the record says why). A stopped turn waits for reality at most ``STOPPED_WAIT`` seconds;
an answer that comes later is recorded then, where the run has a ``home``.

At the episode's end, ``end_episode`` runs the task's check in the twin and records it,
with the episode's figures, in ``session.twin``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from agentworld_tui.engines.base import Finished, GenerationParams
from agentworld_tui.reality.divergence import Divergence
from agentworld_tui.reality.figures import EpisodeFigures, episode_figures, step_divergence
from agentworld_tui.reality.observation import CheckResult, RealObservation, TwinStatus, failed
from agentworld_tui.reality.spec import Deliver, TwinSpec
from agentworld_tui.reality.twin import CHECK_SECONDS, TwinRunner
from agentworld_tui.simulator.run import Home, RealSide, Saver, TurnRun
from agentworld_tui.world.session import Session, Turn

__all__ = [
    "STOPPED_WAIT",
    "Shadow",
    "ShadowRun",
    "end_episode",
    "end_episode_async",
    "reality_record",
    "record_episode",
    "session_figures",
]

STOPPED_WAIT = 1.0
"""Seconds a stopped turn still waits for reality before it is recorded without it."""
STOPPED_NOTE = "the turn was stopped before reality answered"


@dataclass(frozen=True)
class Shadow:
    """A twin beside a session's turns, and which side the agent receives."""

    runner: TwinRunner
    deliver: Deliver = "real"
    spec: TwinSpec | None = None
    """What was started (described in the session file); None for a twin made by hand."""
    check: str = ""
    """The task's check, run in the twin at the episode's end ("" for none)."""
    first: RealObservation | None = None
    """The twin's first state, as it started (a terminal's first screen): a front-end may
    give it to the world model as the scenario's state, so both sides start alike."""

    def describe(self) -> dict[str, Any]:
        """``session.twin`` for a session this shadow starts to follow."""
        out: dict[str, Any] = (
            self.spec.describe() if self.spec else {"domain": self.runner.domain, "kind": "twin"}
        )
        out["deliver"] = self.deliver
        if self.check:
            out["check"] = {"command": self.check}
        return out


def reality_record(
    predicted: str, real: RealObservation, domain: str, deliver: str
) -> dict[str, Any]:
    """A twinned turn's record: reality's answer, the prediction's divergence from it
    (None when reality gave none), and the side delivered: reality's only when it
    answered."""
    found = step_divergence(predicted, real, domain)
    return {
        "real": real.to_dict(),
        "divergence": None if found is None else found.to_dict(),
        "delivered": "real" if deliver == "real" and real.ok else "sim",
    }


_comparer: concurrent.futures.ThreadPoolExecutor | None = None
_comparer_lock = threading.Lock()


def _compare(call: Any, *args: Any) -> None:
    """Run a comparison on a thread of its own: neither the engine's thread (other
    sessions' generations wait on it) nor the session's (it draws)."""
    global _comparer
    with _comparer_lock:
        if _comparer is None:
            # One thread: a late answer's record always follows the turn's own.
            _comparer = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="divergence"
            )
        pool = _comparer
    try:
        pool.submit(call, *args)
    except RuntimeError:  # the interpreter is shutting down: the turn must still end
        call(*args)


class ShadowRun(TurnRun):
    """A turn whose action a twin carries out too. It completes when the world model has
    answered and reality has (or failed, or the turn was stopped and ``STOPPED_WAIT``
    passed); ``reality`` is then the turn's reality record.

    With ``real`` None, the turn's recorded real side is compared again (a retry: reality
    is not asked twice)."""

    def __init__(
        self,
        session: Session,
        turn: Turn,
        params: GenerationParams,
        *,
        deliver: Deliver,
        real: concurrent.futures.Future[RealObservation] | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> None:
        super().__init__(session, turn, params, owner=owner, save=save, home=home)
        self.deliver = deliver
        self.domain = session.domain.name
        self.real: RealObservation | None = None
        """Reality's answer, once it came."""
        self.generated_at = 0.0
        """When the world model's last event came (monotonic; 0 until then)."""
        self.real_at = 0.0
        """When reality's answer came (monotonic; 0 until then)."""
        self._state = threading.Lock()
        self._emitting = threading.Lock()
        self._generated: Finished | None = None
        self._settling = False
        self._waited_out = False
        self._placeholder = False
        """The turn was recorded without reality's answer (stopped, and it did not come)."""
        self._timer: threading.Timer | None = None
        if real is None:
            kept = (turn.reality or {}).get("real") or {}
            self.real = RealObservation.from_dict(kept)
            self._recorded_delivered = str((turn.reality or {}).get("delivered", "sim"))
            self.real_at = time.monotonic()
        else:
            self._recorded_delivered = ""
            real.add_done_callback(self._real_in)

    # -- the two sides, from any thread ---------------------------------------------------
    def sink(self, event: object) -> None:
        if type(event) is not Finished:
            self._emit(event)
            return
        assert isinstance(event, Finished)
        with self._state:
            self._generated = event
            self.generated_at = time.monotonic()
            waiting = self.real is None
        if waiting:
            self._emit(RealSide(None))
            if self.control.cancelled:
                self._arm_stop_wait()
        self._settle_when_ready()

    def stop(self) -> None:
        super().stop()
        with self._state:
            answered = self._generated is not None
        if answered:
            self._arm_stop_wait()

    def _real_in(self, future: concurrent.futures.Future[RealObservation]) -> None:
        try:
            seen = future.result()
        except BaseException as exc:  # TwinRunner's futures hold values; be sure anyway
            seen = failed(TwinStatus.CRASHED, f"the twin's answer was lost ({type(exc).__name__})")
        with self._state:
            self.real = seen
            self.real_at = time.monotonic()
            late = self._placeholder
        self._emit(RealSide(seen))
        if late:
            _compare(self._record_late, seen)
        else:
            self._settle_when_ready()

    # -- completing ---------------------------------------------------------------------
    def _arm_stop_wait(self) -> None:
        with self._state:
            if self._timer is not None or self.real is not None or self._settling:
                return
            self._timer = threading.Timer(STOPPED_WAIT, self._stop_wait_over)
            self._timer.daemon = True
        self._timer.start()

    def _stop_wait_over(self) -> None:
        with self._state:
            if self.real is not None or self._settling:
                return
            self._waited_out = True
        self._settle_when_ready()

    def _settle_when_ready(self) -> None:
        with self._state:
            generated = self._generated
            if self._settling or generated is None:
                return
            real = self.real
            if real is None:
                if not self._waited_out:
                    return
                real = failed(TwinStatus.TIMEOUT, STOPPED_NOTE)
                self._placeholder = True
            self._settling = True
        _compare(self._settle, generated, real)

    def _settle(self, generated: Finished, real: RealObservation) -> None:
        """Compare the two sides (off the session's thread), then hand the world model's
        last event in: the session's thread records the turn with ``reality``."""
        try:
            self.reality = self._record_for(generated.observation, real)
        except Exception as exc:  # a comparison bug must not lose the turn
            self.reality = {
                "real": real.to_dict(),
                "divergence": None,
                "delivered": "sim",
                "error": f"the comparison failed: {type(exc).__name__}: {exc}",
            }
        self._emit(generated)

    def _record_for(self, predicted: str, real: RealObservation) -> dict[str, Any]:
        made = reality_record(predicted, real, self.domain, self.deliver)
        if self._recorded_delivered:  # a retry: what the agent received stays as it was
            made["delivered"] = self._recorded_delivered
        return made

    def _record_late(self, real: RealObservation) -> None:
        """Reality answered after the stopped turn was recorded: keep its answer too (the
        agent received the other side, so ``delivered`` stays)."""
        generated = self._generated
        if generated is None or self.home is None:
            return
        made = self._record_for(generated.observation, real)
        made["delivered"] = "sim"
        made["note"] = "reality answered after the turn was stopped"

        def keep() -> None:
            recorded = self.turn.reality is self.reality is not None
            if not recorded or not any(t is self.turn for t in self.session.turns):
                return  # retried, undone or edited since: that turn is another now
            self.turn.reality = made
            self.reality = made
            if self.save is not None:
                self.save_error = self.save(self.session)

        self.home(keep)

    def _emit(self, event: object) -> None:
        with self._emitting:  # the engine's, the twin's and the comparer's threads
            TurnRun.sink(self, event)


# -- the episode's end ---------------------------------------------------------------------
def _divergence_of(turn: Turn) -> Divergence | None:
    found = (turn.reality or {}).get("divergence")
    return Divergence.from_dict(found) if isinstance(found, dict) else None


def session_figures(
    session: Session, *, check: CheckResult | None = None, claimed_done: bool | None = None
) -> EpisodeFigures:
    """The figures of the twinned turns of the branch shown; ``first_divergence`` is a
    turn number."""
    twinned = [t for t in session.turns if t.reality is not None]
    figures = episode_figures(
        [_divergence_of(t) for t in twinned], check=check, claimed_done=claimed_done
    )
    if figures.first_divergence is not None:
        figures = replace(figures, first_divergence=twinned[figures.first_divergence - 1].number)
    return figures


def record_episode(
    session: Session,
    *,
    check: CheckResult | None = None,
    command: str = "",
    claimed_done: bool | None = None,
    save: Saver | None = None,
) -> EpisodeFigures:
    """Write the episode's end into ``session.twin`` (on the session's thread): the check
    (``command`` and its result) and the figures; saved with ``save``."""
    figures = session_figures(session, check=check, claimed_done=claimed_done)
    twin = dict(session.twin or {"domain": session.domain.name, "kind": "twin"})
    if check is not None or command:
        twin["check"] = {"command": command, "result": None if check is None else check.to_dict()}
    twin["figures"] = figures.to_dict()
    session.twin = twin
    if save is not None:
        save(session)
    return figures


def end_episode(
    session: Session,
    shadow: Shadow,
    *,
    claimed_done: bool | None = None,
    timeout: float = CHECK_SECONDS,
    save: Saver | None = None,
) -> EpisodeFigures:
    """Run the task's check in the twin (when the shadow has one), then record it and the
    figures; blocks the calling thread, which owns the session."""
    check = shadow.runner.check(shadow.check, timeout) if shadow.check else None
    return record_episode(
        session, check=check, command=shadow.check, claimed_done=claimed_done, save=save
    )


async def end_episode_async(
    session: Session,
    shadow: Shadow,
    *,
    claimed_done: bool | None = None,
    timeout: float = CHECK_SECONDS,
    save: Saver | None = None,
) -> EpisodeFigures:
    """``end_episode`` for a session owned by an event loop."""
    check = await shadow.runner.check_async(shadow.check, timeout) if shadow.check else None
    return record_episode(
        session, check=check, command=shadow.check, claimed_done=claimed_done, save=save
    )
