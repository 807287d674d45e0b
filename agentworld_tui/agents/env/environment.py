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

An environment given a ``twin`` (a ``TwinSpec``) runs every episode beside a real twin
started fresh at reset (``twins``): each step goes to the world model and to the twin at
once, the agent receives the side ``deliver`` names (reality's by default), and the step
says which, with the divergence. ``end_episode`` (or the step limit, the next reset,
close) runs the check in the twin and records the episode's figures in the session.
With ``routes`` (rules, ``routing``), each step goes to the twin, the world model or both,
as the rules say; with ``traces`` (a trace store), the world model is shown similar
earlier real answers first. Each step says where it was answered and why.

Environments share an engine by sharing a ``Simulator`` (``EnvironmentPool`` makes one
for N of them); an environment made from an engine spec owns its simulator and closes it
with the last of its forks. Nothing here imports Textual, and llama.cpp only comes in when
a local model is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.agents.env.actions import ActionInput, ToolCall, make_action, openai_tool
from agentworld_tui.agents.env.plans import HOME, Plan, run_async, run_blocking
from agentworld_tui.agents.env.results import Cost, EnvError, Observation, StepResult, TwinStep
from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy
from agentworld_tui.agents.env.routing import (
    EpisodeRouting,
    Grounded,
    Kept,
    RoutesInput,
    TracesInput,
)
from agentworld_tui.agents.env.scenarios import resolve_domain, resolve_scenario, resolve_world
from agentworld_tui.agents.env.session_file import SessionFile, save_sessions
from agentworld_tui.agents.env.simulators import (
    EngineInput,
    Loaded,
    SharedSimulator,
    open_simulator,
)
from agentworld_tui.agents.env.steps import (
    PendingStep,
    Recorded,
    Results,
    RoutedStep,
    grounding_figures,
    real_of,
)
from agentworld_tui.agents.env.twins import (
    CLOSE_WAIT,
    EpisodeEnded,
    EpisodeTwin,
    TwinClosed,
    TwinSlots,
    TwinStarted,
    check_command,
    scenario_check,
)
from agentworld_tui.agents.schedule import Decision, ScheduleError, joined_control, parse_schedule
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.reality.routing import Route
from agentworld_tui.reality.traces import call_of
from agentworld_tui.simulator import Home, Saver, Simulator, SimulatorError
from agentworld_tui.simulator.routing import RoutedSession
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.session import Session, Turn, new_session

if TYPE_CHECKING:
    from agentworld_tui.reality.figures import EpisodeFigures
    from agentworld_tui.reality.grounding import Grounding
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.world.fictional_world import FictionalWorld
    from agentworld_tui.world.tool import Tool

__all__ = ["Environment"]


@dataclass
class _Episode:
    """What an environment knows of its current episode."""

    session: Session
    pending: PendingStep | None = None
    steps: int = 0
    problems: list[str] = field(default_factory=list)
    twin: EpisodeTwin | None = None
    ended: bool = False
    """``end_episode`` ran (or the step limit ended a twinned episode): steps are refused."""
    routed: RoutedSession | None = None
    """Where each step goes (rules, the twin, grounding), when the environment routes."""


class Environment:
    """One simulated environment of a domain (see the module's docstring).

    ``engine`` (a GGUF path, a server URL, an ``EngineSpec`` or an engine) makes a
    simulator of its own; ``simulator`` shares one (an ``EnvironmentPool``'s). ``scenario``
    is a name from ``prompts/<domain>/scenarios.toml``, a scenario file, or a ``Scenario``
    (default: the domain's first). ``world`` is a fictional world's name or file, or a
    ``FictionalWorld``. ``schedule`` injects perturbations by turn and tool (a schedule
    file's table or its list of rules, see ``agents.schedule``). ``seed`` fixes the sampling seed (``None``: the settings' seed). ``max_steps``
    ends the episode after that many steps. ``session_file`` saves every step there.

    ``twin`` runs each episode beside a fresh real twin (a ``TwinSpec`` of this domain);
    ``deliver`` is the side the agent receives ("real", the default, or "sim"); ``check``
    is the command run in the twin at the episode's end (default: the scenario's own
    ``check``, if it has one). ``twin_slots`` bounds the twins of many environments.

    ``routes`` (with a twin: a rule file's path, ``"default"`` for the shipped rules, or
    a ``RuleSet``) sends each step real, sim or shadow by the rules (without it, a twin
    shadows every step). ``traces`` (a ``TraceStore`` or a path, made if missing) grounds
    the world model in similar earlier real answers, within ``grounding_budget`` tokens,
    and keeps the twin's answers. See ``routing``.
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
        twin: TwinSpec | None = None,
        deliver: Deliver | None = None,
        check: str | None = None,
        twin_slots: TwinSlots | None = None,
        routes: RoutesInput | None = None,
        traces: TracesInput | None = None,
        grounding_budget: int | None = None,
    ) -> None:
        if (engine is None) == (simulator is None):
            raise EnvError("give an engine (a GGUF path or a server URL) or a simulator")
        self.domain = resolve_domain(domain)
        self.scenario = resolve_scenario(self.domain, scenario)
        self.twin = twin
        self.deliver: Deliver = deliver or "real"
        self.check = self._twin_settings(twin, deliver, check)
        """The check given here ("": the scenario's own, where it has one)."""
        self.twin_slots = twin_slots
        self.world = resolve_world(world)
        try:
            self.schedule = parse_schedule(schedule, self.domain.name)
        except ScheduleError as exc:
            raise EnvError(str(exc)) from None
        if max_steps is not None and max_steps < 1:
            raise EnvError("max_steps must be at least 1")
        self.max_steps = max_steps
        self.routing = EpisodeRouting.of(routes, traces, grounding_budget, twinned=twin is not None)
        """The rules and the trace store (None: every step as the twin, or its absence,
        says: shadowed or simulated, ungrounded)."""
        self.seed = seed
        self.params = params
        self.owner = owner or self.domain.name
        try:
            if simulator is not None:
                self._shared = SharedSimulator(simulator, owned=False)
            else:
                assert engine is not None
                self._shared = SharedSimulator(
                    open_simulator(engine, params=params, retry=retry), owned=True
                )
        except BaseException:
            if self.routing is not None:
                self.routing.leave()
            raise
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
        """The tools an agent acting here is offered (``Domain.tools``)."""
        try:
            return self.domain.tools(self.scenario)
        except ActionError as exc:
            raise EnvError(str(exc)) from None

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI chat-completions form (``tools=`` of a request)."""
        return [openai_tool(tool) for tool in self.tools]

    @property
    def twin_figures(self) -> EpisodeFigures | None:
        """The figures of the episode, once it ended beside a twin (None before)."""
        episode = self._episode
        if episode is None or episode.twin is None:
            return None
        return episode.twin.figures

    def observation(self) -> Observation:
        """The latest observation the agent received: the starting state, or the last
        turn's (the prediction, or with a twin the side delivered)."""
        session = self.session
        shown = [t for t in session.turns if t.shown]
        if shown:
            return Observation(shown[-1].shown_text, shown[-1].number)
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

    def end_episode(self, *, claimed_done: bool | None = None) -> EpisodeFigures | None:
        """End the episode: with a twin, its check runs there and the episode's figures
        (``claimed_done``: whether the agent said it had finished) are recorded in the
        session (and its file), returned, and the twin is closed. Steps are refused after
        it; ``reset`` starts the next episode. None without a twin."""
        return run_blocking(self._end_episode_plan(claimed_done))

    async def aend_episode(self, *, claimed_done: bool | None = None) -> EpisodeFigures | None:
        return await run_async(self._end_episode_plan(claimed_done))

    def _reset_plan(self, seed: int | None, scenario: str | Scenario | None) -> Plan[Observation]:
        """``reset`` and ``areset``: the step left in flight settles, the episode before
        ends beside its twin, the model is loaded, a fresh twin starts."""
        self._check_open()
        yield from self._settle_plan()
        yield from self._finish_plan()
        yield Loaded(self.simulator)
        if scenario is not None:
            self.scenario = resolve_scenario(self.domain, scenario)
        twin: EpisodeTwin | None = None
        if self.twin is not None:
            self._episode = None  # a twin that cannot start leaves no episode to step
            check = self.check or scenario_check(self.scenario, self.domain.name)
            twin = yield TwinStarted(self.twin, self.deliver, check, self.twin_slots)
        try:
            return self._new_episode(seed, twin)
        except BaseException:
            if twin is not None:
                twin.close()
            raise

    def _step_plan(self, action: ActionInput) -> Plan[StepResult]:
        """``step`` and ``astep``: the first step starts an episode."""
        yield from self._settle_plan()
        if self._episode is None:
            yield from self._reset_plan(None, None)
        else:
            yield Loaded(self.simulator)
        home: Home | None = yield HOME
        pending = yield from self._begin_plan(action, home)
        results: list[StepResult] = yield Results([pending])
        return (yield from self._after_step_plan(results[0], pending))

    def _begin_plan(self, action: ActionInput, home: Home | None) -> Plan[PendingStep]:
        """``begin``, with the trace store read as a wait of the plan (off the loop)."""
        episode = self._started()
        routed = episode.routed
        if routed is None or routed.reality.grounder is None:
            return self.begin(action, home=home)
        made = make_action(self.domain, episode.session.scenario, action)
        grounding: Grounding = yield Grounded(routed.reality.grounder, made)
        return self._begin(made, home, grounding)

    def _after_step_plan(self, result: StepResult, pending: PendingStep) -> Plan[StepResult]:
        """Reality's answers go into the trace store before the next step (which is
        grounded in them). A twinned episode that reached its step limit ends with its
        last step: the check runs and the step carries the figures."""
        if pending.keeping is not None:
            yield Kept(pending.keeping)
        episode = self._episode
        if not result.done or episode is None or episode.twin is None or episode.ended:
            return result
        figures = yield from self._end_episode_plan(None)
        return replace(result, episode=figures)

    def _end_episode_plan(self, claimed_done: bool | None) -> Plan[EpisodeFigures | None]:
        self._check_open()
        yield from self._settle_plan()
        episode = self._started()
        episode.ended = True
        figures = yield from self._finish_plan(claimed_done)
        return figures

    def _finish_plan(self, claimed_done: bool | None = None) -> Plan[EpisodeFigures | None]:
        """End the episode beside its twin (once: the check and the figures), then close
        the twin; nothing without one."""
        episode = self._episode
        if episode is None or episode.twin is None:
            return None
        twin = episode.twin
        try:
            if not twin.ended:
                yield EpisodeEnded(twin, episode.session, claimed_done, self._episode_saver())
        except BaseException:  # cancelled, say: the twin is closed all the same
            twin.close()
            raise
        yield TwinClosed(twin)
        return twin.figures

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
        raises ActionError for a refused action and EnvError when none can start. With
        a trace store, its examples are looked up here, on the calling thread."""
        return self._begin(action, home, None)

    def _begin(
        self, action: ActionInput, home: Home | None, grounding: Grounding | None
    ) -> PendingStep:
        """``begin``; ``grounding`` is the step's examples when they were looked up
        already (None: looked up here where the environment grounds)."""
        self._check_open()
        episode = self._started()
        if episode.pending is not None and not episode.pending.done:
            raise EnvError("a step is still running: wait for it or cancel it first")
        if episode.ended:
            raise EnvError("the episode has ended: reset it to start another")
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
        routed = episode.routed
        step = RoutedStep(routed) if routed is not None else None
        saver = self._saver(len(session.turns) + 1, decisions, step)
        try:
            if step is None:
                shadow = episode.twin.shadow if episode.twin is not None else None
                run = self.simulator.send(
                    session, made, params=params, owner=self.owner, save=saver, home=home,
                    shadow=shadow,
                )  # fmt: skip
            else:
                step.decision = step.routed.decide(call_of(self.domain.name, made.payload)[0])
                if step.routed.route(step.decision) is Route.REAL:
                    grounding = None
                elif grounding is None:
                    grounding = step.routed.grounding(made, step.decision)
                run = step.routed.send(
                    self.simulator, made, step.decision, grounding, params=params,
                    owner=self.owner, save=saver, home=home,
                )  # fmt: skip
                step.run = run
        except SimulatorError as exc:
            session.control = own
            raise EnvError(str(exc)) from None
        if scheduled is not None:  # the schedule's instruction goes with this turn only
            session.control = own if own is not None and own.persistent else None
        episode.steps += 1
        episode.pending = PendingStep(
            self, run, started=started, preset=preset, decisions=decisions
        )
        episode.pending.routed = routed
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
        if episode.twin is not None:
            raise EnvError(
                "a twinned episode cannot be forked: reality cannot be copied (reset "
                "environments of their own, each with a fresh twin)"
            )
        twin = copy.copy(self)
        twin._shared = self._shared.join()
        twin.routing = self.routing.join() if self.routing is not None else None
        twin.seed = self.seed if seed is None else seed
        twin.session_file = SessionFile(Path(session_file)) if session_file else self.session_file
        data = copy.deepcopy(episode.session.to_dict())
        data["id"] = uuid.uuid4().hex[:12]
        session = Session.from_dict(data, self.domain)
        twin._episode = _Episode(session, None, episode.steps, list(episode.problems))
        if twin.routing is not None:
            twin._episode.routed = twin.routing.open(session, session.scenario, None)
        twin._closed = False
        return twin

    def close(self) -> None:
        """Stop a step in flight, end the episode beside its twin (the check runs there)
        and close the twin, and let go of the simulator (closed with its last user)."""
        if self._closed:
            return
        self.cancel()
        try:
            self._end_on_close()
        finally:
            self._closed = True
            self._shared.leave()
            self._leave_routing()

    async def aclose(self) -> None:
        """``close`` once the step it stops is recorded (and the twin's check ran)."""
        if self._closed:
            return
        self.cancel()
        await run_async(self._settle_plan())
        await run_async(self._finish_plan())
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

    def _new_episode(self, seed: int | None, twin: EpisodeTwin | None) -> Observation:
        if seed is not None:
            self.seed = seed
        scenario = self.scenario
        if twin is not None and twin.first_state:  # both sides start from reality's state
            scenario = replace(scenario, state=twin.first_state)
        session, problems = new_session(self.domain, scenario)
        session.world = self.world
        if twin is not None:
            session.twin = twin.shadow.describe()
            if self.routing is not None and self.routing.rules is not None:
                session.twin["routes"] = self.routing.source
        self._episode = _Episode(session, problems=list(problems), twin=twin)
        if self.routing is not None:
            self._episode.routed = self.routing.open(session, scenario, twin)
        return Observation(scenario.state, 0)

    def _leave_routing(self) -> None:
        """Let go of the rules and the store, once the last step's answers are kept."""
        routing, self.routing = self.routing, None
        if routing is None:
            return
        episode = self._episode
        keeping = episode.pending.keeping if episode and episode.pending else None
        if keeping is not None:
            with contextlib.suppress(Exception):
                keeping.result(timeout=CLOSE_WAIT)
        routing.leave()

    def _twin_settings(
        self, twin: TwinSpec | None, deliver: Deliver | None, check: str | None
    ) -> str:
        """The twin's arguments checked; returns the check given ("" for none)."""
        if twin is None:
            if deliver is not None or check is not None:
                raise EnvError("deliver and check go with a twin: give twin=TwinSpec(...)")
            return ""
        if twin.domain != self.domain.name:
            raise EnvError(
                f"the twin is a {twin.domain} twin; this environment simulates {self.domain.name}"
            )
        problem = twin.problem()
        if problem:
            raise EnvError(problem)
        if deliver not in (None, "real", "sim"):
            raise EnvError(f"deliver is 'real' or 'sim', not {deliver!r}")
        return "" if check is None else check_command(check, self.domain.name)

    def _episode_saver(self) -> Saver | None:
        target = self.session_file
        if target is None:
            return None
        return lambda session: target.save([session])

    def _end_on_close(self) -> None:
        """``close``'s end of a twinned episode: the check runs when the history is
        settled; a step still in flight on an event loop that cannot be waited for here
        leaves the figures recorded without it."""
        episode = self._episode
        if episode is None or episode.twin is None:
            return
        twin = episode.twin
        try:
            if not twin.ended:
                if self._settled_for_close(episode):
                    twin.end(episode.session, None, self._episode_saver())
                else:
                    twin.end_unchecked(episode.session, self._episode_saver())
        finally:
            twin.close()

    def _settled_for_close(self, episode: _Episode) -> bool:
        pending = episode.pending
        if pending is None or pending.done:
            return True
        if pending.run.home is None:  # begun by blocking code: this thread records it
            pending.wait()
            return True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return False  # the loop that records the step is this thread's own
        recorded = threading.Event()
        pending.run.on_complete.append(lambda _run: recorded.set())
        if not pending.done:
            recorded.wait(CLOSE_WAIT)
        return pending.done

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

    def _saver(
        self, number: int, decisions: list[Decision], routed: RoutedStep | None = None
    ) -> Saver | None:
        """What runs on the session's thread once turn ``number`` is recorded: a routed
        step is settled (a real answer that failed, as its rule says), the schedule's
        decisions go into its stats (so the session file and its exports say which faults
        were drawn), then the session file is written."""
        target = self.session_file
        if target is None and not decisions and routed is None:
            return None
        drawn = [decision.to_dict() for decision in decisions]

        def save(session: Session) -> str | None:
            if routed is not None:
                routed.settle()
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
            observation=Observation(turn.shown_text, turn.number),
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
            twin=TwinStep.of(turn, self.deliver, real=real_of(pending.run)),
            route=dict(turn.route) if isinstance(turn.route, dict) else None,
            grounding=grounding_figures(turn.grounding),
        )


def _tool_of(action: Action) -> str:
    """The tool an action calls: an agent tool's or a web page action's name ("" for a
    command, or any other kind of action)."""
    payload = action.payload
    name = payload.get("name") if isinstance(payload, dict) else None
    return name if isinstance(name, str) else ""
