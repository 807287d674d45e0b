"""Scores as the official AgentWorldBench evaluator computes them, from a run's files.

Per sample, a verdict read by the official rules (judging/official.py) gives whole-number
scores; a dimension that was missing or unreadable is absent. A sample is *valid* when its
verdict was read, *failed* when its generation was empty or no verdict could be read after
the judge's attempts, *pending* while it awaits a prediction or a verdict. Per domain, each
dimension's score is the mean of its present values over the valid samples, the total the
mean of their totals (means as ``statistics.mean`` computes them); scores are reported on 0-100, (mean - 1) / 4 * 100, with two decimals
as the published tables are. The overall score is the mean over all valid samples of every
domain (not the mean of the domains' scores).

Beside it, labelled, the project's stricter view of the same answers: a verdict counts
only with all five scores within 1-5, taken as given (no rounding), and the overall is the
mean of the domains' scores, so each domain weighs the same.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentworld_tui.evaluation.bench import (
    DONE_STATUSES,
    BenchError,
    BenchRun,
    load_samples,
    official_generation,
    sample_sha,
)
from agentworld_tui.evaluation.judging import judgement_current
from agentworld_tui.judging.official import averageable
from agentworld_tui.judging.verdicts import guarded, read_verdict
from agentworld_tui.world.judgement import (
    DIMENSIONS,
    Judgement,
    OfficialVerdict,
    normalise,
)
from agentworld_tui.world.sanitize import one_line

HEADINGS = {
    "format": "Format",
    "factuality": "Fact.",
    "consistency": "Consist.",
    "realism": "Realism",
    "quality": "Quality",
    "total": "Total",
}
COLUMNS = (*DIMENSIONS, "total")
Status = Literal["valid", "failed", "pending"]


@dataclass
class SampleScore:
    """One sample as the official evaluator counts it, and the project's reading beside."""

    key: str
    domain: str
    status: Status = "pending"
    why: str = ""
    """For a failed sample: "empty generation" or "unreadable"."""
    values: dict[str, float] = field(default_factory=dict)
    """A valid sample's official values: the five dimensions and ``total`` (0 = absent)."""
    strict: Judgement | None = None
    settings: str = ""
    """The judge settings of its verdict, as one line ("" when none was recorded)."""
    predicted_trimmed: bool = False
    judged_trimmed: bool = False
    identity: str = ""
    """The sample's content digest (``bench.sample_sha``), which matches it across runs
    and the official evaluator's files; "" when unknown (then ``key`` does)."""

    def value(self, dimension: str) -> float:
        """The official value of a dimension or of the total (0 = absent)."""
        return self.values.get(dimension, 0.0)

    def use(self, verdict: OfficialVerdict) -> None:
        """Count ``verdict`` as this sample's valid verdict."""
        self.status = "valid"
        self.values = {d: float(verdict.scores.get(d, 0)) for d in DIMENSIONS}
        self.values["total"] = verdict.total


def _mean(values: list[float]) -> float | None:
    """``statistics.mean``, as the official evaluator averages: exact, so the printed
    figure never depends on the order of the samples or on float rounding in a sum."""
    return statistics.mean(values) if values else None


@dataclass
class DomainScore:
    domain: str
    samples: list[SampleScore] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for s in self.samples if s.status == status)

    def failed_because(self, why: str) -> int:
        return sum(1 for s in self.samples if s.status == "failed" and s.why == why)

    @property
    def valid(self) -> list[SampleScore]:
        return [s for s in self.samples if s.status == "valid"]

    def mean(self, dimension: str = "total") -> float | None:
        """The official 1-5 mean: present values of the valid samples."""
        return _mean([v for s in self.valid if (v := s.value(dimension)) != 0])

    def score(self, dimension: str = "total") -> float | None:
        value = self.mean(dimension)
        return None if value is None else normalise(value)

    def strict_judged(self) -> list[Judgement]:
        return [s.strict for s in self.samples if s.status != "pending" and s.strict]

    def strict_mean(self) -> float | None:
        return _mean([j.total for j in self.strict_judged()])

    def strict_score(self) -> float | None:
        value = self.strict_mean()
        return None if value is None else normalise(value)


