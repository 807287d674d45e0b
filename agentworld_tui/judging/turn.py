"""Judging a turn: the judge's stream is shown like a turn's, Esc stops it, and the
verdict is recorded on the session's thread and saved.

A judge model of its own decodes on the engine's thread too, in turn with the tabs'
turns (a second decoding thread halves llama.cpp's speed: see ``queue``); a judge on a
server runs on a thread of its own, so it never waits for the tabs' turns.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from agentworld_tui.engines.base import Engine, EngineError, GenerationParams
from agentworld_tui.judging.judge import JUDGE_PARAMS, run_judge
from agentworld_tui.simulator.queue import CallJob
from agentworld_tui.simulator.run import Home, Saver, StreamRun
from agentworld_tui.world.judgement import Message, Verdict
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.engines.factory import EngineSpec
    from agentworld_tui.simulator.service import Simulator


class JudgeRun(StreamRun):
    """One judgement of one turn."""

    def __init__(
        self,
        session: Session,
        turn: Turn,
        params: GenerationParams,
        *,
        save: Saver | None = None,
        home: Home | None = None,
    ) -> None:
        super().__init__(home)
        self.session, self.turn, self.params, self.save = session, turn, params, save
        self.save_error: str | None = None

    def is_final(self, event: object) -> bool:
        return isinstance(event, Verdict)

    def on_final(self, event: object) -> None:
        assert isinstance(event, Verdict)
        if event.parsed or not event.engine_failed:
            self.turn.judgement = event.to_dict()
            if self.save is not None:
                self.save_error = self.save(self.session)

    @property
    def verdict(self) -> Verdict | None:
        final = self._final
        return final if self.completed and isinstance(final, Verdict) else None

    def wait(self) -> Verdict:
        final = self._wait_final()
        assert isinstance(final, Verdict)
        return final


def judge_params(params: GenerationParams) -> GenerationParams:
    """The judge samples greedily (the same prediction judged twice gets the same verdict)
    within the user's token limit."""
    return replace(JUDGE_PARAMS, max_tokens=min(params.max_tokens, JUDGE_PARAMS.max_tokens))


def judge_turn(
    simulator: Simulator,
    session: Session,
    turn: Turn,
    messages: list[Message],
    *,
    reference: str,
    spec: EngineSpec | None = None,
    params: GenerationParams | None = None,
    save: Saver | None = None,
    home: Home | None = None,
    run_type: type[JudgeRun] = JudgeRun,
) -> JudgeRun:
    """Judge ``turn`` with the loaded model (``spec`` None) or another judge; ``run_type``
    says where the verdict is recorded (a ``JudgeRun`` keeps it as ``turn.judgement``)."""
    run = run_type(
        session,
        turn,
        params or judge_params(simulator.params),
        save=save,
        home=home if home is not None else simulator.home,
    )

    def judged_by(engine: Engine) -> Verdict:
        return run_judge(
            engine,
            messages,
            reference=reference,
            params=run.params,
            control=run.control,
            on_event=run.sink,
        )

    def failed(error: str) -> Verdict:
        return Verdict(None, f"the judge failed: {error}", reference=reference, engine_failed=True)

    def done(result: object, error: str | None) -> None:
        run.sink(result if isinstance(result, Verdict) else failed(error or "no verdict"))

    if spec is None:
        simulator.call(CallJob(judged_by, done))
        return run

    def elsewhere(_engine: object = None) -> Verdict:
        from agentworld_tui.engines.factory import make_engine

        engine = make_engine(spec)
        try:
            engine.load()
        except EngineError as exc:
            return failed(str(exc))
        try:
            return judged_by(engine)
        finally:
            engine.unload()

    if not spec.server:
        simulator.call(CallJob(elsewhere, done, needs_model=False))
        return run

    def on_its_thread() -> None:
        try:
            run.sink(elsewhere())
        except Exception as exc:  # reported as the verdict, never lost
            run.sink(failed(str(exc)))

    threading.Thread(target=on_its_thread, name="judge", daemon=True).start()
    return run
