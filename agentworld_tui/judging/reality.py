"""Judging a twinned turn's prediction with reality's answer as the reference.

The judge reads what the agent was sent and what the world model predicted, and scores it
against what the twin really answered; the verdict goes into the turn's reality record
(``turn.reality["judgement"]``), beside the divergence, and the session is saved. It runs
like any judgement (``judge_turn``): a judge on a server runs on a thread of its own, so
the agent's turns never wait for it; a local judge takes turns with the generations on
the engine's thread. Front-ends decide when to ask (after each turn, at the end, never).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.judging.turn import JudgeRun, judge_turn
from agentworld_tui.simulator.run import Home, Saver
from agentworld_tui.world.export import real_text
from agentworld_tui.world.judgement import Verdict
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.engines.factory import EngineSpec
    from agentworld_tui.judging.prompts import JudgePrompts
    from agentworld_tui.simulator.service import Simulator


class RealityJudgeRun(JudgeRun):
    """A judgement whose verdict is kept in the turn's reality record."""

    def on_final(self, event: object) -> None:
        assert isinstance(event, Verdict)
        if not (event.parsed or not event.engine_failed) or self.turn.reality is None:
            return
        self.turn.reality = {**self.turn.reality, "judgement": event.to_dict()}
        if self.save is not None:
            self.save_error = self.save(self.session)


def judge_against_reality(
    simulator: Simulator,
    session: Session,
    turn: Turn,
    *,
    spec: EngineSpec | None = None,
    params: GenerationParams | None = None,
    prompts: JudgePrompts | None = None,
    save: Saver | None = None,
    home: Home | None = None,
) -> tuple[JudgeRun, list[str]]:
    """Judge ``turn``'s prediction against reality's answer, with the loaded model
    (``spec`` None) or another judge; also the problems met building the judge's prompt.
    A ValueError when reality gave the turn no answer to judge against."""
    from agentworld_tui.judging.prompts import turn_judge_messages

    reference = real_text(turn)
    if reference is None:
        raise ValueError(f"turn {turn.number} has no real observation to judge against")
    messages, problems = turn_judge_messages(session, turn, reference, prompts=prompts)
    run = judge_turn(
        simulator,
        session,
        turn,
        messages,
        reference=reference,
        spec=spec,
        params=params,
        save=save,
        home=home,
        run_type=RealityJudgeRun,
    )
    return run, problems
