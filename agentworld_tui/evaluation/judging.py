"""Judging a bench run's predictions, resumably, and choosing a judge engine.

Each finished prediction is judged as the official evaluator judges it: its answer is
extracted from the whole generated text by the official rules (evaluation/extraction.py),
the judge is sent the official messages built from the chosen prompts, sampled and asked
again as the official evaluator does (judging/judge.py). An empty generation is not judged
(the official evaluator counts it as failed); behind a server with a reasoning parser the
generation is what the official evaluator reads, the ``content`` field alone, so a model
that never left its reasoning fails there too.

Verdicts are appended to ``judgements.jsonl``. A verdict counts for the prediction it
judged (by its digest) under the judge settings it was made with (judge, prompts, sampling,
attempts): predicting a sample again, or judging with other settings, makes it due again.
A judge that could not be reached is asked again on the next run; an answer that came but
could not be read is kept as unreadable.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from agentworld_tui.engines.base import Engine, GenerationControl
from agentworld_tui.evaluation.bench import (
    MAX_PROBLEMS,
    BenchInterrupted,
    BenchRun,
    official_generation,
)
from agentworld_tui.evaluation.extraction import official_prediction
from agentworld_tui.evaluation.progress import Progress, tally
from agentworld_tui.evaluation.workers import run_each
from agentworld_tui.judging.judge import STOPPED, JudgeSettings
from agentworld_tui.judging.prompts import (
    JudgePrompts,
    judge_messages,
    project_prompts,
    turns_left_out,
)
from agentworld_tui.world.context import history_budget
from agentworld_tui.world.judgement import Message
from agentworld_tui.world.trajectories import Sample

CHARS_PER_TOKEN = 3
"""A cautious characters-per-token ratio for fitting the history into the judge's context."""
MESSAGE_OVERHEAD = 6
JUDGE_WORDS = ("unreadable", "judge failed")
"""What the progress bar and the summary count, in the same words."""


# -- what a verdict was made with ---------------------------------------------------------------
@dataclass
class Judging:
    """A judge, the prompts and the settings a run is judged with."""

    judge: str
    prompts: JudgePrompts = field(default_factory=project_prompts)
    settings: JudgeSettings = field(default_factory=JudgeSettings)
    _ids: dict[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "prompts": self.prompts.label,
            "temperature": self.settings.params.temperature,
            "max_tokens": self.settings.params.max_tokens,
            "attempts": self.settings.attempts,
        }

    def settings_id(self, domain: str) -> str:
        """A digest of everything that shapes a verdict on ``domain``'s samples."""
        if domain not in self._ids:
            text = json.dumps(
                {**self.describe(), "prompts": self.prompts.fingerprint([domain])}, sort_keys=True
            )
            self._ids[domain] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return self._ids[domain]


def judgement_current(
    judgement: dict[str, Any] | None, prediction: dict[str, Any], settings_id: str | None = None
) -> bool:
    """Whether ``judgement`` is a final verdict on this very prediction (and, given
    ``settings_id``, one made with those settings)."""
    return (
        judgement is not None
        and not judgement.get("engine_failed", False)
        and judgement.get("prediction_sha") == prediction.get("prediction_sha")
        and (settings_id is None or judgement.get("settings_id") == settings_id)
    )


# -- one sample ---------------------------------------------------------------------------------
def sample_judge_messages(
    sample: Sample,
    prediction: str,
    prompts: JudgePrompts | None = None,
    *,
    history_chars: int | None = None,
) -> list[Message]:
    """The official judge messages for a sample and an extracted prediction."""
    messages, _problems = judge_messages(
        sample.domain,
        sample_history(sample),
        sample.current,
        prediction,
        sample.reference,
        history_chars=history_chars,
        prompts=prompts,
    )
    return messages


def sample_history(sample: Sample) -> list[tuple[str, str]]:
    return [(sample.prompt[i], sample.response[i]) for i in range(sample.history)]