@dataclass
class RunScores:
    name: str
    domains: list[DomainScore]

    def samples(self) -> list[SampleScore]:
        return [s for d in self.domains for s in d.samples]

    def overall_mean(self, dimension: str = "total") -> float | None:
        """The official overall: present values of every valid sample, all domains pooled."""
        pooled = [v for d in self.domains for s in d.valid if (v := s.value(dimension)) != 0]
        return _mean(pooled)

    def overall(self, dimension: str = "total") -> float | None:
        value = self.overall_mean(dimension)
        return None if value is None else normalise(value)

    def strict_overall_mean(self) -> float | None:
        """The project's view: the mean of the domains' strict means."""
        return _mean([m for d in self.domains if (m := d.strict_mean()) is not None])

    def strict_overall(self) -> float | None:
        value = self.strict_overall_mean()
        return None if value is None else normalise(value)

    def keys(self, by_content: bool = False) -> set[str]:
        """The samples with a valid verdict, by key (or by content digest)."""
        return {s.identity if by_content else s.key for s in self.samples() if s.status == "valid"}

    def identified(self) -> bool:
        """Whether every sample's content digest is known."""
        return all(s.identity for s in self.samples())

    def only(self, keys: set[str], by_content: bool = False) -> RunScores:
        """The same run scored on ``keys`` alone (for a fair comparison)."""
        domains = [
            DomainScore(
                d.domain,
                [s for s in d.samples if (s.identity if by_content else s.key) in keys],
            )
            for d in self.domains
        ]
        return RunScores(self.name, [d for d in domains if d.samples])

    def settings(self) -> Counter[str]:
        """How many counted verdicts each judge setting made (an empty generation was
        never judged)."""
        return Counter(s.settings for s in self.samples() if s.status != "pending" and s.settings)

    def to_dict(self) -> dict[str, Any]:
        def dims(get: Any, digits: int) -> dict[str, float | None]:
            return {c: _rounded(get(c), digits) for c in COLUMNS}

        return {
            "run": self.name,
            "judged_with": dict(self.settings()),
            "domains": {
                d.domain: {
                    "samples": len(d.samples),
                    "valid": d.count("valid"),
                    "failed": d.count("failed"),
                    "failed_empty_generation": d.failed_because("empty generation"),
                    "failed_unreadable": d.failed_because("unreadable"),
                    "pending": d.count("pending"),
                    "mean": dims(d.mean, 4),
                    "score": dims(d.score, 2),
                    "strict": {
                        "judged": len(d.strict_judged()),
                        "mean": _rounded(d.strict_mean(), 4),
                        "score": _rounded(d.strict_score(), 2),
                    },
                }
                for d in self.domains
            },
            "overall": {
                "valid": len(self.keys()),
                "mean": dims(self.overall_mean, 4),
                "score": dims(self.overall, 2),
                "strict": {
                    "mean": _rounded(self.strict_overall_mean(), 4),
                    "score": _rounded(self.strict_overall(), 2),
                },
            },
        }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# -- from a run's files -------------------------------------------------------------------------
def official_of(verdict: dict[str, Any]) -> OfficialVerdict | None:
    """The official reading recorded with a verdict; for a verdict recorded before it was
    kept, the judge's stored answer read again by the official rules. None when there is
    none, or what is stored cannot be read (never an exception)."""
    found = verdict.get("official")
    if isinstance(found, dict):
        return guarded(lambda: averageable(OfficialVerdict.from_dict(found)))[0]
    if "official" in verdict:
        return None
    answer = verdict.get("answer")
    if not isinstance(answer, str):
        return None
    return read_verdict(answer).official


def _strict_of(verdict: dict[str, Any]) -> Judgement | None:
    found = verdict.get("judgement")
    if not isinstance(found, dict):
        return None
    return guarded(lambda: Judgement.from_dict(found))[0]


