"""A domain as an OpenEnv environment: reset, step and state over HTTP and WebSockets.

openenv-core (the ``openenv`` extra) defines the server side: an ``Environment`` subclass
with its own ``Action``, ``Observation`` and ``State`` models, handed as a factory to
``create_fastapi_app``, which serves ``POST /reset``, ``POST /step``, ``GET /state``,
``/schema``, ``/health`` and a WebSocket session per connection at ``/ws``. Each WebSocket
session gets an environment of its own; all of them share one simulator (one engine), so
a server's steps run concurrently and a local model's queue in order. An HTTP ``/reset``
or ``/step`` is stateless, as OpenEnv defines it: a fresh environment for the one call (a
step on it starts from the scenario's state). OpenEnv clients (``GenericEnvClient``, or
``AgentWorldClient`` below for typed observations) connect unchanged.

An action is the domain's own form (``{"action": "ls -la\\n"}``, ``{"action": {"name":
"search", "arguments": {...}}}``) or one of the environment's tools (``{"tool":
"send_keystrokes", "arguments": {"keystrokes": "ls\\n"}}``). A refused action comes back as
an observation with the app's message in ``error`` and the episode goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult as OpenEnvStepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from agentworld_tui import __version__
from agentworld_tui.agents.env.actions import ActionInput, ToolCall
from agentworld_tui.agents.env.environment import EnvError, Environment, StepResult
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.action import ActionError

__all__ = [
    "AgentWorldAction",
    "AgentWorldClient",
    "AgentWorldObservation",
    "AgentWorldState",
    "OpenEnvSimulation",
    "ServeConfig",
    "make_app",
]

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class AgentWorldAction(Action):  # type: ignore[misc]
    """An agent's action: the domain's own form, or a call of one of its tools."""

    action: str | dict[str, Any] | list[Any] | None = Field(
        default=None,
        description="the action as the domain writes it: text (a command line, a browser "
        "call, Python) or its JSON (a keystroke list, a tool call, a phone action)",
    )
    tool: str | None = Field(default=None, description="an agent tool's name, instead of action")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")


class AgentWorldObservation(Observation):  # type: ignore[misc]
    """What the simulated environment shows, and what the turn cost."""

    text: str = Field(default="", description="the environment's state as predicted")
    turn: int = Field(default=0, description="the turn that produced it (0: the start)")
    status: str = Field(
        default="start",
        description="start, complete, interrupted, no_answer, error, or refused",
    )
    note: str = Field(default="", description="why the turn is not simply complete")
    reasoning: str = Field(default="", description="the simulator's reasoning")
    error: str = Field(default="", description="why the action was refused (status refused)")
    cost: dict[str, Any] = Field(default_factory=dict, description="tokens and seconds")
    perturbation: str = Field(default="", description="the control instruction sent with it")
    preset: str = Field(default="", description="the perturbation preset it came from")
    schedule: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the schedule's rules that applied to the turn: rule, draw, fired",
    )
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="the agent tools (OpenAI form), at reset"
    )


class AgentWorldState(State):  # type: ignore[misc]
    """The episode as the server keeps it."""

    domain: str = ""
    scenario: str = ""
    session_id: str = ""
    turns: int = 0
    done: bool = False


@dataclass(frozen=True)
class ServeConfig:
    """What every session of the server shares: the domain, its starting point, the
    simulator; ``session_dir`` saves each episode as a session file there."""

    domain: str
    simulator: Simulator
    scenario: str | None = None
    world: str | None = None
    schedule: object = None
    max_steps: int | None = None
    params: GenerationParams | None = None
    session_dir: Path | None = None
    max_sessions: int = 64
    """WebSocket sessions at once."""


class OpenEnvSimulation(OpenEnvEnvironment):  # type: ignore[misc]
    """One OpenEnv session: an ``Environment`` on the server's shared simulator."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: ServeConfig) -> None:
        super().__init__()
        self.config = config
        self.env = Environment(
            config.domain,
            simulator=config.simulator,
            scenario=config.scenario,
            world=config.world,
            schedule=config.schedule,
            max_steps=config.max_steps,
            params=config.params,
            owner="openenv",
        )
        self.episode_id: str | None = None
        self._done = False

    # -- OpenEnv's interface ------------------------------------------------------------
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        first = self.env.reset(seed=seed, scenario=kwargs.get("scenario"))
        return self._started(episode_id, first.text)

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        first = await self.env.areset(seed=seed, scenario=kwargs.get("scenario"))
        return self._started(episode_id, first.text)

    def step(
        self, action: AgentWorldAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        try:
            return self._observed(self.env.step(_action_of(action)))
        except ActionError as exc:
            return self._refused(str(exc))

    async def step_async(
        self, action: AgentWorldAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        try:
            value = _action_of(action)
            if self.env._episode is None:
                await self.reset_async()
            stepping = self.env.astep(value)
            if timeout_s is None:
                step = await stepping
            else:
                try:
                    step = await asyncio.wait_for(stepping, timeout_s)
                except TimeoutError:
                    return self._timed_out(timeout_s)
        except ActionError as exc:
            return self._refused(str(exc))
        return self._observed(step)

    @property
    def state(self) -> AgentWorldState:
        env = self.env
        episode = env._episode
        return AgentWorldState(
            episode_id=self.episode_id,
            step_count=env.steps,
            domain=env.domain.name,
            scenario=env.scenario.name,
            session_id=episode.session.id if episode is not None else "",
            turns=len(episode.session.turns) if episode is not None else 0,
            done=self._done,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"agentworld-{self.env.domain.name}",
            description=(
                f"A simulated {self.env.domain.title} environment: a language world model "
                "predicts what it shows after each action."
            ),
            version=__version__,
        )

    def close(self) -> None:
        self.env.close()

    # -- inside -------------------------------------------------------------------------
    def _started(self, episode_id: str | None, text: str) -> AgentWorldObservation:
        self.episode_id = episode_id
        self._done = False
        return AgentWorldObservation(text=text, tools=self.env.openai_tools())

    def _observed(self, step: StepResult) -> AgentWorldObservation:
        self._done = step.done
        self._save()
        return AgentWorldObservation(
            text=step.observation.text,
            turn=step.turn,
            status=step.status,
            note=step.note,
            reasoning=step.reasoning,
            cost=step.cost.to_dict(),
            perturbation=step.perturbation,
            preset=step.preset,
            schedule=[decision.to_dict() for decision in step.schedule],
            done=step.done,
        )

    def _refused(self, message: str) -> AgentWorldObservation:
        shown = self.env.observation() if self.env._episode is not None else None
        return AgentWorldObservation(
            text=shown.text if shown is not None else "",
            turn=shown.turn if shown is not None else 0,
            status="refused",
            error=message,
            done=self._done,
        )

    def _timed_out(self, seconds: float) -> AgentWorldObservation:
        self._save()
        turn = self.env.turns[-1]
        return AgentWorldObservation(
            text=turn.observation,
            turn=turn.number,
            status=turn.status,
            note=f"stopped after the step's timeout of {seconds:g} s",
            reasoning=turn.reasoning,
        )

    def _save(self) -> None:
        folder = self.config.session_dir
        if folder is None:
            return
        session = self.env.session
        name = _UNSAFE_NAME.sub("-", self.episode_id or "")[:80].strip(".-")
        path = folder / f"{name or session.id}.json"
        with contextlib.suppress(EnvError):
            self.env.save(path)


def _action_of(action: AgentWorldAction) -> ActionInput:
    if action.tool is not None:
        return ToolCall(action.tool, dict(action.arguments))
    if action.action is None:
        raise ActionError("give an action, or a tool and its arguments", field="action")
    return action.action


def make_app(config: ServeConfig) -> Any:
    """The FastAPI application OpenEnv builds for the domain (serve it with uvicorn)."""
    return create_fastapi_app(
        functools.partial(OpenEnvSimulation, config),
        AgentWorldAction,
        AgentWorldObservation,
        max_concurrent_envs=max(1, config.max_sessions),
    )


class AgentWorldClient(EnvClient):  # type: ignore[misc]
    """An OpenEnv client with typed actions and observations (``GenericEnvClient`` works
    too, with dictionaries)."""

    def _step_payload(self, action: AgentWorldAction) -> dict[str, Any]:
        return dict(action.model_dump(exclude={"metadata"}, exclude_none=True))

    def _parse_result(self, payload: dict[str, Any]) -> OpenEnvStepResult:
        data = dict(payload.get("observation", {}))
        data["done"] = bool(payload.get("done", False))
        data["reward"] = payload.get("reward")
        observation = AgentWorldObservation.model_validate(data)
        return OpenEnvStepResult(observation, observation.reward, observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> AgentWorldState:
        state: AgentWorldState = AgentWorldState.model_validate(payload)
        return state
