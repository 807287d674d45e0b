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
    from agentworld_tui.reality.observation import RealObservation

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
    """A step that reached the twin: which side the agent received, what reality said,
    how far the prediction was from it (a step routed to reality alone has no prediction
    and no divergence). The texts are raw: sanitize them before display."""

    delivered: str
    """"real", "sim", or "none": a step the routing rules failed when reality could not
    answer (``on_failure = "fail"``)."""
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
    def of(
        cls, turn: Turn, deliver: str, *, real: RealObservation | None = None
    ) -> TwinStep | None:
        """The twin's side of ``turn`` (None: the twin was not asked). ``real`` is
        reality's answer to a step routed to it alone, where the caller has it (a
        fallback's turn records only why reality failed)."""
        reality = turn.reality
        if reality is None:
            return cls._routed(turn, real)
        said = reality.get("real") or {}
        found = reality.get("divergence")
        delivered = str(reality.get("delivered", "sim"))
        status = str(said.get("status", "error"))
        error = str(said.get("error", ""))
        note = ""
        if _failed(turn):
            delivered = "none"
        elif deliver == "real" and delivered != "real":
            note = (
                f"the twin gave no answer ({status}: {error or 'no reason given'}): this "
                "step is the world model's prediction, and the episode goes on in simulation"
            )
        return cls(
            delivered=delivered,
            status=status,
            error=error,
            prediction=turn.observation,
            real=str(said.get("text", "")),
            score=float(found["score"]) if isinstance(found, dict) else None,
            diverged=bool(found["diverged"]) if isinstance(found, dict) else None,
            note=note,
        )

    @classmethod
    def _routed(cls, turn: Turn, real: RealObservation | None) -> TwinStep | None:
        """A step the rules sent to reality alone: its answer delivered, or why there was
        none (the world model answered instead, or the step failed)."""
        route = turn.route if isinstance(turn.route, dict) else {}
        fallback, failed = str(route.get("fallback") or ""), str(route.get("failed") or "")
        if route.get("route") != "real" and not fallback:
            return None
        kept = turn.stats.get("real")
        said = kept if isinstance(kept, dict) else {}
        status = real.status.value if real is not None else str(said.get("status", "error"))
        error = (real.error if real is not None else str(said.get("error", ""))) or (
            fallback or failed
        )
        if not (fallback or failed):
            delivered = "real" if turn.status == "complete" else "none"  # "none": stopped
            return cls(delivered, status, error, "", turn.observation, None, None)
        if failed:
            return cls("none", status, error, "", "", None, None)
        note = (
            f"the twin gave no answer ({status}: {error or 'no reason given'}): this step "
            "is the world model's prediction, and the episode goes on in simulation"
        )
        return cls("sim", status, error, turn.observation, "", None, None, note)

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
    route: dict[str, Any] | None = None
    """With routing rules: where the step was answered (``answered``: real, sim or
    both), what the rules said and why (``reality.routing.Decision.to_dict``, and
    ``fallback`` or ``failed`` when reality could not answer)."""
    grounding: dict[str, Any] | None = None
    """With a trace store: the ids of the real examples the world model was shown, the
    tokens they took, the budget, how many were found (the text is in the session)."""
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
            | ({"route": self.route} if self.route is not None else {})
            | ({"grounding": self.grounding} if self.grounding is not None else {})
            | ({"episode": self.episode.to_dict()} if self.episode is not None else {})
        )


def _failed(turn: Turn) -> bool:
    """A step the routing rules failed: reality could not answer, and its rule said to
    fail rather than simulate."""
    return isinstance(turn.route, dict) and bool(turn.route.get("failed"))
