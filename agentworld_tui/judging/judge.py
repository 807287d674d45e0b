"""Asking a judge engine for a verdict, the same for the app and ``agentworld bench``.

The judge is sampled and asked again as the official evaluator does: temperature 0.6,
32,768 tokens, and up to three requests in all while no verdict can be read (an answer the
official rules cannot read, or a request that failed, with a short pause before asking a
failed server again). The verdict is read from the judge's whole generated text, never from
what the world model's observation splitter makes of it, through ``verdicts.read_verdict``,
which turns anything that goes wrong while reading into an unreadable verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
)
from agentworld_tui.judging.verdicts import read_verdict
from agentworld_tui.world.judgement import Message, Verdict

JUDGE_PARAMS = GenerationParams(temperature=0.6, max_tokens=32768)
"""The official evaluator's judge sampling."""
JUDGE_ATTEMPTS = 3
STOPPED = "judging was stopped"
RETRY_PAUSE_S = 2.0
"""Before asking again a judge whose request failed (as the official evaluator waits)."""


@dataclass(frozen=True)
class JudgeSettings:
    """How a judge is asked: its sampling and how many requests a verdict may take."""

    params: GenerationParams = JUDGE_PARAMS
    attempts: int = JUDGE_ATTEMPTS
    retry_pause: float = RETRY_PAUSE_S

    def describe(self) -> str:
        """One line for a score table."""
        return f"temperature {self.params.temperature:g}, max_tokens {self.params.max_tokens}, " + (
            f"up to {self.attempts} attempts" if self.attempts > 1 else "one attempt"
        )


def generated_text(finished: Finished) -> str:
    """The whole text a model generated: the engine's raw text, or (from an engine that
    does not keep it) the reasoning, its closing tag when it closed, and the answer."""
    if finished.raw:
        return finished.raw
    head = finished.reasoning + ("</think>" if finished.closed_reasoning else "")
    if head and finished.observation:
        return f"{head}\n{finished.observation}"
    return head or finished.observation


def run_judge(
    engine: Engine,
    messages: list[Message],
    *,
    reference: str = "",
    params: GenerationParams | None = None,
    control: GenerationControl | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
    settings: JudgeSettings | None = None,
) -> Verdict:
    """Ask the judge until its verdict can be read (at most ``settings.attempts`` times);
    never raises EngineError. ``params`` replaces the settings' sampling."""
    settings = settings or JudgeSettings()
    params = params or settings.params
    control = control or GenerationControl()
    judge = engine.info.name
    failed: Verdict | None = None
    attempts = max(1, settings.attempts)
    for attempt in range(1, attempts + 1):
        verdict = replace(
            _ask(engine, messages, params, control, on_event, reference),
            judge=judge,
            attempts=attempt,
        )
        if verdict.official is not None or verdict.error == STOPPED:
            return verdict
        # An answer that came says more than a failed request about why there is none.
        if failed is None or not verdict.engine_failed:
            failed = verdict
        else:
            failed = replace(failed, attempts=attempt)
        if attempt < attempts and verdict.engine_failed and _paused(control, settings):
            return Verdict(None, STOPPED, judge, reference, engine_failed=True, attempts=attempt)
    assert failed is not None
    return failed


def _paused(control: GenerationControl, settings: JudgeSettings) -> bool:
    """Wait before asking again; True when the user stopped judging meanwhile."""
    deadline = time.monotonic() + settings.retry_pause
    while time.monotonic() < deadline:
        if control.cancelled:
            return True
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return control.cancelled


def _ask(
    engine: Engine,
    messages: list[Message],
    params: GenerationParams,
    control: GenerationControl,
    on_event: Callable[[EngineEvent], None] | None,
    reference: str,
) -> Verdict:
    finished: Finished | None = None
    try:
        for event in engine.stream(messages, params, control):
            if isinstance(event, Finished):
                finished = event
            elif on_event is not None:
                on_event(event)
    except EngineError as exc:
        return Verdict(None, f"the judge failed: {exc}", reference=reference, engine_failed=True)
    if finished is None:
        return Verdict(None, STOPPED, reference=reference, engine_failed=True)
    stats = finished.stats.to_dict()
    answer = generated_text(finished)
    if finished.stats.stop_reason == "cancelled":
        return Verdict(None, STOPPED, "", reference, answer, stats, engine_failed=True)
    if finished.error:
        why = f"the judge failed: {finished.error}"
        return Verdict(None, why, "", reference, answer, stats, engine_failed=True)
    reading = read_verdict(answer)
    strict = ""
    if reading.strict is None:
        strict = f"the project's stricter reading found no verdict: {reading.strict_error}"
    if reading.official is None:
        # The official rules find nothing (a verdict written inside the think block, say);
        # the project's reading may still have one for the app to show, but it scores nothing.
        why = f"unreadable judgement: {reading.official_error}"
        if finished.stats.stop_reason == "max_tokens":
            why += " (the judge reached its token limit)"
        return Verdict(reading.strict, why, "", reference, answer, stats)
    return Verdict(reading.strict, strict, "", reference, answer, stats, official=reading.official)
