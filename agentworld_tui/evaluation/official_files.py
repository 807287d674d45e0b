"""The official AgentWorldBench evaluator's files, read and written, so that a run of each
can be compared, an official run rescored or judged again here, and a run made here scored
by the official script.

The official evaluator keeps a run in two JSON Lines files, one line per sample, in the
order it read the benchmark (its ``*_test.jsonl`` files sorted by name, blank lines left
out):

- ``predictions.jsonl``: each benchmark line's object as it was, with ``gen`` added: the
  world model's generation (the server's ``content`` field; "" when the request failed);
- ``judged.jsonl``: each of those with the judge's outcome added: ``failed`` (0.0 for a
  read verdict, 1.0 otherwise); for a read verdict ``total_score`` (the mean of the
  positive scores), the five whole-number scores under their own names, ``strengths``,
  ``weaknesses``, ``extracted_output`` (the answer the judge was shown) and
  ``judge_raw_output`` (its answer); for a failed one ``error_message`` ("No model
  generation" for an empty generation, which is never judged, or "Judge scoring failed")
  and, when the judge was asked, ``extracted_output``.

Its score step averages, per domain (the part of ``task`` after its last ``/``), each
recorded score and ``total_score`` over the samples with ``failed`` equal to 0 whose value
is not 0; the overall is the mean of all those totals. ``score_official`` scores a file the
same way; a record whose recorded scores are not numbers is counted as failed and said.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld_tui.evaluation.bench import (
    MAX_PROBLEMS,
    RUN_FILE,
    BenchError,
    BenchRun,
    official_generation,
    prediction_sha,
    sample_sha,
)
from agentworld_tui.evaluation.judging import judgement_current
from agentworld_tui.evaluation.results import record_line
from agentworld_tui.evaluation.scores import RunScores, SampleScore, official_of, score_samples
from agentworld_tui.judging.verdicts import read_verdict
from agentworld_tui.world.judgement import DIMENSIONS
from agentworld_tui.world.trajectories import (
    BadLines,
    TrajectoryError,
    benchmark_files,
    jsonl_lines,
    parse_sample,
)

PREDICTIONS = "predictions.jsonl"
JUDGED = "judged.jsonl"
GEN = "gen"
FAILED = "failed"
TOTAL = "total_score"
ERROR = "error_message"
EXTRACTED = "extracted_output"
JUDGE_ANSWER = "judge_raw_output"
NO_GENERATION = "No model generation"
JUDGE_FAILED = "Judge scoring failed"
ADDED = (GEN, FAILED, TOTAL, ERROR, EXTRACTED, JUDGE_ANSWER, "strengths", "weaknesses", *DIMENSIONS)
"""The fields the official evaluator adds to a benchmark line."""
DEFAULT_TASK = "mcp"
"""The domain the official evaluator gives a line without ``task``."""
OFFICIAL_SETTINGS = "the official evaluator's file (judge and settings not recorded)"


# -- finding and reading ------------------------------------------------------------------------
def official_file(path: Path) -> Path | None:
    """The official evaluator's file ``path`` is or holds (a folder without a bench run:
    its ``judged.jsonl``, else its ``predictions.jsonl``); None when it is neither."""
    if path.is_dir():
        if (path / RUN_FILE).exists():
            return None
        candidates = [path / JUDGED, path / PREDICTIONS]
    else:
        candidates = [path]
    return next((c for c in candidates if c.is_file() and _looks_official(c)), None)


def _looks_official(path: Path) -> bool:
    """Whether the file's first record is the official evaluator's (a benchmark line with
    ``gen`` or ``failed`` added), not one of this program's (``key`` and ``status``)."""
    try:
        with path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    first = json.loads(line)
                    break
            else:
                return False
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(first, dict) or ("key" in first and "status" in first):
        return False
    return GEN in first or FAILED in first


@dataclass
class OfficialRecords:
    """A file's records by source (``<file name>:<line>``), in file order."""

    records: dict[str, dict[str, Any]]
    problems: list[str] = field(default_factory=list)


def read_records(path: Path) -> OfficialRecords:
    """Every JSON object line of ``path``; other lines are skipped and reported."""
    found = OfficialRecords({})
    bad = BadLines(MAX_PROBLEMS)
    for source, line in _lines(path):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if not isinstance(record, dict):
            bad.add(f"{source}: not a JSON object; skipped")
            continue
        found.records[source] = record
    found.problems = bad.summary()
    return found


