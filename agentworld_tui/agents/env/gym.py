"""The simulator as a Gymnasium environment with text spaces (the ``gym`` extra).

Observations and actions are strings: an observation is the environment's state as the
simulator predicts it (the scenario's state after ``reset``), an action is the domain's own
text (a command line, a browser call, a JSON tool call, Python). ``reward`` is 0: a world
model predicts what happens, it does not judge it (score episodes with a judge, or a reward
of your own over ``info``). An episode is truncated at ``max_steps`` and never terminates by
itself. ``info`` carries the reasoning, the turn's status, its cost and the perturbation
schedule's decisions; an action the
domain refuses leaves the observation as it was, with the app's message in
``info["error"]``, and the episode goes on.

``register_environments()`` makes ``gymnasium.make("AgentWorld/Terminal-v0", engine=URL)``
work for every domain.
"""

from __future__ import annotations

import string
from typing import Any, SupportsFloat

import gymnasium
from gymnasium import spaces

from agentworld_tui.agents.env.actions import ActionInput
from agentworld_tui.agents.env.environment import EngineInput, Environment
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.sanitize import sanitize

__all__ = ["AnyText", "SimulatedEnv", "register_environments"]

MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 200_000
_SAMPLED = string.ascii_letters + string.digits + " -./"


class AnyText(spaces.Text):
    """A text space that holds any string within its lengths: observations are model
    output and actions are code or JSON, so no character set bounds them. Samples are
    drawn from a plain set of characters."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class SimulatedEnv(gymnasium.Env[str, str]):
    """One simulated environment of a domain (``Environment``'s arguments)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        domain: str = "terminal",
        *,
        engine: EngineInput | None = None,
        simulator: Simulator | None = None,
        scenario: str | None = None,
        world: str | None = None,
        schedule: object = None,
        max_steps: int | None = None,
        params: GenerationParams | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.env = Environment(
            domain,
            engine=engine,
            simulator=simulator,
            scenario=scenario,
            world=world,
            schedule=schedule,
            max_steps=max_steps,
            params=params,
            owner="gymnasium",
        )
        self.render_mode = render_mode
        self.observation_space = AnyText(MAX_OBSERVATION_CHARS, min_length=0, charset=_SAMPLED)
        self.action_space = AnyText(MAX_ACTION_CHARS, min_length=1, charset=_SAMPLED)
        self._shown = ""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        scenario = (options or {}).get("scenario")
        first = self.env.reset(seed=seed, scenario=scenario)
        self._shown = first.text
        return first.text, {"turn": 0, "tools": self.env.openai_tools()}

    def step(
        self, action: str | ActionInput
    ) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            step = self.env.step(action)
        except ActionError as exc:
            return self._shown, 0.0, False, False, {"status": "refused", "error": str(exc)}
        if step.observation.text or step.status == "complete":
            self._shown = step.observation.text
        info = {
            "turn": step.turn,
            "status": step.status,
            "note": step.note,
            "reasoning": step.reasoning,
            "cost": step.cost.to_dict(),
            "perturbation": step.perturbation,
            "preset": step.preset,
            "schedule": [decision.to_dict() for decision in step.schedule],
        }
        return self._shown, 0.0, False, step.done, info

    def render(self) -> str | None:
        """The current observation, made safe to print."""
        return sanitize(self._shown) if self.render_mode == "ansi" else None

    def close(self) -> None:
        self.env.close()


def register_environments() -> list[str]:
    """Register ``AgentWorld/<Domain>-v0`` for every domain; returns the ids."""
    from agentworld_tui.domains import DOMAINS

    ids: list[str] = []
    for name in DOMAINS:
        env_id = f"AgentWorld/{DOMAINS.title(name)}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="agentworld_tui.agents.env.gym:SimulatedEnv",
                kwargs={"domain": name},
            )
        ids.append(env_id)
    return ids
