"""Asking a judge engine for a verdict, the same for the app and ``agentworld bench``."""

from __future__ import annotations

from collections.abc import Callable

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
)
from agentworld_tui.world.judge import JudgementError, Message, Verdict, parse_judgement

JUDGE_PARAMS = GenerationParams(temperature=0.0, max_tokens=16384)
"""Greedy, so that judging the same prediction twice gives the same verdict."""


def run_judge(
    engine: Engine,
    messages: list[Message],
    *,
    reference: str = "",
    params: GenerationParams = JUDGE_PARAMS,
    control: GenerationControl | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
) -> Verdict:
    """Stream the judge's answer and read its verdict; never raises EngineError.

    The verdict is looked for in the whole answer, reasoning included: a judge that does not
    think in ``<think>`` tags writes everything where a reasoning parser expects reasoning.
    """
    judge = engine.info.name
    finished: Finished | None = None
    try:
        for event in engine.stream(messages, params, control or GenerationControl()):
            if isinstance(event, Finished):
                finished = event
            elif on_event is not None:
                on_event(event)
    except EngineError as exc:
        return Verdict(None, f"the judge failed: {exc}", judge, reference, engine_failed=True)
    if finished is None:
        return Verdict(
            None, "the judge stopped without an answer", judge, reference, engine_failed=True
        )
    stats = finished.stats.to_dict()
    answer = "\n".join(t for t in (finished.reasoning, finished.observation) if t)
    if finished.error or finished.stats.stop_reason == "cancelled":
        why = f"the judge failed: {finished.error}" if finished.error else "judging was stopped"
        return Verdict(None, why, judge, reference, answer, stats, engine_failed=True)
    try:
        judgement = parse_judgement(answer)
    except JudgementError as exc:
        why = f"unreadable judgement: {exc}"
        if finished.stats.stop_reason == "max_tokens":
            why += " (the judge reached its token limit)"
        return Verdict(None, why, judge, reference, answer, stats)
    return Verdict(judgement, "", judge, reference, answer, stats)