def _lines(path: Path) -> Iterator[tuple[str, str]]:
    try:
        yield from jsonl_lines(path)
    except TrajectoryError as exc:
        raise BenchError(str(exc)) from None


def _domain(record: dict[str, Any]) -> str:
    task = record.get("task", DEFAULT_TASK)
    return task.rsplit("/", 1)[-1] if isinstance(task, str) else DEFAULT_TASK


def _identity(record: dict[str, Any], source: str) -> str:
    """The sample's content identity, or its place when the record is not a sample."""
    try:
        return sample_sha(parse_sample(json.dumps(record), DEFAULT_TASK, source))
    except (TrajectoryError, ValueError, RecursionError):
        return source


# -- scoring ------------------------------------------------------------------------------------
def score_official(path: Path, name: str = "") -> tuple[RunScores, list[str]]:
    """The scores of an official ``predictions.jsonl`` or ``judged.jsonl`` as its score
    step computes them, and the problems met (lines skipped, records counted as failed)."""
    found = read_records(path)
    if not found.records:
        raise BenchError(f"{path}: no records")
    problems = found.problems
    samples = [_sample_score(source, record, problems) for source, record in found.records.items()]
    return score_samples(name or str(path), samples), problems


def _sample_score(source: str, record: dict[str, Any], problems: list[str]) -> SampleScore:
    score = SampleScore(source, _domain(record), identity=_identity(record, source))
    gen = record.get(GEN)
    if FAILED not in record:  # a predictions file: nothing judged yet
        if not (isinstance(gen, str) and gen):
            score.status, score.why = "failed", "empty generation"
        return score
    score.settings = OFFICIAL_SETTINGS
    answer = record.get(JUDGE_ANSWER)
    if isinstance(answer, str):
        score.strict = read_verdict(answer).strict
    failed = record[FAILED]
    if not (isinstance(failed, int | float) and failed == 0):
        empty = not (isinstance(gen, str) and gen) or record.get(ERROR) == NO_GENERATION
        score.status, score.why = "failed", "empty generation" if empty else "unreadable"
        return score
    values: dict[str, float] = {}
    for name in (*DIMENSIONS, TOTAL):
        value = record.get(name, 0)
        if not _number(value):
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"{source}: {name} is not a number; counted as failed")
            score.status, score.why = "failed", "unreadable"
            return score
        values["total" if name == TOTAL else name] = float(value)
    score.status, score.values = "valid", values
    return score


def _number(value: Any) -> bool:
    """A JSON number a mean can take: finite and within a float's range (true and false
    count as 1 and 0, as they do in the official arithmetic)."""
    if not isinstance(value, int | float):
        return False
    try:
        return abs(float(value)) != float("inf") and value == value
    except OverflowError:
        return False


# -- judging an official file here ----------------------------------------------------------------
@dataclass
class Imported:
    added: int = 0
    """Predictions new or changed since the last import."""
    kept: int = 0
    problems: list[str] = field(default_factory=list)


