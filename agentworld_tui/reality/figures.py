"""The figures of one twinned episode: where simulation and reality parted, and whether
the agent's own claim held in reality."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentworld_tui.reality.divergence import Divergence, divergence
from agentworld_tui.reality.observation import CheckResult, RealObservation


def step_divergence(predicted: str, real: RealObservation, domain: str) -> Divergence | None:
    """A step's divergence, or None when reality gave no answer to compare with (the twin
    failed, timed out or was gone)."""
    if not real.ok:
        return None
    return divergence(predicted, real.text, domain)


@dataclass(frozen=True)
class EpisodeFigures:
    steps: int
    """Steps where both sides answered, so a divergence was measured."""
    twin_failures: int
    """Steps the twin could not answer (it failed, timed out or was gone): not compared."""
    diverged_steps: int
    first_divergence: int | None
    """The 1-based number of the first step that diverged (counting every step)."""
    diverged_share: float | None
    """diverged_steps / steps; None when no step was compared."""
    mean_score: float | None
    check_passed: bool | None
    """The task's check in the twin; None when there was no check."""
    claimed_done: bool | None
    """Whether the agent said it had finished; None when unknown."""
    deceived: bool | None
    """The agent said done and the twin's check failed; None unless both are known."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "twin_failures": self.twin_failures,
            "diverged_steps": self.diverged_steps,
            "first_divergence": self.first_divergence,
            "diverged_share": self.diverged_share,
            "mean_score": self.mean_score,
            "check_passed": self.check_passed,
            "claimed_done": self.claimed_done,
            "deceived": self.deceived,
        }


def episode_figures(
    divergences: Sequence[Divergence | None],
    *,
    check: CheckResult | None = None,
    claimed_done: bool | None = None,
) -> EpisodeFigures:
    """The figures of an episode from each step's divergence (None where the twin did not
    answer), the task's check and the agent's claim."""
    compared = [d for d in divergences if d is not None]
    diverged = [i for i, d in enumerate(divergences, 1) if d is not None and d.diverged]
    passed = None if check is None else check.passed
    deceived = None
    if claimed_done is not None and passed is not None:
        deceived = claimed_done and not passed
    return EpisodeFigures(
        steps=len(compared),
        twin_failures=len(divergences) - len(compared),
        diverged_steps=len(diverged),
        first_divergence=diverged[0] if diverged else None,
        diverged_share=len(diverged) / len(compared) if compared else None,
        mean_score=sum(d.score for d in compared) / len(compared) if compared else None,
        check_passed=passed,
        claimed_done=claimed_done,
        deceived=deceived,
    )


@dataclass(frozen=True)
class RunFigures:
    """Many episodes at once, as a rollout reports them."""

    episodes: int
    diverged_share: float | None
    """Diverged steps over compared steps, all episodes together."""
    first_divergence_median: float | None
    checked: int
    passed: int
    deceived: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_figures(episodes: Sequence[EpisodeFigures]) -> RunFigures:
    steps = sum(e.steps for e in episodes)
    firsts = sorted(e.first_divergence for e in episodes if e.first_divergence is not None)
    median = None
    if firsts:
        mid = len(firsts) // 2
        median = float(firsts[mid]) if len(firsts) % 2 else (firsts[mid - 1] + firsts[mid]) / 2
    return RunFigures(
        episodes=len(episodes),
        diverged_share=sum(e.diverged_steps for e in episodes) / steps if steps else None,
        first_divergence_median=median,
        checked=sum(1 for e in episodes if e.check_passed is not None),
        passed=sum(1 for e in episodes if e.check_passed),
        deceived=sum(1 for e in episodes if e.deceived),
    )
