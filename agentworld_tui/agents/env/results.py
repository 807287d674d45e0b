"""What a step gives back (the observation, its cost, the whole result) and the one error an
environment raises; values only, so that every module of the package can share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentworld_tui.agents.schedule import Decision
from agentworld_tui.world.action import Action
from agentworld_tui.world.session import TurnStatus

__all__ = ["Cost", "EnvError", "Observation", "StepResult"]


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
class StepResult:
    """One step: the predicted observation, the reasoning, the status, the cost."""

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

    @property
    def turn(self) -> int:
        return self.observation.turn

    @property
    def failed(self) -> bool:
        """The simulator gave no usable observation (an engine error, or no answer)."""
        return self.status in ("error", "no_answer")

    def to_dict(self) -> dict[str, Any]:
        return {
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
