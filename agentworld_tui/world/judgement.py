"""A judgement as the world keeps it with a turn: five scores from 1 to 5, the judge's
reasons, and the same answer read by the official evaluator's rules. How a judge is asked
and how its answer is read live in ``agentworld_tui.judging``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Message = dict[str, str]

DIMENSIONS: tuple[str, ...] = ("format", "factuality", "consistency", "realism", "quality")
LOWEST, HIGHEST = 1.0, 5.0


class JudgementError(ValueError):
    """A judge's answer without a usable verdict; the message says what was missing."""


def normalise(score: float) -> float:
    """A 1-5 score on the benchmark's 0-100 scale."""
    return (score - LOWEST) / (HIGHEST - LOWEST) * 100.0


@dataclass(frozen=True)
class Judgement:
    """A readable verdict: five scores from 1 to 5, with the judge's reasons."""

    scores: dict[str, float]
    strengths: tuple[str, ...] = ()
    weaknesses: tuple[str, ...] = ()
    note: str = ""
    """How the verdict was read when it needed mending ("" when it was clean JSON)."""

    @property
    def total(self) -> float:
        """The mean of the five scores."""
        return sum(self.scores[d] for d in DIMENSIONS) / len(DIMENSIONS)

    @property
    def normalised(self) -> float:
        return normalise(self.total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scores": {d: self.scores[d] for d in DIMENSIONS},
            "total": self.total,
            "normalised": self.normalised,
            "strengths": list(self.strengths),
            "weaknesses": list(self.weaknesses),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Judgement:
        scores = data["scores"]
        return cls(
            scores={d: float(scores[d]) for d in DIMENSIONS},
            strengths=tuple(str(s) for s in data.get("strengths", ())),
            weaknesses=tuple(str(s) for s in data.get("weaknesses", ())),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class Verdict:
    """The outcome of asking a judge: a judgement, or why there is none."""

    judgement: Judgement | None
    error: str = ""
    """Why there is no judgement: an unreadable answer, or the judge engine failed."""
    judge: str = ""
    """The judge model, as its engine names it."""
    reference: str = ""
    """The real observation the prediction was compared with."""
    answer: str = ""
    """The judge's whole answer (reasoning included), to see why it judged as it did."""
    stats: dict[str, Any] = field(default_factory=dict)
    engine_failed: bool = False
    """No answer came (the judge engine failed or was stopped): worth asking again. An
    answer that came but could not be read is final."""
    official: OfficialVerdict | None = None
    """The same answer read by the official evaluator's rules (judging/official.py): what a
    bench score counts. ``judgement`` is the project's stricter reading of it."""
    attempts: int = 0
    """Requests made to get this verdict (a judge asked again when its answer was
    unreadable or its request failed)."""

    @property
    def parsed(self) -> bool:
        return self.judgement is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "judgement": self.judgement.to_dict() if self.judgement else None,
            "error": self.error,
            "judge": self.judge,
            "reference": self.reference,
            "answer": self.answer,
            "stats": self.stats,
            "engine_failed": self.engine_failed,
            "official": self.official.to_dict() if self.official else None,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        found = data.get("judgement")
        official = data.get("official")
        return cls(
            judgement=Judgement.from_dict(found) if found else None,
            error=str(data.get("error", "")),
            judge=str(data.get("judge", "")),
            reference=str(data.get("reference", "")),
            answer=str(data.get("answer", "")),
            stats=dict(data.get("stats", {})),
            engine_failed=bool(data.get("engine_failed", False)),
            official=OfficialVerdict.from_dict(official) if official else None,
            attempts=int(data.get("attempts", 0)),
        )


@dataclass(frozen=True)
class OfficialVerdict:
    """Scores as the official evaluator reads them: whole numbers, 0 for a dimension that
    was missing or unreadable (its mean leaves such a dimension out)."""

    scores: dict[str, int]
    strengths: tuple[str, ...] = ()
    weaknesses: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        """The mean of the positive scores (0.0 when there is none)."""
        present = [v for v in self.scores.values() if v > 0]
        return sum(present) / len(present) if present else 0.0

    @property
    def normalised(self) -> float | None:
        return normalise(self.total) if self.total else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scores": {d: self.scores.get(d, 0) for d in DIMENSIONS},
            "total": self.total,
            "strengths": list(self.strengths),
            "weaknesses": list(self.weaknesses),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OfficialVerdict:
        """Raises TypeError or ValueError for a record of the wrong shape."""
        scores = data["scores"]
        if not isinstance(scores, dict):
            raise TypeError("scores is not an object")
        values = {d: scores.get(d, 0) for d in DIMENSIONS}
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values.values()):
            raise TypeError("a score is not a whole number")
        return cls(
            values,
            tuple(str(s) for s in data.get("strengths", ())),
            tuple(str(s) for s in data.get("weaknesses", ())),
        )
