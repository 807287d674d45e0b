"""Judging a bench run's predictions, resumably, and choosing a judge engine.

Each finished prediction is judged once against its sample's real observation with the
domain's judge prompt. Verdicts are appended to ``judgements.jsonl``; a verdict counts for
the prediction it judged (by its digest), so predicting a sample again makes it due for
judging again. A judge that could not be reached is asked again on the next run; an answer
that came but could not be read is kept as unreadable and left out of the scores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from agentworld_tui.engines.base import Engine, GenerationControl, GenerationParams
from agentworld_tui.evaluation.bench import (
    MAX_PROBLEMS,
    BenchInterrupted,
    BenchRun,
)
from agentworld_tui.evaluation.progress import Progress
from agentworld_tui.evaluation.workers import run_each
from agentworld_tui.world.judge import Message, judge_messages
from agentworld_tui.world.trajectories import Sample

CHARS_PER_TOKEN = 3
"""A cautious characters-per-token ratio for fitting the history into the judge's context."""


@dataclass(frozen=True)
class JudgeSpec:
    """Which judge to use: a server (``server`` + ``model``) or a local GGUF (``model_path``)."""

    server: str = ""
    model: str = ""
    model_path: str = ""
    api_key_env: str = ""
    n_ctx: int = 0
    gpu_layers: int = -1
    threads: int = 0

    @property
    def given(self) -> bool:
        return bool(self.server or self.model_path)

    def problem(self) -> str:
        """Why this choice cannot be used ("" when it can)."""
        if self.server and self.model_path:
            return "give either --judge-server or --judge-model-path, not both"
        if self.model and not self.server:
            return "--judge-model names a model on --judge-server: give the server too"
        return ""


def make_judge_engine(spec: JudgeSpec) -> Engine:
    if spec.server:
        from agentworld_tui.engines.remote import RemoteEngine

        return RemoteEngine(
            spec.server, model=spec.model, api_key_env=spec.api_key_env, n_ctx=spec.n_ctx
        )
    from agentworld_tui.engines.llama import LlamaEngine

    return LlamaEngine(
        spec.model_path, n_ctx=spec.n_ctx, gpu_layers=spec.gpu_layers, threads=spec.threads
    )


def history_chars_for(engine: Engine, params: GenerationParams, fixed_chars: int) -> int:
    """Characters of history that fit the judge's context beside everything else."""
    n_ctx = engine.info.n_ctx
    room = n_ctx - min(params.max_tokens, n_ctx // 2)
    return max(0, room * CHARS_PER_TOKEN - fixed_chars)


def sample_judge_messages(
    sample: Sample, prediction: str, *, history_chars: int | None = None
) -> list[Message]:
    history = [(sample.prompt[i], sample.response[i]) for i in range(sample.history)]
    messages, _problems = judge_messages(
        sample.domain,
        history,
        sample.current,
        prediction,
        sample.reference,
        history_chars=history_chars,
    )
    return messages


@dataclass
class JudgeSummary:
    due: int
    judged: int = 0
    unreadable: int = 0
    failed: int = 0
    no_reference: int = 0
    problems: list[str] = field(default_factory=list)


def judge_record(
    engine: Engine,
    sample: Sample,
    prediction: dict[str, Any],
    params: GenerationParams,
    control: GenerationControl,
) -> dict[str, Any]:
    from agentworld_tui.engines.judge import run_judge

    text = str(prediction.get("prediction", ""))
    fixed = len(sample.current) + len(text) + len(sample.reference) + 6000
    messages = sample_judge_messages(
        sample, text, history_chars=history_chars_for(engine, params, fixed)
    )
    verdict = run_judge(engine, messages, params=params, control=control)
    data = verdict.to_dict()
    data.pop("reference")  # it is in the benchmark file
    return {
        "key": sample.source,
        "domain": sample.domain,
        "prediction_sha": prediction.get("prediction_sha", ""),
        **data,
        "time": time.time(),
    }


def judgement_current(judgement: dict[str, Any] | None, prediction: dict[str, Any]) -> bool:
    """Whether ``judgement`` is a final verdict on this very prediction."""
    return (
        judgement is not None
        and not judgement.get("engine_failed", False)
        and judgement.get("prediction_sha") == prediction.get("prediction_sha")
    )


def judge_run(
    engine: Engine,
    samples: Sequence[Sample],
    run: BenchRun,
    params: GenerationParams,
    *,
    concurrency: int = 1,
    stream: TextIO | None = None,
) -> JudgeSummary:
    """Judge every finished prediction of ``run`` that has no verdict yet."""
    run.judgements.drop_torn_tail()
    predictions = run.finished_predictions()
    verdicts = run.judgements.read()
    judged_samples = [s for s in samples if s.source in predictions]
    due: list[Sample] = []
    summary = JudgeSummary(0)
    for sample in judged_samples:
        if judgement_current(verdicts.get(sample.source), predictions[sample.source]):
            continue
        if not sample.reference.strip():
            summary.no_reference += 1
            continue
        due.append(sample)
    summary.due = len(due)
    already = len(judged_samples) - len(due) - summary.no_reference
    progress = Progress("judge  ", already + len(due), done=already, stream=stream)
    if not due:
        return summary
    progress.show()

    def record(result: dict[str, Any]) -> None:
        if result.get("engine_failed"):
            if result["error"] == "judging was stopped":
                return
            summary.failed += 1
            if len(summary.problems) < MAX_PROBLEMS:
                summary.problems.append(f"{result['key']}: {result['error']}")
        elif result.get("judgement") is None:
            summary.unreadable += 1
            if len(summary.problems) < MAX_PROBLEMS:
                summary.problems.append(f"{result['key']}: {result['error']}")
        else:
            summary.judged += 1
        run.judgements.append(result)
        progress.advance(failed=result.get("judgement") is None)

    try:
        run_each(
            due,
            lambda sample, control: judge_record(
                engine, sample, predictions[sample.source], params, control
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
