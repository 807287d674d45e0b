"""The simulator as a Python environment: reset, step, fork, close, for one episode at a time.

An ``Environment`` is one simulated environment of a domain (a terminal, an MCP server, a
web site...) started from a scenario, optionally inside a fictional world and with a
perturbation schedule. ``reset()`` starts an episode from the scenario's state; ``step()``
takes an agent's action, runs one turn through the simulator service like every other
front-end, and gives the predicted observation with the reasoning, the turn's status and
what it cost. ``fork()`` gives an independent environment with the same history: a group
of episodes that share a prefix, which a local model continues from the model state it
kept at the fork instead of reading the history again. The ``a``-prefixed twins are the
same for asyncio code, so that many environments step at once.

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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.agents.env.actions import ActionInput, ToolCall, make_action
from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy
from agentworld_tui.agents.schedule import Decision, ScheduleError, joined_control, parse_schedule
from agentworld_tui.engines.base import Engine, EngineError, GenerationParams
from agentworld_tui.engines.factory import EngineSpec, make_engine
from agentworld_tui.simulator import Home, Saver, Simulator, SimulatorError, TurnRun, home_on
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.session import Session, Turn, TurnStatus, new_session

if TYPE_CHECKING:
    from agentworld_tui.domains.tool_call import Tool
    from agentworld_tui.world.fictional_world import FictionalWorld
    from agentworld_tui.world.workspace import Workspace

__all__ = [
    "Cost",
    "EnvError",
    "Environment",
    "Observation",
    "PendingStep",
    "StepResult",
    "engine_spec",
    "open_simulator",
]

EngineInput = EngineSpec | str | Engine
"""A GGUF path, a server URL (``http://host:8000/v1``), an ``EngineSpec``, or an engine."""


class EnvError(Exception):
    """An environment that cannot be made or stepped now; the message is one line."""


# -- what a step gives ------------------------------------------------------------------------
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


# -- engines and simulators -------------------------------------------------------------------
def engine_spec(
    engine: EngineSpec | str, *, model: str = "", api_key_env: str = "", n_ctx: int = 0
) -> EngineSpec:
    """The spec a path or URL stands for (``http(s)://`` is a server)."""
    if isinstance(engine, EngineSpec):
        return engine
    text = engine.strip()
    if text.startswith(("http://", "https://")):
        return EngineSpec(server=text, model=model, api_key_env=api_key_env, n_ctx=n_ctx)
    return EngineSpec(model_path=text, n_ctx=n_ctx)


def open_simulator(
    engine: EngineInput,
    *,
    params: GenerationParams | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
) -> Simulator:
    """A simulator over ``engine`` (not loaded yet: the first step loads it). A server's
    engine is wrapped so that its transient failures are asked again (``retry``)."""
    if isinstance(engine, EngineSpec | str):
        try:
            made: Engine = make_engine(engine_spec(engine))
        except EngineError as exc:
            raise EnvError(str(exc)) from None
    else:
        made = engine
    if made.info.remote and not isinstance(made, RetryingEngine):
        made = RetryingEngine(made, retry)
    return Simulator(made, params, concurrency=concurrency)


_LOADING = threading.Lock()


def simulator_ready(simulator: Simulator) -> bool:
    """Whether the simulator's engine is loaded and usable (no load needed)."""
    engine = simulator.engine
    return engine is not None and engine.loaded and not simulator.engine_error


async def aload_simulator(simulator: Simulator) -> None:
    """``load_simulator`` for asyncio code: a load runs on a thread of its own."""
    if not simulator_ready(simulator):
        await asyncio.to_thread(load_simulator, simulator)


def load_simulator(simulator: Simulator) -> None:
    """Load the simulator's engine unless it is loaded; raises EnvError with the reason."""
    with _LOADING:
        if simulator_ready(simulator):
            return
        if simulator.engine is None:
            raise EnvError(simulator.problem() or "no model is configured")
        error = simulator.load_and_wait()
    if error:
        raise EnvError(error)


class _SharedSimulator:
    """A simulator and the environments that use it: the last owner to close closes it."""

    def __init__(self, simulator: Simulator, *, owned: bool) -> None:
        self.simulator = simulator
        self.owned = owned
        self.users = 1
        self._lock = threading.Lock()

    def join(self) -> _SharedSimulator:
        with self._lock:
            self.users += 1
        return self

    def leave(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users == 0
        if last and self.owned:
            self.simulator.close()


# -- session files ------------------------------------------------------------------------------
class SessionFile:
    """A session file an environment saves its sessions into, a tab each; the file's other
    tabs are kept as they are."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._workspace: Workspace | None = None
        self._lock = threading.Lock()

    def save(self, sessions: Sequence[Session]) -> str | None:
        """Write ``sessions`` (as tabs: replaced where the file has them by id); returns
        why it could not, or None."""
        from agentworld_tui.world.workspace import WorkspaceError, open_or_new

        with self._lock:
            try:
                if self._workspace is None:
                    self._workspace = open_or_new(self.path, hold=False)
                workspace = self._workspace
                for session in sessions:
                    if workspace.index_of(session) is not None:
                        continue
                    same = next((s for s in workspace.tabs if s.id == session.id), None)
                    if same is not None:
                        workspace.replace_tab(same, session)
                    else:
                        workspace.add_tab(session)
                workspace.active_tab = max(0, len(workspace.tabs) - 1)
                workspace.save()
            except WorkspaceError as exc:
                return str(exc)
            finally:
                if self._workspace is not None:
                    self._workspace.close()
        return None


def save_sessions(path: Path, environments: Sequence[Environment]) -> Path:
    """Save the sessions of ``environments`` into one session file, a tab each (the file
    ``agentworld --session FILE`` opens); raises EnvError when it cannot be written."""
    error = SessionFile(Path(path)).save([env.session for env in environments])
    if error:
        raise EnvError(error)
    return Path(path)


# -- the environment ----------------------------------------------------------------------------
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
            self._shared = _SharedSimulator(simulator, owned=False)
        else:
            assert engine is not None
            self._shared = _SharedSimulator(
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
        from agentworld_tui.domains.agent_tools import agent_tools

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
        self._check_open()
        self._settle()
        load_simulator(self.simulator)
        return self._new_episode(seed, scenario)

    async def areset(
        self, *, seed: int | None = None, scenario: str | Scenario | None = None
    ) -> Observation:
        self._check_open()
        await self._asettle()
        await aload_simulator(self.simulator)
        return self._new_episode(seed, scenario)

    def step(self, action: ActionInput) -> StepResult:
        """Take ``action``; raises ActionError (the app's message) when the domain refuses
        it: nothing is taken then, and the episode goes on."""
        self._settle()
        if self._episode is None:
            self.reset()
        return self.begin(action).wait()

    async def astep(self, action: ActionInput) -> StepResult:
        await self._asettle()
        if self._episode is None:
            await self.areset()
        else:
            await aload_simulator(self.simulator)
        pending = self.begin(action, home=home_on(asyncio.get_running_loop()))
        return await pending.result()

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult:
        """Call one of ``tools`` (an agent's tool call)."""
        return self.step(ToolCall(name, dict(arguments or {})))

    async def acall_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult:
        return await self.astep(ToolCall(name, dict(arguments or {})))

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
        self.cancel()
        await self._asettle()
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

    def _settle(self) -> None:
        """Wait for a step that was cancelled or left unwaited, so the history is settled."""
        episode = self._episode
        if episode is not None and episode.pending is not None and not episode.pending.done:
            episode.pending.wait()

    async def _asettle(self) -> None:
        episode = self._episode
        if episode is not None and episode.pending is not None and not episode.pending.done:
            await asyncio.shield(episode.pending.recorded())

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


# -- names to things ---------------------------------------------------------------------------
def resolve_domain(domain: str | Domain) -> Domain:
    if not isinstance(domain, str):
        return domain
    from agentworld_tui.domains import get_domain

    try:
        return get_domain(domain)
    except KeyError as exc:
        raise EnvError(str(exc.args[0])) from None


def resolve_scenario(domain: Domain, scenario: str | Scenario | None) -> Scenario:
    """A scenario by name (``prompts/<domain>/scenarios.toml``), from a file, or as given."""
    if isinstance(scenario, Scenario):
        return scenario
    from agentworld_tui.world.prompts import load_scenarios

    found, _problems = load_scenarios(domain.name)
    if scenario is None:
        return found[0] if found else Scenario("default", "Default")
    for item in found:
        if item.name == scenario:
            return item
    path = Path(scenario)
    if path.suffix.lower() in (".toml", ".json", ".txt") and path.is_file():
        from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file

        try:
            return load_scenario_file(path)
        except ScenarioFileError as exc:
            raise EnvError(str(exc)) from None
    known = ", ".join(s.name for s in found) or "none"
    raise EnvError(f"{domain.name} has no scenario {scenario!r} (it has: {known})")


def scenario_named(domain: Domain, name: str, offered: Sequence[Scenario] = ()) -> Scenario:
    """The scenario a client (a request, a tasks file's line) names: one of ``offered``
    (what the server was started with) or of the domain's by name; never a file."""
    from agentworld_tui.world.prompts import load_scenarios

    found, _problems = load_scenarios(domain.name)
    for item in (*offered, *found):
        if item.name == name:
            return item
    known = ", ".join(dict.fromkeys(s.name for s in (*offered, *found))) or "none"
    shown = name if len(name) <= 80 else name[:80] + "…"
    raise EnvError(f"{domain.name} has no scenario {shown!r} (it has: {known})")


def resolve_world(world: str | FictionalWorld | None) -> FictionalWorld | None:
    """A fictional world by name (shipped or the user's), from a .toml file, or as given."""
    if world is None or not isinstance(world, str):
        return world
    from agentworld_tui.world.fictional_world import WorldError, list_worlds, load_world_file

    path = Path(world)
    if path.suffix.lower() == ".toml":
        try:
            return load_world_file(path)
        except WorldError as exc:
            raise EnvError(str(exc)) from None
    found, _problems = list_worlds()
    for item in found:
        if item.name == world:
            return item
    known = ", ".join(w.name for w in found) or "none"
    raise EnvError(f"there is no fictional world {world!r} (there are: {known})")


def openai_tool(tool: Tool) -> dict[str, Any]:
    """One tool as an OpenAI function tool."""
    schema = tool.input_schema if tool.input_schema else {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }
