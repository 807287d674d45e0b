"""Scores as AgentWorldBench reports them, from a run's predictions and verdicts.

Per sample, total = the mean of its five scores. Per domain, each dimension and the total
are means over the samples with a readable verdict; unreadable verdicts are counted and
shown, never averaged in as zero. Scores are reported on 0-100: (score - 1) / 4 * 100. The
overall score is the mean of the domains' scores, so each domain weighs the same whatever
its number of samples.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentworld_tui.evaluation.bench import BenchRun
from agentworld_tui.evaluation.judging import judgement_current
from agentworld_tui.world.judge import DIMENSIONS, Judgement, normalise

HEADINGS = {
    "format": "Format",
    "factuality": "Fact.",
    "consistency": "Consist.",
    "realism": "Realism",
    "quality": "Quality",
}


@dataclass
class SampleScore:
    key: str
    domain: str
    scores: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.scores[d] for d in DIMENSIONS) / len(DIMENSIONS)


@dataclass
class DomainScore:
    domain: str
    predicted: int = 0
    """Samples with a finished prediction."""
    judged: list[SampleScore] = field(default_factory=list)
    unreadable: int = 0
    unjudged: int = 0
    """Predictions without a verdict yet (or whose judge could not be reached)."""

    def mean(self, dimension: str) -> float | None:
        """The 1-5 mean of one dimension, or of ``total``; None when nothing was judged."""
        if not self.judged:
            return None
        if dimension == "total":
            return sum(s.total for s in self.judged) / len(self.judged)
        return sum(s.scores[dimension] for s in self.judged) / len(self.judged)

    def score(self, dimension: str = "total") -> float | None:
        """The 0-100 score of one dimension or of the total."""
        value = self.mean(dimension)
        return None if value is None else normalise(value)


@dataclass
class RunScores:
    name: str
    domains: list[DomainScore]

    def judged_domains(self) -> list[DomainScore]:
        return [d for d in self.domains if d.judged]

    def overall(self, dimension: str = "total") -> float | None:
        """The mean over domains of their 0-100 scores (None when none was judged)."""
        values = [d.score(dimension) for d in self.judged_domains()]
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None

    def keys(self) -> set[str]:
        return {s.key for d in self.domains for s in d.judged}

    def only(self, keys: set[str]) -> RunScores:
        """The same run scored on ``keys`` alone (for a fair comparison)."""
        domains = []
        for d in self.domains:
            kept = [s for s in d.judged if s.key in keys]
            domains.append(DomainScore(d.domain, len(kept), kept))
        return RunScores(self.name, domains)

    def to_dict(self) -> dict[str, Any]:
        def dims(get: Any) -> dict[str, float | None]:
            return {d: get(d) for d in (*DIMENSIONS, "total")}

        return {
            "run": self.name,
            "domains": {
                d.domain: {
                    "predicted": d.predicted,
                    "judged": len(d.judged),
                    "unreadable": d.unreadable,
                    "unjudged": d.unjudged,
                    "mean": dims(d.mean),
                    "score": dims(d.score),
                }
                for d in self.domains
            },
            "overall": dims(self.overall),
        }


def score_samples(
    name: str, samples: Iterable[SampleScore], counts: dict[str, DomainScore] | None = None
) -> RunScores:
    """Scores from per-sample scores (``counts`` adds the predicted/unreadable tallies)."""
    domains: dict[str, DomainScore] = dict(counts or {})
    for sample in samples:
        domain = domains.setdefault(sample.domain, DomainScore(sample.domain))
        domain.judged.append(sample)
    return RunScores(name, sorted(domains.values(), key=lambda d: d.domain))


def score_run(run: BenchRun, name: str = "") -> RunScores:
    """The scores of a run's folder, from its latest predictions and current verdicts."""
    run.require()
    predictions = run.finished_predictions()
    verdicts = run.judgements.read()
    tallies: dict[str, DomainScore] = {}
    judged: list[SampleScore] = []
    for key, prediction in predictions.items():
        domain = str(prediction.get("domain", "?"))
        tally = tallies.setdefault(domain, DomainScore(domain))
        tally.predicted += 1
        verdict = verdicts.get(key)
        if not judgement_current(verdict, prediction):
            tally.unjudged += 1
            continue
        assert verdict is not None
        found = verdict.get("judgement")
        if not isinstance(found, dict):
            tally.unreadable += 1
            continue
        try:
            judgement = Judgement.from_dict(found)
        except (KeyError, TypeError, ValueError):
            tally.unreadable += 1
            continue
        judged.append(SampleScore(key, domain, dict(judgement.scores)))
    return score_samples(name or run.folder.name, judged, tallies)