def settings_line(verdict: dict[str, Any]) -> str:
    settings = verdict.get("settings")
    if not isinstance(settings, dict):
        return "judge settings not recorded (judged by an earlier version)"
    return (
        f"judge {settings.get('judge', '?')}, prompts: {settings.get('prompts', '?')}; "
        f"temperature {settings.get('temperature', '?')}, max_tokens "
        f"{settings.get('max_tokens', '?')}, up to {settings.get('attempts', '?')} attempts"
    )


def sample_score(prediction: dict[str, Any], verdict: dict[str, Any] | None) -> SampleScore:
    key = str(prediction.get("key", ""))
    identity = prediction.get("sample_sha")
    score = SampleScore(
        key,
        str(prediction.get("domain", "?")),
        identity=identity if isinstance(identity, str) else "",
    )
    omitted = prediction.get("omitted_turns")
    score.predicted_trimmed = isinstance(omitted, int) and omitted > 0
    if prediction.get("status") not in DONE_STATUSES:
        return score  # a request that failed: predicted again next run
    if not official_generation(prediction):
        score.status, score.why = "failed", "empty generation"
        return score
    if not judgement_current(verdict, prediction):
        return score
    assert verdict is not None
    score.settings = settings_line(verdict)
    trimmed = verdict.get("trimmed_turns")
    score.judged_trimmed = isinstance(trimmed, int) and trimmed > 0
    score.strict = _strict_of(verdict)
    official = official_of(verdict)
    if official is None:
        score.status, score.why = "failed", "unreadable"
    else:
        score.use(official)
    return score


def score_samples(name: str, samples: Iterable[SampleScore]) -> RunScores:
    domains: dict[str, DomainScore] = {}
    for sample in samples:
        domains.setdefault(sample.domain, DomainScore(sample.domain)).samples.append(sample)
    return RunScores(name, sorted(domains.values(), key=lambda d: d.domain))


def score_run(run: BenchRun, name: str = "") -> RunScores:
    """The scores of a run's folder, from its latest predictions and current verdicts."""
    run.require()
    verdicts = run.judgements.read()
    return score_samples(
        name or run.folder.name,
        (sample_score(p, verdicts.get(k)) for k, p in run.predictions.read().items()),
    )


def identify(run: BenchRun, scores: RunScores) -> None:
    """Give the samples recorded without their content digest (by an earlier version) one,
    from the run's benchmark while it can still be read, so that the run can be matched
    with another made elsewhere."""
    missing = [s for s in scores.samples() if not s.identity]
    if not missing:
        return
    info = run.info() or {}
    try:
        found = load_samples(Path(str(info.get("data", ""))))
    except (BenchError, OSError):
        return
    digests = {sample.source: sample_sha(sample) for sample in found.samples}
    for score in missing:
        score.identity = digests.get(score.key, "")


# -- tables -------------------------------------------------------------------------------------
def _cell(value: float | None, width: int) -> str:
    return ("-" if value is None else f"{value:.2f}").rjust(width)


def score_table(scores: RunScores, *, raw: bool = False) -> str:
    """The per-domain table: the official scores (0-100, or 1-5 means with ``raw``), the
    counts, and the project's stricter total beside, labelled."""
    head = (
        f"{'Domain':<10}"
        + "".join(f"{HEADINGS[c]:>9}" for c in COLUMNS)
        + f"{'valid':>7}{'failed':>7}{'pending':>8}{'Strict':>9}"
    )
    lines = [f"Run: {one_line(scores.name)}"]
    for setting, count in sorted(scores.settings().items()):
        lines.append(f"Judged with {one_line(setting)} ({count} samples)")
    lines += [head, "-" * len(head)]
    for d in scores.domains:
        get = d.mean if raw else d.score
        strict = d.strict_mean() if raw else d.strict_score()
        lines.append(
            f"{one_line(d.domain)[:10]:<10}"
            + "".join(_cell(get(c), 9) for c in COLUMNS)
            + f"{d.count('valid'):>7}{d.count('failed'):>7}{d.count('pending'):>8}"
            + _cell(strict, 9)
        )
    lines.append("-" * len(head))
    overall = scores.overall_mean if raw else scores.overall
    strict = scores.strict_overall_mean() if raw else scores.strict_overall()
    every = scores.samples()
    lines.append(
        f"{'Overall':<10}"
        + "".join(_cell(overall(c), 9) for c in COLUMNS)
        + f"{sum(s.status == 'valid' for s in every):>7}"
        + f"{sum(s.status == 'failed' for s in every):>7}"
        + f"{sum(s.status == 'pending' for s in every):>8}"
        + _cell(strict, 9)
    )
    scale = "1-5 means" if raw else "Scores 0-100, (mean - 1) / 4 * 100"
    lines.append(
        f"{scale}, as the official evaluator computes them: whole-number scores, a missing "
        "dimension left out; overall = the mean over all valid samples."
    )
    lines.append(
        "Strict: the project's stricter reading of the same answers (all five scores, as "
        "given); its overall is the mean of the domains."
    )
    lines += _notes(every)
    return "\n".join(lines)