def fitted_messages(
    engine: Engine, judging: Judging, sample: Sample, prediction: str
) -> tuple[list[Message], int]:
    """The judge's messages, and how many of the oldest history turns were left out
    because the whole would not fit the judge's context (the official evaluator never
    trims: such a request would fail there)."""
    messages = sample_judge_messages(sample, prediction, judging.prompts)
    n_ctx = engine.info.n_ctx
    if n_ctx <= 0:
        return messages, 0
    budget = history_budget(n_ctx, judging.settings.params.max_tokens)

    def tokens(found: list[Message]) -> int:
        return sum(engine.count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in found)

    if tokens(messages) <= budget:
        return messages, 0
    bare = sample_judge_messages(sample, prediction, judging.prompts, history_chars=0)
    room = max(0, (budget - tokens(bare)) * CHARS_PER_TOKEN)
    history = sample_history(sample)
    return (
        sample_judge_messages(sample, prediction, judging.prompts, history_chars=room),
        turns_left_out(history, room),
    )


def judge_record(
    engine: Engine,
    judging: Judging,
    sample: Sample,
    prediction: dict[str, Any],
    control: GenerationControl,
) -> dict[str, Any]:
    from agentworld_tui.judging.judge import run_judge

    extracted = official_prediction(official_generation(prediction))
    messages, trimmed = fitted_messages(engine, judging, sample, extracted)
    verdict = run_judge(engine, messages, control=control, settings=judging.settings)
    data = verdict.to_dict()
    data.pop("reference")  # it is in the benchmark file
    return {
        "key": sample.source,
        "domain": sample.domain,
        "prediction_sha": prediction.get("prediction_sha", ""),
        "settings_id": judging.settings_id(sample.domain),
        "settings": judging.describe(),
        "extracted": extracted,
        "trimmed_turns": trimmed,
        **data,
        "time": time.time(),
    }


# -- a run --------------------------------------------------------------------------------------
@dataclass
class JudgeSummary:
    due: int
    judged: int = 0
    unreadable: int = 0
    failed: int = 0
    """Judge requests that failed every attempt (asked again next run)."""
    no_generation: int = 0
    """Empty generations: never judged, counted as failed in the scores."""
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The summary, counting what the progress bar counted with the same words."""
        counts = Counter({"unreadable": self.unreadable, "judge failed": self.failed})
        line = f"judged {self.judged}, {tally(counts, JUDGE_WORDS, zeros=True)}"
        if self.no_generation:
            line += f"; not judged (empty generation) {self.no_generation}"
        return line


def judge_run(
    engine: Engine,
    samples: Sequence[Sample],
    run: BenchRun,
    judging: Judging,
    *,
    concurrency: int = 1,
    stream: TextIO | None = None,
) -> JudgeSummary:
    """Judge every finished prediction of ``run`` without a verdict under ``judging``."""
    run.judgements.drop_torn_tail()
    predictions = run.finished_predictions()
    verdicts = run.judgements.read()
    judged_samples = [s for s in samples if s.source in predictions]
    due: list[Sample] = []
    summary = JudgeSummary(0)
    for sample in judged_samples:
        prediction = predictions[sample.source]
        if not official_generation(prediction):
            summary.no_generation += 1
            continue
        current = judging.settings_id(sample.domain)
        if not judgement_current(verdicts.get(sample.source), prediction, current):
            due.append(sample)
    summary.due = len(due)
    already = len(judged_samples) - len(due) - summary.no_generation
    progress = Progress(
        "judge  ", already + len(due), done=already, stream=stream, words=JUDGE_WORDS
    )
    if not due:
        return summary
    progress.show()

    def record(result: dict[str, Any]) -> None:
        outcome = ""
        if result.get("engine_failed"):
            if result["error"] == STOPPED:
                return
            summary.failed += 1
            outcome = "judge failed"
        elif result.get("official") is None:
            summary.unreadable += 1
            outcome = "unreadable"
        else:
            summary.judged += 1
        if outcome and len(summary.problems) < MAX_PROBLEMS:
            summary.problems.append(f"{result['key']}: {result['error']}")
        run.judgements.append(result)
        progress.advance(outcome)

    try:
        run_each(
            due,
            lambda sample, control: judge_record(
                engine, judging, sample, predictions[sample.source], control
            ),
            record,
            concurrency=concurrency,
        )
    except KeyboardInterrupt:
        progress.close()
        raise BenchInterrupted(
            "judging interrupted; run the same command again to judge the rest"
        ) from None
    progress.close()
    return summary
