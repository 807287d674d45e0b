"""Running the world model over AgentWorldBench samples, resumably.

Each sample is predicted from the messages the official evaluator sends for it: its
``system_str`` (none when empty), the history its lists give (a turn with an empty
observation included), then its current turn. History that does not fit the context is
trimmed from the oldest end (where the official request would fail) and the record says how
much. Every finished prediction is appended to ``predictions.jsonl`` in the run's folder at
once, with the whole generated text the judge's prediction is extracted from; a run that
stops for any reason is resumed by running the same command again, which skips every sample
already predicted. A sample whose request failed (server down, say) is tried again; one the
model answered badly is not: that answer is its result.

A sample's key is where it came from, ``<file name>:<line>``, so it is unique and stays
the same between runs over the same files.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
    Message,
)
from agentworld_tui.evaluation.progress import Progress
from agentworld_tui.evaluation.results import ResultLog
from agentworld_tui.evaluation.workers import run_each
from agentworld_tui.world.context import first_kept_turn, history_budget
from agentworld_tui.world.store import write_atomic
from agentworld_tui.world.trajectories import (
    BadLines,
    Sample,
    TrajectoryError,
    benchmark_files,
    read_samples,
)

RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.jsonl"
JUDGEMENTS_FILE = "judgements.jsonl"
RUN_FORMAT = "agentworld-bench"
DONE_STATUSES = ("complete", "no_answer")
"""A prediction with one of these is final; others (an engine error, a stop) are retried."""
MAX_PROBLEMS = 20
PREDICT_WORDS = ("failed",)
"""What the progress bar and the summary count, in the same words."""


class BenchError(Exception):
    """A run that cannot go on; the message is one line for the user."""


class BenchInterrupted(BenchError):
    """Stopped by the user; what was finished is saved."""


def prediction_sha(text: str) -> str:
    """Ties a judgement to the exact prediction it judged."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def sample_sha(sample: Sample) -> str:
    """A sample's identity by its content (what the benchmark line says, not where it
    stands), so that runs of this program and the official evaluator's files can be
    matched sample by sample."""
    fields = [
        sample.task,
        sample.id,
        list(sample.prompt),
        list(sample.response),
        sample.current_prompt,
        sample.system_str,
        sample.turn_idx,
        sample.total_turns,
    ]
    text = json.dumps(fields, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


# -- the samples ----------------------------------------------------------------------------
@dataclass
class SampleSet:
    samples: list[Sample]
    problems: list[str] = field(default_factory=list)

    def by_domain(self) -> Counter[str]:
        return Counter(s.domain for s in self.samples)


def load_samples(
    path: Path,
    *,
    domains: Sequence[str] = (),
    limit: int | None = None,
    known: Callable[[str], bool] | None = None,
    default_task: str = "",
) -> SampleSet:
    """The samples of a benchmark file or folder, in file order.

    ``domains`` keeps only those domains (files named ``<domain>_test.jsonl`` for others are
    not even read); ``limit`` keeps the first N samples of each domain; ``known`` says which
    domains this program can simulate (others are skipped and reported); ``default_task``
    is the domain of a line without ``task`` (by default the file's name says it).
    """
    try:
        files = benchmark_files(path)
    except TrajectoryError as exc:
        raise BenchError(str(exc)) from None
    wanted = set(domains)
    if wanted and path.is_dir():
        files = [f for f in files if f.name.removesuffix(".jsonl").removesuffix("_test") in wanted]
        if not files:
            raise BenchError(f"{path}: no benchmark file for {', '.join(sorted(wanted))}")
    samples: list[Sample] = []
    bad = BadLines(MAX_PROBLEMS)
    counts: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for file in files:
        fallback = default_task or file.name.removesuffix(".jsonl").removesuffix("_test")
        if limit is not None and counts[fallback] >= limit:
            continue
        try:
            for sample in read_samples(file, fallback, bad):
                if wanted and sample.domain not in wanted:
                    continue
                if known is not None and not known(sample.domain):
                    unknown[sample.domain] += 1
                    continue
                if limit is not None and counts[sample.domain] >= limit:
                    if sample.domain == fallback:
                        break
                    continue
                counts[sample.domain] += 1
                samples.append(sample)
        except TrajectoryError as exc:
            raise BenchError(str(exc)) from None
    problems = bad.summary()
    for name, count in sorted(unknown.items()):
        problems.append(f"{count} samples of the unknown domain {name!r} skipped")
    if not samples:
        why = f" ({problems[0]})" if problems else ""
        raise BenchError(f"{path}: no samples to run{why}")
    return SampleSet(samples, problems)


# -- the run's folder -----------------------------------------------------------------------
class BenchRun:
    """A run's folder: ``run.json`` (what was run), ``predictions.jsonl``,
    ``judgements.jsonl``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.predictions = ResultLog(folder / PREDICTIONS_FILE)
        self.judgements = ResultLog(folder / JUDGEMENTS_FILE)

    def info(self) -> dict[str, Any] | None:
        path = self.folder / RUN_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            raise BenchError(f"{path}: unreadable ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
            raise BenchError(f"{path}: not an agentworld bench run")
        return data

    def require(self) -> dict[str, Any]:
        """The run's description; raises BenchError where the folder holds no run."""
        info = self.info()
        if info is None:
            raise BenchError(f"{self.folder}: no bench run here (no {RUN_FILE})")
        return info

    def begin(self, data: Path, model: str, where: str, params: GenerationParams) -> None:
        """Record what this run predicts with, or check that a resumed run is the same."""
        info = self.info()
        data_text = str(data.resolve())
        if info is not None:
            if info.get("model") != model:
                raise BenchError(
                    f"{self.folder} holds predictions by {info.get('model')!r}, not {model!r}: "
                    "pass another --out"
                )
            if info.get("data") != data_text:
                raise BenchError(
                    f"{self.folder} holds a run over {info.get('data')}, not {data_text}: "
                    "pass another --out"
                )
            return
        self.write_info(
            {
                "format": RUN_FORMAT,
                "version": 1,
                "data": data_text,
                "model": model,
                "where": where,
                "params": {
                    "temperature": params.temperature,
                    "top_p": params.top_p,
                    "top_k": params.top_k,
                    "max_tokens": params.max_tokens,
                    "enable_thinking": params.enable_thinking,
                    "seed": params.seed,
                },
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )

    def write_info(self, record: dict[str, Any]) -> None:
        try:
            write_atomic(
                self.folder / RUN_FILE, (json.dumps(record, indent=1) + "\n").encode("utf-8")
            )
        except OSError as exc:
            raise BenchError(f"cannot write in {self.folder}: {exc.strerror or exc}") from None

    def finished_predictions(self) -> dict[str, dict[str, Any]]:
        return {
            k: r for k, r in self.predictions.read().items() if r.get("status") in DONE_STATUSES
        }


# -- predicting -----------------------------------------------------------------------------
@dataclass
class PredictSummary:
    total: int
    resumed: int
    """Samples found already predicted."""
    predicted: int = 0
    failed: int = 0
    problems: list[str] = field(default_factory=list)
    """The first few failures, one line each."""

    def line(self) -> str:
        """The summary, counting what the progress bar counted with the same words."""
        return f"predicted {self.predicted}, failed {self.failed}"


MESSAGE_OVERHEAD = 6
"""Chat-template tokens per message (role markers, newlines), a safe over-estimate."""


def predicted_turn(sample: Sample) -> str:
    """The current turn as the official evaluator sends it to the world model: the prompt
    list's entry for ``turn_idx``, even where ``current_prompt`` says otherwise (the judge
    is shown ``current_prompt``); ``current_prompt`` only when the list has no such entry,
    where the official request would fail."""
    index = sample.turn_idx - 1
    return sample.prompt[index] if 0 <= index < len(sample.prompt) else sample.current


def sample_messages(
    sample: Sample, count_tokens: Callable[[str], int], budget: int
) -> tuple[list[Message], int]:
    """The messages the official evaluator sends for ``sample`` (``sample.conversation()``:
    no system message when ``system_str`` is empty, every earlier turn kept, an empty
    observation included; the current turn from ``predicted_turn``), and how many of the
    oldest turns were left out because the whole would not fit ``budget`` tokens (where
    the official request would fail)."""
    messages = sample.conversation()
    messages[-1] = {"role": "user", "content": predicted_turn(sample)}
    system = 1 if messages[0]["role"] == "system" else 0
    pairs = [(messages[i], messages[i + 1]) for i in range(system, len(messages) - 1, 2)]

    def size(message: Message) -> int:
        return count_tokens(message["content"]) + MESSAGE_OVERHEAD

    fixed = sum(size(m) for m in messages[:system]) + size(messages[-1])
    first = first_kept_turn([size(u) + size(a) for u, a in pairs], fixed, budget)
    if first == 0:
        return messages, 0
    kept = [m for pair in pairs[first:] for m in pair]
    return [*messages[:system], *kept, messages[-1]], first


def predict_record(
    engine: Engine,
    sample: Sample,
    params: GenerationParams,
    control: GenerationControl,
    *,
    keep_reasoning: bool = False,
) -> dict[str, Any]:
    """Predict one sample's current turn; the record to append (never raises EngineError).

    ``raw`` is the whole generated text, which the judge's prediction is extracted from by
    the official rules; ``prediction`` is the app's own extraction, kept beside it.
    """
    from agentworld_tui.judging.judge import generated_text
    from agentworld_tui.simulator import outcome

    finished: Finished | None = None
    omitted = 0
    try:
        budget = history_budget(engine.info.n_ctx, params.max_tokens)
        messages, omitted = sample_messages(sample, engine.count_tokens, budget)
        for event in engine.stream(messages, params, control):
            if isinstance(event, Finished):
                finished = event
    except EngineError as exc:
        finished = Finished("", "", False, GenerationStats(stop_reason="error"), error=str(exc))
    if finished is None:  # the engine ended without its final event
        finished = Finished("", "", False, GenerationStats(stop_reason="cancelled"))
    status, note = outcome(finished)
    generated = generated_text(finished)
    record: dict[str, Any] = {
        "key": sample.source,
        "id": sample.id,
        "domain": sample.domain,
        "turn_idx": sample.turn_idx,
        "status": status,
        "note": note,
        "prediction": finished.observation,
        "raw": generated,
        "prediction_sha": prediction_sha(generated),
        "sample_sha": sample_sha(sample),
        "extraction": finished.extraction,
        "reasoning_chars": len(finished.reasoning),
        "omitted_turns": omitted,
        "stats": finished.stats.to_dict(),
        "time": time.time(),
    }
    if finished.content is not None:
        record["content"] = finished.content
    if keep_reasoning:
        record["reasoning"] = finished.reasoning
    return record


def generation(record: dict[str, Any]) -> str:
    """A prediction record's whole generated text (older records kept only the answer)."""
    raw = record.get("raw")
    return raw if isinstance(raw, str) else str(record.get("prediction", ""))


def official_generation(record: dict[str, Any]) -> str:
    """What the official evaluator holds as a sample's generation: the server's
    ``content`` field. Behind a reasoning parser that is the answer alone (empty when the
    model never left its reasoning: a failed sample there); otherwise the whole text."""
    content = record.get("content")
    return content if isinstance(content, str) else generation(record)


def predict_samples(
    engine: Engine,
    samples: Sequence[Sample],
    run: BenchRun,
    params: GenerationParams,
    *,
    concurrency: int = 1,
    keep_reasoning: bool = False,
    stream: TextIO | None = None,
) -> PredictSummary:
    """Predict every sample not yet predicted in ``run``; concurrent requests when
    ``concurrency`` > 1 (for a server: a local model runs one at a time)."""
    run.predictions.drop_torn_tail()
    done = run.finished_predictions()
    todo = [s for s in samples if s.source not in done]
    summary = PredictSummary(len(samples), len(samples) - len(todo))
    progress = Progress(
        "predict", len(samples), done=summary.resumed, stream=stream, words=PREDICT_WORDS
    )
    if not todo:
        return summary
    progress.show()

    def record(result: dict[str, Any]) -> None:
        if result["status"] not in DONE_STATUSES:
            if result["status"] == "interrupted":
                return  # stopped by the user: not a result, tried again next time
            summary.failed += 1
            if len(summary.problems) < MAX_PROBLEMS:
                summary.problems.append(f"{result['key']}: {result['note'] or result['status']}")
        else:
            summary.predicted += 1
        run.predictions.append(result)
        progress.advance("" if result["status"] in DONE_STATUSES else "failed")

    try:
        run_each(
            todo,
            lambda sample, control: predict_record(
                engine, sample, params, control, keep_reasoning=keep_reasoning
            ),
            record,
            concurrency=concurrency,
        )
    except KeyboardInterrupt:
        progress.close()
        raise BenchInterrupted(
            f"interrupted after {summary.resumed + summary.predicted} of {len(samples)} "
            "samples; run the same command again to resume"
        ) from None
    progress.close()
    return summary
