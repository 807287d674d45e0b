"""The simulator as a Python environment: reset, step, fork, close, for one episode at a time.

An ``Environment`` is one simulated environment of a domain (a terminal, an MCP server, a
web site...) started from a scenario, optionally inside a fictional world and with a
perturbation schedule. ``reset()`` starts an episode from the scenario's state; ``step()``
takes an agent's action, runs one turn through the simulator service like every other
front-end, and gives the predicted observation with the reasoning, the turn's status and
what it cost. ``fork()`` gives an independent environment with the same history: a group
of episodes that share a prefix, which a local model continues from the model state it
kept at the fork instead of reading the history again. The ``a``-prefixed methods are the
same for asyncio code, so that many environments step at once: each pair is one plan
(``plans``), run blocking or awaited.

Environments share an engine by sharing a ``Simulator`` (``EnvironmentPool`` makes one
for N of them); an environment made from an engine spec owns its simulator and closes it
with the last of its forks. Nothing here imports Textual, and llama.cpp only comes in when
a local model is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.agents.env.actions import ActionInput, ToolCall, make_action, openai_tool
from agentworld_tui.agents.env.plans import HOME, Plan, run_async, run_blocking
from agentworld_tui.agents.env.results import Cost, EnvError, Observation, StepResult
from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy
from agentworld_tui.agents.env.scenarios import resolve_domain, resolve_scenario, resolve_world
from agentworld_tui.agents.env.session_file import SessionFile, save_sessions
from agentworld_tui.agents.env.simulators import (
    EngineInput,
    Loaded,
    SharedSimulator,
    open_simulator,
)
from agentworld_tui.agents.schedule import Decision, ScheduleError, joined_control, parse_schedule
from agentworld_tui.domains.agent_tools import agent_tools
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.simulator import Home, Saver, Simulator, SimulatorError, TurnRun, home_on
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.session import Session, Turn, new_session

if TYPE_CHECKING:
    from agentworld_tui.domains.tool_call import Tool
    from agentworld_tui.world.fictional_world import FictionalWorld

__all__ = ["Environment", "PendingStep", "Results"]


class PendingStep:
    """A step on its way: wait for it (``wait``, or ``await result()``), or ``cancel`` it."""

    def __init__(
        self,
        environment: Environment,
        run: TurnRun,
        *,
        started: float,
        preset: str,
        decisions: Sequence[Decision] = (),
    ) -> None:
        self.environment = environment
        self.run = run
        self.started = started
        self.preset = preset
        self.decisions = tuple(decisions)
        self.ended = 0.0
        self._result: StepResult | None = None
        run.on_complete.append(self._mark_end)

    def _mark_end(self, _run: object) -> None:
        self.ended = time.monotonic()

    @property
    def done(self) -> bool:
        return self.run.completed

    def cancel(self) -> None:
        """Stop the request in flight; the turn is kept, interrupted."""
        self.run.stop()

    def wait(self) -> StepResult:
        """Block until the step is recorded (the calling thread owns the environment)."""
        self.run.wait()
        return self._finish()

    async def result(self) -> StepResult:
        """Wait on the event loop; cancelling the waiting task stops the request (the turn
        is recorded, interrupted, before the cancellation goes on)."""
        try:
            await self.recorded()
        except asyncio.CancelledError:
            self.run.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.recorded())
            raise
        return self._finish()

    async def recorded(self) -> None:
        """Wait on the event loop until the turn is recorded (and saved)."""
        if self.run.completed:
            return
        done = asyncio.Event()
        self.run.on_complete.append(lambda _run: done.set())
        if self.run.home is None:  # begun without a loop: this one records it
            self.run.home = home_on(asyncio.get_running_loop())
            self.run.home(self.run.complete)
        if self.run.completed:
            return
        await done.wait()

    def _finish(self) -> StepResult:
        if self._result is None:
            self._result = self.environment._result_of(self)
        return self._result


class Recorded:
    """A plan's wait for a step left in flight (cancelled, or never waited for) to be
    recorded, so that the history is settled; cancelling the waiting task waits on."""

    def __init__(self, pending: PendingStep) -> None:
        self.pending = pending

    def block(self) -> None:
        self.pending.wait()

    async def wait(self) -> None:
        await asyncio.shield(self.pending.recorded())


class Results:
    """A plan's wait for steps begun together, their results in the same order.
    Cancelling the waiting task stops them all, and every turn is recorded, interrupted,
    before the cancellation goes on."""

    def __init__(self, pending: Sequence[PendingStep]) -> None:
        self.pending = tuple(pending)

    def block(self) -> list[StepResult]:
        return [p.wait() for p in self.pending]

    async def wait(self) -> list[StepResult]:
        try:
            return list(await asyncio.gather(*(p.result() for p in self.pending)))
        except asyncio.CancelledError:
            for p in self.pending:
                p.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(asyncio.gather(*(p.recorded() for p in self.pending)))
            raise


@dataclass
class _Episode:
    """What an environment knows of its current episode."""

    session: Session
    pending: PendingStep | None = None
    steps: int = 0
    problems: list[str] = field(default_factory=list)


class Environment:
    """One simulated environment of a domain (see the module's docstring).

    ``engine`` (a GGUF path, a server URL, an ``EngineSpec`` or an engine) makes a
    simulator of its own; ``simulator`` shares one (an ``EnvironmentPool``'s). ``scenario``
    is a name from ``prompts/<domain>/scenarios.toml``, a scenario file, or a ``Scenario``
    (default: the domain's first). ``world`` is a fictional world's name or file, or a
    ``FictionalWorld``. ``schedule`` injects perturbations by turn and tool (a schedule
    file's table or its list of rules, see ``agents.schedule``). ``seed`` fixes the sampling seed (``None``: the settings' seed). ``max_steps``
    ends the episode after that many steps. ``session_file`` saves every step there.
    """

    def __init__(
        self,
        domain: str | Domain,
        *,
        engine: EngineInput | None = None,
        simulator: Simulator | None = None,
        scenario: str | Scenario | None = None,
        world: str | FictionalWorld | None = None,
        schedule: object = None,
        seed: int | None = None,
        max_steps: int | None = None,
        params: GenerationParams | None = None,
        session_file: str | Path | None = None,
        owner: str = "",
        retry: RetryPolicy | None = None,
    ) -> None:
        if (engine is None) == (simulator is None):
            raise EnvError("give an engine (a GGUF path or a server URL) or a simulator")
        self.domain = resolve_domain(domain)
        self.scenario = resolve_scenario(self.domain, scenario)
        self.world = resolve_world(world)
        try:
            self.schedule = parse_schedule(schedule, self.domain.name)
        except ScheduleError as exc:
            raise EnvError(str(exc)) from None
        if max_steps is not None and max_steps < 1:
            raise EnvError("max_steps must be at least 1")
        self.max_steps = max_steps
        self.seed = seed
        self.params = params
        self.owner = owner or self.domain.name
        if simulator is not None:
            self._shared = SharedSimulator(simulator, owned=False)
        else:
            assert engine is not None
            self._shared = SharedSimulator(
                open_simulator(engine, params=params, retry=retry), owned=True
            )
        self.session_file = SessionFile(Path(session_file)) if session_file else None
        self._episode: _Episode | None = None
        self._closed = False

    # -- what it is ---------------------------------------------------------------------
    @property
    def simulator(self) -> Simulator:
        return self._shared.simulator

    @property
    def session(self) -> Session:
        """The current episode's session (started by ``reset``)."""
        return self._started().session

    @property
    def turns(self) -> list[Turn]:
        """The episode's turns so far, oldest first."""
        return list(self.session.turns)

    @property
    def steps(self) -> int:
        return self._episode.steps if self._episode is not None else 0

    @property
    def problems(self) -> list[str]:
        """What went wrong loading the domain's prompt (the episode runs all the same)."""
        return list(self._episode.problems) if self._episode is not None else []

    @property
    def busy(self) -> bool:
        episode = self._episode
        return episode is not None and episode.pending is not None and not episode.pending.done

    @property
    def tools(self) -> list[Tool]:
        """The tools an agent acting here is offered (``domains/agent_tools``)."""
        try:
            return agent_tools(self.domain, self.scenario)
        except ActionError as exc:
            raise EnvError(str(exc)) from None

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI chat-completions form (``tools=`` of a request)."""
        return [openai_tool(tool) for tool in self.tools]

    def observation(self) -> Observation:
        """The latest observation shown: the starting state, or the last prediction."""
        session = self.session
        shown = [t for t in session.turns if t.shown]
        if shown:
            return Observation(shown[-1].observation, shown[-1].number)
        return Observation(session.scenario.state, 0)

    # -- episodes -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, scenario: str | Scenario | None = None
    ) -> Observation:
        """Start a new episode from the scenario's state (the earlier one stays in the
        session file, when there is one)."""
        return run_blocking(self._reset_plan(seed, scenario))

    async def areset(
        self, *, seed: int | None = None, scenario: str | Scenario | None = None
    ) -> Observation:
        return await run_async(self._reset_plan(seed, scenario))

    def step(self, action: ActionInput) -> StepResult:
        """Take ``action``; raises ActionError (the app's message) when the domain refuses
        it: nothing is taken then, and the episode goes on."""
        return run_blocking(self._step_plan(action))

    async def astep(self, action: ActionInput) -> StepResult:
        return await run_async(self._step_plan(action))

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult:
        """Call one of ``tools`` (an agent's tool call)."""
        return self.step(ToolCall(name, dict(arguments or {})))

    async def acall_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult:
        return await self.astep(ToolCall(name, dict(arguments or {})))

    def _reset_plan(self, seed: int | None, scenario: str | Scenario | None) -> Plan[Observation]:
        """``reset`` and ``areset``: the step left in flight settles, the model is loaded."""
        self._check_open()
        yield from self._settle_plan()
        yield Loaded(self.simulator)
        return self._new_episode(seed, scenario)

    def _step_plan(self, action: ActionInput) -> Plan[StepResult]:
        """``step`` and ``astep``: the first step starts an episode."""
        yield from self._settle_plan()
        if self._episode is None:
            yield from self._reset_plan(None, None)
        else:
            yield Loaded(self.simulator)
        home: Home | None = yield HOME
        results: list[StepResult] = yield Results([self.begin(action, home=home)])
        return results[0]

    def _settle_plan(self) -> Plan[None]:
        """Wait for a step that was cancelled or left unwaited, so the history is settled."""
        episode = self._episode
        if episode is not None and episode.pending is not None and not episode.pending.done:
            yield Recorded(episode.pending)

    def action(self, value: ActionInput) -> Action:
        """``value`` as a validated action of this domain; raises ActionError."""
        return make_action(self.domain, self.session.scenario, value)

    def begin(self, action: ActionInput, *, home: Home | None = None) -> PendingStep:
        """Start a step and return at once (a pool starts many, then waits for each);
        raises ActionError for a refused action and EnvError when none can start."""
        self._check_open()
        episode = self._started()
        if episode.pending is not None and not episode.pending.done:
            raise EnvError("a step is still running: wait for it or cancel it first")
        if self.max_steps is not None and episode.steps >= self.max_steps:
            raise EnvError(f"the episode ended after {self.max_steps} steps: reset it")
        made = make_action(self.domain, episode.session.scenario, action)
        session = episode.session
        decisions = self._decide(session, made)
        own = session.control
        scheduled = joined_control(own, decisions)
        if scheduled is not None:
            session.control = scheduled
        preset = session.control.preset if session.control is not None else ""
        params = self._params()
        started = time.monotonic()
        saver = self._saver(len(session.turns) + 1, decisions)
        try:
            run = self.simulator.send(
                session, made, params=params, owner=self.owner, save=saver, home=home
            )
        except SimulatorError as exc:
            session.control = own
            raise EnvError(str(exc)) from None
        if scheduled is not None:  # the schedule's instruction goes with this turn only
            session.control = own if own is not None and own.persistent else None
        episode.steps += 1
        episode.pending = PendingStep(
            self, run, started=started, preset=preset, decisions=decisions
        )
        return episode.pending

    def cancel(self) -> bool:
        """Stop the step in flight (it is kept, interrupted); False when none runs."""
        episode = self._episode
        if episode is None or episode.pending is None or episode.pending.done:
            return False
        episode.pending.cancel()
        return True

    def perturb(
        self, instruction: str | None = None, *, preset: str | None = None, persistent: bool = False
    ) -> None:
        """Send a control instruction with the next step (every step with ``persistent``):
        free text, or a preset of the domain by name."""
        try:
            rule = parse_schedule(
                [{"instruction": instruction or ""} if preset is None else {"preset": preset}],
                self.domain.name,
            ).rules[0]
        except ScheduleError as exc:
            raise EnvError(str(exc).removeprefix("rule 1: ")) from None
        self.session.set_control(rule.instruction, persistent=persistent, preset=rule.preset)

    def fork(
        self, *, seed: int | None = None, session_file: str | Path | None = None
    ) -> Environment:
        """An independent environment with this one's history, on the same simulator: its
        steps from here on change only itself."""
        self._check_open()
        episode = self._started()
        if episode.pending is not None and not episode.pending.done:
            raise EnvError("a step is still running: a fork copies a settled history")
        twin = copy.copy(self)
        twin._shared = self._shared.join()
        twin.seed = self.seed if seed is None else seed
        twin.session_file = SessionFile(Path(session_file)) if session_file else self.session_file
        data = copy.deepcopy(episode.session.to_dict())
        data["id"] = uuid.uuid4().hex[:12]
        session = Session.from_dict(data, self.domain)
        twin._episode = _Episode(session, None, episode.steps, list(episode.problems))
        twin._closed = False
        return twin

    def close(self) -> None:
        """Stop a step in flight and let go of the simulator (closed with its last user)."""
        if self._closed:
            return
        self.cancel()
        self._closed = True
        self._shared.leave()

    async def aclose(self) -> None:
        """``close`` once the step it stops is recorded."""
        self.cancel()
        await run_async(self._settle_plan())
        self.close()

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # -- sessions ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Save the episode as a session file (``agentworld --session FILE`` opens it)."""
        return save_sessions(Path(path), [self])

    def export(self, format: str = "json", *, reasoning: bool = False) -> str:
        """The episode as ``agentworld export`` writes it: "json", "markdown" or
        "agentworldbench"."""
        from agentworld_tui.world.export import (
            agentworldbench_jsonl,
            json_transcript,
            markdown_transcript,
        )

        sessions = [self.session]
        if format == "json":
            return json_transcript(sessions, reasoning=reasoning)
        if format == "markdown":
            return markdown_transcript(sessions, reasoning=reasoning)
        if format == "agentworldbench":
            return agentworldbench_jsonl(sessions)
        raise EnvError(
            f"unknown export format {format!r}; choose json, markdown or agentworldbench"
        )

    # -- inside -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EnvError("the environment is closed")

    def _started(self) -> _Episode:
        if self._episode is None:
            raise EnvError("no episode yet: call reset() first")
        return self._episode

    def _new_episode(self, seed: int | None, scenario: str | Scenario | None) -> Observation:
        if seed is not None:
            self.seed = seed
        if scenario is not None:
            self.scenario = resolve_scenario(self.domain, scenario)
        session, problems = new_session(self.domain, self.scenario)
        session.world = self.world
        self._episode = _Episode(session, problems=list(problems))
        return Observation(self.scenario.state, 0)

    def _params(self) -> GenerationParams:
        params = self.params or self.simulator.params
        if self.seed is not None:
            params = replace(params, seed=self.seed)
        return params

    def _decide(self, session: Session, action: Action) -> list[Decision]:
        """The schedule's rules for the coming turn: the episode's call ``turns + 1``, and
        the how-manieth call of the action's tool (actions that are no tool call have
        none)."""
        if not self.schedule:
            return []
        tool = _tool_of(action)
        tool_call = 1 + sum(1 for t in session.turns if tool and _tool_of(t.action) == tool)
        return self.schedule.decide(tool, len(session.turns) + 1, tool_call)

    def _saver(self, number: int, decisions: list[Decision]) -> Saver | None:
        """What runs on the session's thread once turn ``number`` is recorded: the
        schedule's decisions go into its stats (so the session file and its exports say
        which faults were drawn), then the session file is written."""
        target = self.session_file
        if target is None and not decisions:
            return None
        drawn = [decision.to_dict() for decision in decisions]

        def save(session: Session) -> str | None:
            if drawn:
                for turn in reversed(session.turns):
                    if turn.number == number:
                        turn.stats = {**turn.stats, "schedule": drawn}
                        break
            return target.save([session]) if target is not None else None

        return save

    def _result_of(self, pending: PendingStep) -> StepResult:
        turn = pending.run.turn
        ended = pending.ended or time.monotonic()
        engine = self.simulator.engine
        retries = engine.retries(pending.run.control) if isinstance(engine, RetryingEngine) else 0
        episode = self._episode
        done = (
            self.max_steps is not None
            and episode is not None
            and episode.session is pending.run.session
            and episode.steps >= self.max_steps
        )
        return StepResult(
            observation=Observation(turn.observation, turn.number),
            reasoning=turn.reasoning,
            status=turn.status,
            note=turn.note,
            cost=Cost.of(turn.stats, ended - pending.started, retries),
            action=turn.action,
            perturbation=turn.control,
            preset=pending.preset,
            schedule=pending.decisions,
            done=done,
            extraction=turn.extraction,
        )


def _tool_of(action: Action) -> str:
    """The tool an action calls: an agent tool's or a web page action's name ("" for a
    command, or any other kind of action)."""
    payload = action.payload
    name = payload.get("name") if isinstance(payload, dict) else None
    return name if isinstance(name, str) else ""