def import_predictions(source: Path, run: BenchRun) -> Imported:
    """Take the generations of an official file into ``run`` (a bench run folder made for
    it), so that they are judged and scored as a run of this program's: each sample keyed
    by its place in the file, its generation (``gen``) as what the official evaluator
    scores. A generation already imported is kept, with its verdicts; a changed one
    replaces it and is judged again."""
    info = run.info()
    data = str(source.resolve())
    if info is None:
        record = {
            "format": "agentworld-bench",
            "version": 1,
            "data": data,
            "model": f"{source.name} (the official evaluator's)",
            "where": "imported",
            "imported": "official",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        run.write_info(record)
    elif info.get("data") != data or info.get("imported") != "official":
        raise BenchError(
            f"{run.folder} holds a run over {info.get('data')}, not {data}: pass another --out"
        )
    found = read_records(source)
    summary = Imported(problems=found.problems)
    run.predictions.drop_torn_tail()
    have = run.predictions.read()
    for key, record in found.records.items():
        gen = record.get(GEN)
        gen = gen if isinstance(gen, str) else ""
        sha = prediction_sha(gen)
        if have.get(key, {}).get("prediction_sha") == sha:
            summary.kept += 1
            continue
        run.predictions.append(
            {
                "key": key,
                "id": str(record.get("id", "")),
                "domain": _domain(record),
                "status": "complete",
                "note": "imported from the official evaluator's file",
                "raw": gen,
                "content": gen,
                "prediction_sha": sha,
                "sample_sha": _identity(record, key),
                "time": time.time(),
            }
        )
        summary.added += 1
    return summary


# -- writing a run's files as the official evaluator writes them ----------------------------------
@dataclass
class Exported:
    predictions: int = 0
    judged: int = 0
    not_predicted: int = 0
    not_judged: int = 0
    written: list[Path] = field(default_factory=list)


def export_run(run: BenchRun, dest: Path) -> Exported:
    """Write ``dest/predictions.jsonl`` and (when anything was judged) ``dest/judged.jsonl``
    from ``run``, as the official evaluator writes them: each benchmark line's object as it
    was, in the benchmark's order. Samples not predicted yet, or not judged yet, are left
    out and counted. Each file is written whole or not at all."""
    info = run.require()
    data = Path(str(info.get("data", "")))
    if dest.resolve() == run.folder.resolve():
        raise BenchError(f"{dest}: the run's own folder; give another")
    predictions = run.finished_predictions()
    verdicts = run.judgements.read()
    summary = Exported()
    with (
        _Staged(dest / PREDICTIONS) as predicted_out,
        _Staged(dest / JUDGED) as judged_out,
    ):
        for source, line in _benchmark_lines(data):
            try:
                job = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(job, dict):
                continue
            job = {k: v for k, v in job.items() if k not in ADDED}
            prediction = predictions.get(source)
            if prediction is None:
                summary.not_predicted += 1
                continue
            job[GEN] = official_generation(prediction)
            predicted_out.write(job)
            summary.predictions += 1
            judged = _judged(job, prediction, verdicts.get(source))
            if judged is None:
                summary.not_judged += 1
            else:
                judged_out.write(judged)
                summary.judged += 1
        if not summary.predictions:
            raise BenchError(f"{run.folder}: no predictions to write")
        if not summary.judged:
            judged_out.discard()
    summary.written = [dest / PREDICTIONS] + ([dest / JUDGED] if summary.judged else [])
    return summary


def _judged(
    job: dict[str, Any], prediction: dict[str, Any], verdict: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The judged line for a sample; None while it awaits a verdict."""
    if not job[GEN]:
        return {**job, FAILED: 1.0, ERROR: NO_GENERATION}
    if not judgement_current(verdict, prediction):
        return None
    assert verdict is not None
    extracted = str(verdict.get("extracted", ""))
    official = official_of(verdict)
    if official is None:
        return {**job, TOTAL: 0, FAILED: 1.0, ERROR: JUDGE_FAILED, EXTRACTED: extracted}
    return {
        **job,
        TOTAL: official.total,
        **{d: official.scores.get(d, 0) for d in DIMENSIONS},
        FAILED: 0.0,
        "strengths": list(official.strengths),
        "weaknesses": list(official.weaknesses),
        EXTRACTED: extracted,
        JUDGE_ANSWER: str(verdict.get("answer", "")),
    }


def _benchmark_lines(data: Path) -> Iterator[tuple[str, str]]:
    """The benchmark's lines by source, in the order the official evaluator reads them."""
    try:
        files = benchmark_files(data)
    except TrajectoryError as exc:
        raise BenchError(f"the run's benchmark: {exc}") from None
    for file in files:
        yield from _lines(file)


class _Staged:
    """A JSON Lines file written beside its final place and moved there only when the
    whole was written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._discarded = False

    def __enter__(self) -> _Staged:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            raise BenchError(f"cannot write in {self.path.parent}: {exc.strerror or exc}") from None
        self._tmp = Path(name)
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, record: dict[str, Any]) -> None:
        try:
            self._handle.write(record_line(record) + "\n")
        except OSError as exc:
            raise BenchError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def discard(self) -> None:
        self._discarded = True

    def __exit__(self, kind: object, *_rest: object) -> None:
        try:
            if kind is None and not self._discarded:
                self._handle.flush()
                os.fsync(self._handle.fileno())
                self._handle.close()
                os.replace(self._tmp, self.path)
        except OSError as exc:
            raise BenchError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        finally:
            self._handle.close()
            self._tmp.unlink(missing_ok=True)