# -- tables ---------------------------------------------------------------------------------
def _cell(value: float | None, width: int) -> str:
    return ("-" if value is None else f"{value:.1f}").rjust(width)


def score_table(scores: RunScores, *, raw: bool = False) -> str:
    """The per-domain table: five dimensions and the total, 0-100 (``raw``: 1-5 means)."""
    columns = [*DIMENSIONS, "total"]
    head = (
        f"{'Domain':<10}"
        + "".join(f"{HEADINGS.get(c, 'Total'):>9}" for c in columns)
        + f"{'judged':>8}{'unread.':>8}{'pending':>8}"
    )
    lines = [f"Run: {scores.name}", head, "-" * len(head)]
    for d in scores.domains:
        get = d.mean if raw else d.score
        lines.append(
            f"{d.domain:<10}"
            + "".join(_cell(get(c), 9) for c in columns)
            + f"{len(d.judged):>8}{d.unreadable:>8}{d.unjudged:>8}"
        )
    lines.append("-" * len(head))
    if raw:
        overall = [_overall_mean(scores, c) for c in columns]
    else:
        overall = [scores.overall(c) for c in columns]
    judged = sum(len(d.judged) for d in scores.domains)
    unreadable = sum(d.unreadable for d in scores.domains)
    pending = sum(d.unjudged for d in scores.domains)
    lines.append(
        f"{'Overall':<10}"
        + "".join(_cell(v, 9) for v in overall)
        + f"{judged:>8}{unreadable:>8}{pending:>8}"
    )
    scale = "1-5 means" if raw else "0-100: (mean - 1) / 4 * 100"
    lines.append(
        f"Scores {scale}; overall = mean of the domains; unreadable verdicts are left out."
    )
    return "\n".join(lines)


def _overall_mean(scores: RunScores, dimension: str) -> float | None:
    values = [d.mean(dimension) for d in scores.judged_domains()]
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def compare_table(a: RunScores, b: RunScores) -> str:
    """Two runs side by side on the samples judged in both."""
    common = a.keys() & b.keys()
    left, right = a.only(common), b.only(common)
    lines = [
        f"A: {a.name}",
        f"B: {b.name}",
        f"Compared on the {len(common)} samples judged in both runs "
        f"(A has {len(a.keys() - common)} more, B {len(b.keys() - common)} more).",
        "",
    ]
    head = f"{'Domain':<12}{'A':>8}{'B':>8}{'B - A':>8}{'samples':>9}"
    lines += [head, "-" * len(head)]
    names = sorted({d.domain for d in left.domains} | {d.domain for d in right.domains})
    for name in names:
        da = next((d for d in left.domains if d.domain == name), None)
        db = next((d for d in right.domains if d.domain == name), None)
        sa = da.score() if da else None
        sb = db.score() if db else None
        n = len(da.judged) if da else 0
        lines.append(f"{name:<12}{_cell(sa, 8)}{_cell(sb, 8)}{_delta(sa, sb)}{n:>9}")
    lines.append("-" * len(head))
    oa, ob = left.overall(), right.overall()
    lines.append(f"{'Overall':<12}{_cell(oa, 8)}{_cell(ob, 8)}{_delta(oa, ob)}{len(common):>9}")
    lines += ["", f"{'Dimension':<12}{'A':>8}{'B':>8}{'B - A':>8}", "-" * 36]
    for dimension in DIMENSIONS:
        va, vb = left.overall(dimension), right.overall(dimension)
        lines.append(f"{dimension.capitalize():<12}{_cell(va, 8)}{_cell(vb, 8)}{_delta(va, vb)}")
    lines.append("Scores 0-100: (mean - 1) / 4 * 100; overall = mean of the domains.")
    return "\n".join(lines)


def _delta(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-".rjust(8)
    return f"{b - a:+.1f}".rjust(8)


def scores_json(*runs: RunScores) -> str:
    return json.dumps([r.to_dict() for r in runs], indent=1) + "\n"
