"""Many environments over one engine: a batch of episodes stepped together.

A pool holds N environments sharing one ``Simulator``. With a server, the steps of a batch
are all started before any is waited for, so up to the simulator's ``concurrency`` requests
are in flight at once and the server does the batching (vLLM, SGLang, llama.cpp's server
with parallel slots); transient failures are asked again with backoff (``retry``). With a
local model the steps queue in the order they were started, on the one engine thread, and a
local model keeps each conversation's state, so a batch of forks reads only what is new.
Cancelling a batch (``cancel``, or cancelling the task awaiting ``astep``) stops the requests
in flight; their turns are kept, interrupted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.agents.env.actions import ActionInput
from agentworld_tui.agents.env.environment import Environment
from agentworld_tui.agents.env.plans import HOME, Plan, run_async, run_blocking
from agentworld_tui.agents.env.results import EnvError, Observation, StepResult
from agentworld_tui.agents.env.retry import RetryPolicy
from agentworld_tui.agents.env.routing import EpisodeRouting, RoutesInput, TracesInput
from agentworld_tui.agents.env.simulators import EngineInput, Loaded, open_simulator
from agentworld_tui.agents.env.steps import PendingStep, Results
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.simulator import Home, Simulator
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Domain, Scenario

if TYPE_CHECKING:
    from agentworld_tui.reality.figures import EpisodeFigures
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.world.fictional_world import FictionalWorld

StepOutcome = StepResult | ActionError | EnvError | None
"""A step's result; the refusal of an action (the episode goes on); None: not stepped."""


