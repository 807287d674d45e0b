"""What a step gives back (the observation, its cost, the whole result) and the one error an
environment raises; values only, so that every module of the package can share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentworld_tui.agents.schedule import Decision
from agentworld_tui.world.action import Action
from agentworld_tui.world.session import Turn, TurnStatus

if TYPE_CHECKING:
    from agentworld_tui.reality.figures import EpisodeFigures

__all__ = ["Cost", "EnvError", "Observation", "StepResult", "TwinStep"]


class EnvError(Exception):
    """An environment that cannot be made or stepped now; the message is one line."""


@dataclass(frozen=True)
class Cost:
    """What one step cost the simulator."""

    prompt_tokens: int = 0
    evaluated_prompt_tokens: int = 0
    """Prompt tokens the engine read; the rest came from the model state it kept."""
    generated_tokens: int = 0
    reasoning_tokens: int = 0
    seconds: float = 0.0
    """Wall time from the step's start to its recorded end: queueing and retries included."""
    generation_seconds: float = 0.0
    """The engine's own time for the generation."""
    retries: int = 0
    """Requests asked again after a transient server failure."""

    @classmethod
    def of(cls, stats: dict[str, Any], seconds: float, retries: int = 0) -> Cost:
        def whole(key: str) -> int:
            value = stats.get(key, 0)
            return int(value) if isinstance(value, int | float) else 0

        elapsed = stats.get("elapsed", 0.0)
        return cls(
            prompt_tokens=whole("prompt_tokens"),
            evaluated_prompt_tokens=whole("evaluated_prompt_tokens"),
            generated_tokens=whole("generated_tokens"),
            reasoning_tokens=whole("reasoning_tokens"),
            seconds=seconds,
            generation_seconds=float(elapsed) if isinstance(elapsed, int | float) else 0.0,
            retries=retries,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "evaluated_prompt_tokens": self.evaluated_prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "seconds": round(self.seconds, 4),
            "generation_seconds": round(self.generation_seconds, 4),
            "retries": self.retries,
        }


@dataclass(frozen=True)
class Observation:
    """What the environment shows: the scenario's state at reset, then each prediction."""

    text: str
    turn: int = 0
    """The turn that produced it (0: the starting state)."""


@dataclass(frozen=True)
class TwinStep:
    """A twinned step: which side the agent received, what reality said, how far the
    prediction was from it. The texts are raw: sanitize them before display."""

    delivered: str
    """"real" or "sim"."""
    status: str
    """Reality's: ok, error, timeout or crashed."""
    error: str
    """Why reality gave no answer ("" when it did)."""
    prediction: str
    real: str
    score: float | None
    """The divergence (0: the same once masked, 1: nothing alike); None: not compared."""
    diverged: bool | None
    note: str = ""
    """Said when reality was asked for and the agent received the simulation instead."""

    @classmethod
    def of(cls, turn: Turn, deliver: str) -> TwinStep | None:
        reality = turn.reality
        if reality is None:
            return None
        real = reality.get("real") or {}
        found = reality.get("divergence")
        delivered = str(reality.get("delivered", "sim"))
        status = str(real.get("status", "error"))
        error = str(real.get("error", ""))
        note = ""
        if deliver == "real" and delivered != "real":
            note = (
                f"the twin gave no answer ({status}: {error or 'no reason given'}): this "
                "step is the world model's prediction, and the episode goes on in simulation"
            )
        return cls(
            delivered=delivered,
            status=status,
            error=error,
            prediction=turn.observation,
            real=str(real.get("text", "")),
            score=float(found["score"]) if isinstance(found, dict) else None,
            diverged=bool(found["diverged"]) if isinstance(found, dict) else None,
            note=note,
        )

    @property
    def failed(self) -> bool:
        """The twin gave no answer for this step."""
        return self.status != "ok"

    def figures(self) -> dict[str, Any]:
        """What a step's info says of its twin: no texts, no timings (which differ from
        run to run)."""
        return {
            "delivered": self.delivered,
            "status": self.status,
            "error": self.error,
            "divergence": self.score,
            "diverged": self.diverged,
            "note": self.note,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.figures(), "prediction": self.prediction, "real": self.real}


@dataclass(frozen=True)
class StepResult:
    """One step: the observation the agent receives (the prediction, or with a twin the
    side delivered), the reasoning, the status, the cost."""

    observation: Observation
    reasoning: str
    status: TurnStatus
    """"complete", "interrupted" (stopped), "no_answer" or "error"."""
    note: str
    """Why the turn is not simply complete ("" when it is)."""
    cost: Cost
    action: Action
    perturbation: str = ""
    """The control instruction sent with this turn ("" for none)."""
    preset: str = ""
    """The perturbation preset it came from ("" for free text or none)."""
    schedule: tuple[Decision, ...] = ()
    """The schedule's rules that applied to this turn, each drawn and fired or not."""
    done: bool = False
    """The episode reached its step limit."""
    extraction: str = ""
    """What the answer's extraction left out, when it did."""
    twin: TwinStep | None = None
    """With a twin: the side delivered, reality's answer, the divergence."""
    episode: EpisodeFigures | None = None
    """With a twin, on the step that ended the episode (its step limit): the figures,
    the check's result among them."""

    @property
    def turn(self) -> int:
        return self.observation.turn

    @property
    def failed(self) -> bool:
        """The simulator gave no usable observation (an engine error, or no answer)."""
        return self.status in ("error", "no_answer")

    @property
    def delivered_real(self) -> bool:
        """The agent received reality's answer (the prediction may have failed)."""
        return self.twin is not None and self.twin.delivered == "real"

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "turn": self.turn,
                "action": self.action.payload,
                "observation": self.observation.text,
                "reasoning": self.reasoning,
                "status": self.status,
                "note": self.note,
                "cost": self.cost.to_dict(),
                "perturbation": self.perturbation,
                "preset": self.preset,
                "schedule": [d.to_dict() for d in self.schedule],
                "done": self.done,
                "extraction": self.extraction,
            }
            | ({"twin": self.twin.to_dict()} if self.twin is not None else {})
            | ({"episode": self.episode.to_dict()} if self.episode is not None else {})
        )