def _notes(samples: list[SampleScore]) -> list[str]:
    notes = []
    empty = sum(s.status == "failed" and s.why == "empty generation" for s in samples)
    unreadable = sum(s.status == "failed" and s.why == "unreadable" for s in samples)
    if empty or unreadable:
        notes.append(
            f"failed: {empty} empty generation(s), not judged; {unreadable} with no verdict "
            "after the judge's attempts."
        )
    trimmed = sum(s.predicted_trimmed for s in samples)
    if trimmed:
        notes.append(
            f"{trimmed} sample(s) predicted with their oldest history left out to fit the "
            "context (the official evaluator sends it all)."
        )
    judged = sum(s.judged_trimmed for s in samples if s.status != "pending")
    if judged:
        notes.append(
            f"{judged} sample(s) judged with their oldest history left out to fit the "
            "judge's context (the official evaluator sends it all)."
        )
    return notes


def compare_table(a: RunScores, b: RunScores) -> str:
    """Two runs side by side on the samples valid in both."""
    by_content = a.identified() and b.identified()
    common = a.keys(by_content) & b.keys(by_content)
    left, right = a.only(common, by_content), b.only(common, by_content)
    lines = [
        f"A: {one_line(a.name)}",
        f"B: {one_line(b.name)}",
        f"Compared on the {len(common)} samples valid in both runs "
        f"(A has {len(a.keys(by_content) - common)} more, "
        f"B {len(b.keys(by_content) - common)} more"
        + ("; matched by their benchmark lines' content)." if by_content else ")."),
        "",
    ]
    head = f"{'Domain':<12}{'A':>9}{'B':>9}{'B - A':>9}{'samples':>9}"
    lines += [head, "-" * len(head)]
    names = sorted({d.domain for d in left.domains} | {d.domain for d in right.domains})
    for name in names:
        da = next((d for d in left.domains if d.domain == name), None)
        db = next((d for d in right.domains if d.domain == name), None)
        sa = da.score() if da else None
        sb = db.score() if db else None
        n = len(da.valid) if da else 0
        lines.append(f"{one_line(name)[:12]:<12}{_cell(sa, 9)}{_cell(sb, 9)}{_delta(sa, sb)}{n:>9}")
    lines.append("-" * len(head))
    oa, ob = left.overall(), right.overall()
    lines.append(f"{'Overall':<12}{_cell(oa, 9)}{_cell(ob, 9)}{_delta(oa, ob)}{len(common):>9}")
    lines += ["", f"{'Dimension':<12}{'A':>9}{'B':>9}{'B - A':>9}", "-" * 39]
    for dimension in DIMENSIONS:
        va, vb = left.overall(dimension), right.overall(dimension)
        lines.append(f"{dimension.capitalize():<12}{_cell(va, 9)}{_cell(vb, 9)}{_delta(va, vb)}")
    lines.append(
        "Scores 0-100 as the official evaluator computes them; overall = the mean over all "
        "valid samples."
    )
    return "\n".join(lines)


def _delta(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-".rjust(9)
    return f"{b - a:+.2f}".rjust(9)


def scores_json(*runs: RunScores) -> str:
    return json.dumps([r.to_dict() for r in runs], indent=1) + "\n"