class EnvironmentPool:
    """``size`` environments of one domain over one simulator (see the module's docstring).

    Environment ``i`` samples with ``seed + i`` when a seed is given. ``concurrency`` bounds
    the requests in flight on a server (default: one per environment). ``session_dir``
    saves environment ``i`` into ``env-<i>.json`` there after every step. ``twin``,
    ``deliver`` and ``check`` are ``Environment``'s: each environment's episodes run beside
    twins of their own. ``routes``, ``traces`` and ``grounding_budget`` are too: the
    environments share the rules and the trace store (opened once, from a path).
    """

    def __init__(
        self,
        domain: str | Domain,
        size: int,
        *,
        engine: EngineInput | None = None,
        simulator: Simulator | None = None,
        scenario: str | Scenario | None = None,
        world: str | FictionalWorld | None = None,
        schedule: object = None,
        seed: int | None = None,
        max_steps: int | None = None,
        params: GenerationParams | None = None,
        concurrency: int | None = None,
        retry: RetryPolicy | None = None,
        session_dir: str | Path | None = None,
        twin: TwinSpec | None = None,
        deliver: Deliver | None = None,
        check: str | None = None,
        routes: RoutesInput | None = None,
        traces: TracesInput | None = None,
        grounding_budget: int | None = None,
    ) -> None:
        if size < 1:
            raise EnvError("a pool holds at least one environment")
        if (engine is None) == (simulator is None):
            raise EnvError("give an engine (a GGUF path or a server URL) or a simulator")
        self._owned = simulator is None
        if simulator is None:
            assert engine is not None
            simulator = open_simulator(
                engine, params=params, concurrency=concurrency or size, retry=retry
            )
        self.simulator = simulator
        folder = Path(session_dir) if session_dir else None
        routing: EpisodeRouting | None = None
        try:
            routing = EpisodeRouting.of(routes, traces, grounding_budget, twinned=twin is not None)
            self.environments = [
                Environment(
                    domain,
                    simulator=simulator,
                    scenario=scenario,
                    world=world,
                    schedule=schedule,
                    seed=None if seed is None else seed + i,
                    max_steps=max_steps,
                    params=params,
                    session_file=folder / f"env-{i:04d}.json" if folder else None,
                    owner=f"env {i}",
                    twin=twin,
                    deliver=deliver,
                    check=check,
                )
                for i in range(size)
            ]
        except EnvError:
            if routing is not None:
                routing.leave()
            if self._owned:
                simulator.close()
            raise
        if routing is not None:  # the one routing of them all, the store opened once
            for env in self.environments:
                env.routing = routing.join()
            routing.leave()

    def __len__(self) -> int:
        return len(self.environments)

    def __getitem__(self, index: int) -> Environment:
        return self.environments[index]

    def __iter__(self) -> Iterator[Environment]:
        return iter(self.environments)

    # -- batches --------------------------------------------------------------------------
    def reset(self) -> list[Observation]:
        return run_blocking(self._reset_plan())

    async def areset(self) -> list[Observation]:
        return await run_async(self._reset_plan())

    def step(self, actions: Sequence[ActionInput | None]) -> list[StepOutcome]:
        """Step environment ``i`` with ``actions[i]`` (None: leave it be), all at once."""
        return run_blocking(self._step_plan(actions))

    async def astep(self, actions: Sequence[ActionInput | None]) -> list[StepOutcome]:
        return await run_async(self._step_plan(actions))

    def end_episodes(
        self, claimed_done: Sequence[bool | None] | None = None
    ) -> list[EpisodeFigures | None]:
        """End every environment's episode (``Environment.end_episode``): with twins,
        the checks run and the figures come back in order."""
        return run_blocking(self._end_plan(claimed_done))

    async def aend_episodes(
        self, claimed_done: Sequence[bool | None] | None = None
    ) -> list[EpisodeFigures | None]:
        return await run_async(self._end_plan(claimed_done))

    def cancel(self) -> int:
        """Stop every step in flight; returns how many were."""
        return sum(env.cancel() for env in self.environments)

    def close(self) -> None:
        for env in self.environments:
            env.close()
        if self._owned:
            self.simulator.close()

    async def aclose(self) -> None:
        """``close`` once the steps it stops are recorded."""
        for env in self.environments:
            await env.aclose()
        self.close()

    def __enter__(self) -> EnvironmentPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- one implementation for the blocking and the asyncio methods (``plans``) ----------
    def _reset_plan(self) -> Plan[list[Observation]]:
        yield Loaded(self.simulator)
        first: list[Observation] = []
        for env in self.environments:
            first.append((yield from env._reset_plan(None, None)))
        return first

    def _step_plan(self, actions: Sequence[ActionInput | None]) -> Plan[list[StepOutcome]]:
        """Every step is begun before any is waited for; the model is loaded first, so a
        model that cannot load is one EnvError, not a refusal per environment."""
        if len(actions) != len(self.environments):
            raise EnvError(f"{len(actions)} actions for {len(self.environments)} environments")
        yield Loaded(self.simulator)
        home: Home | None = yield HOME
        started: list[PendingStep | StepOutcome] = []
        for env, action in zip(self.environments, actions, strict=True):
            if action is None:
                started.append(None)
                continue
            try:
                if env._episode is None:
                    yield from env._reset_plan(None, None)
                started.append((yield from env._begin_plan(action, home)))
            except (ActionError, EnvError) as exc:
                started.append(exc)
        pending = [p for p in started if isinstance(p, PendingStep)]
        results: list[StepResult] = yield Results(pending)
        done = iter(results)
        out: list[StepOutcome] = []
        for p in started:
            if isinstance(p, PendingStep):
                out.append((yield from p.environment._after_step_plan(next(done), p)))
            else:
                out.append(p)
        return out

    def _end_plan(
        self, claimed_done: Sequence[bool | None] | None
    ) -> Plan[list[EpisodeFigures | None]]:
        claims = list(claimed_done) if claimed_done is not None else [None] * len(self)
        if len(claims) != len(self.environments):
            raise EnvError(f"{len(claims)} claims for {len(self.environments)} environments")
        figures: list[EpisodeFigures | None] = []
        for env, claim in zip(self.environments, claims, strict=True):
            figures.append((yield from env._end_episode_plan(claim)))
        return figures
