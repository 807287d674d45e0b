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
``{"done": true}`` is the agent saying it has finished: the episode ends there.

With a twin (``ServeConfig.twin``, from the command line only: a client never names a
file, a command or a check), every episode runs beside a twin of its own, started at its
reset and torn down at its end, its session's end or the server's stop; at most
``TwinSlots.most`` at once, and an episode beyond that is refused in one line. Each step's
``twin`` says which side the agent received, with the divergence; the episode's end (a
``done`` action, the step limit, the next reset, the session's end) runs the check in the
twin, and the step that ended it carries the figures in ``episode``. With routing rules
(``ServeConfig.routes``) each step goes to the twin, the world model or both as the rules
say, and with a trace store (``ServeConfig.traces``) the world model is shown similar real
answers first; each step's ``route`` and ``grounding`` say where it was answered, why, and
with which examples.

A hostile or careless client costs only its own session: an action is checked on a worker
thread within ``CHECK_SECONDS`` (a pattern that backtracks is refused, the loop serves the
others meanwhile), and a WebSocket session that sends nothing for ``session_idle_seconds``
is closed (code 1001), so that sessions a client left open without closing them give back
their descriptors and memory; past ``max_sessions`` a new one is refused ("Server at
capacity").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fastapi.exceptions import RequestValidationError
from openenv.core.client_types import StepResult as OpenEnvStepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from agentworld_tui import __version__
from agentworld_tui.agents.env.actions import ActionInput, ToolCall
from agentworld_tui.agents.env.environment import Environment
from agentworld_tui.agents.env.results import EnvError, StepResult, TwinStep
from agentworld_tui.agents.env.routing import EpisodeRouting
from agentworld_tui.agents.env.scenarios import (
    resolve_domain,
    resolve_scenario,
    resolve_world,
    scenario_named,
)
from agentworld_tui.agents.env.twins import TwinError, TwinSlots
from agentworld_tui.config import MAX_SEED
from agentworld_tui.domains.base import shown_name
from agentworld_tui.domains.json_schema import CHECK_SECONDS, CheckTimeout, checking_within
from agentworld_tui.domains.tool_call import too_costly
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.reality.figures import EpisodeFigures
from agentworld_tui.reality.routing import RuleSet
from agentworld_tui.reality.spec import Deliver, TwinSpec
from agentworld_tui.reality.traces import TraceStore
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.action import Action as WorldAction
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.fictional_world import FictionalWorld

__all__ = [
    "AgentWorldAction",
    "AgentWorldClient",
    "AgentWorldObservation",
    "AgentWorldState",
    "ClientError",
    "EpisodeFiles",
    "OpenEnvSimulation",
    "ServeConfig",
    "episode_file_name",
    "make_app",
]

log = logging.getLogger("agentworld.env")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
SESSION_IDLE_SECONDS = 1800.0
"""How long a WebSocket session may go without a message before the server closes it."""
CHECK_THREADS = 4
"""Actions checked at once, off the event loop."""
LATE_SECONDS = 0.2
"""How long past ``CHECK_SECONDS`` a check's worker may answer before the step is refused."""


class ClientError(ValueError):
    """A client asked for something the server does not do: answered 400 over HTTP, an
    error message over the WebSocket; never a traceback."""


class ResetOptions(BaseModel):
    """What a client may send with a reset, over HTTP and the WebSocket alike. Nothing a
    client sends names a file: ``scenario`` is the name of one the server offers."""

    model_config = ConfigDict(extra="forbid")

    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    episode_id: str | None = Field(default=None, max_length=255)
    scenario: str | None = Field(default=None, min_length=1, max_length=200)


def reset_options(seed: object, episode_id: object, extra: dict[str, Any]) -> ResetOptions:
    given = {"seed": seed, "episode_id": episode_id, **extra}
    try:
        return ResetOptions.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(part) for part in error["loc"]) or "reset"
            problems.append(
                f"{where}: not a field of reset (it takes seed, episode_id and scenario)"
                if error["type"] == "extra_forbidden"
                else f"{where}: {error['msg']}"
            )
        raise ClientError("reset: " + "; ".join(problems)) from None


def episode_file_name(episode_id: str) -> str:
    """The session file an episode id names: readable, and never another id's (a short
    hash of the exact id follows its safe letters)."""
    digest = hashlib.sha256(episode_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = _UNSAFE_NAME.sub("-", episode_id)[:60].strip(".-")
    return f"{readable or 'episode'}-{digest}.json"


class EpisodeFiles:
    """The session files of a server's episodes in one folder: each episode its own file,
    also when two clients give one episode id, or one client gives it twice (the later
    episode gets ``-2``, and so on)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._claimed: set[str] = set()
        """Names taken by episodes whose file is not written yet."""
        self._lock = threading.Lock()

    def claim(self, episode_id: str | None, session_id: str) -> Path:
        first = episode_file_name(episode_id) if episode_id else f"{session_id}.json"
        stem = first.removesuffix(".json")
        with self._lock:
            name, n = first, 1
            while name in self._claimed or (self.folder / name).exists():
                n += 1
                name = f"{stem}-{n}.json"
            self._claimed.add(name)
        return self.folder / name

    def written(self, path: Path) -> None:
        """``path`` exists now: the folder itself says it is taken."""
        with self._lock:
            self._claimed.discard(path.name)


class AgentWorldAction(Action):  # type: ignore[misc]
    """An agent's action: the domain's own form, or a call of one of its tools."""

    action: str | dict[str, Any] | list[Any] | None = Field(
        default=None,
        description="the action as the domain writes it: text (a command line, a browser "
        "call, Python) or its JSON (a keystroke list, a tool call, a phone action)",
    )
    tool: str | None = Field(default=None, description="an agent tool's name, instead of action")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")
    done: bool = Field(
        default=False,
        description="the agent says it has finished: the episode ends (with a twin, its "
        "check runs there); comes without an action",
    )


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
    save_error: str = Field(
        default="",
        description="why the episode's session file could not be written (empty: saved, "
        "or the server keeps no files)",
    )
    twin: dict[str, Any] = Field(
        default_factory=dict,
        description="with a twin: the side delivered (real or sim), reality's status and "
        "error, the divergence and whether it diverged, a note when the twin failed",
    )
    episode: dict[str, Any] = Field(
        default_factory=dict,
        description="when this step ended a twinned episode: its figures (steps compared, "
        "first divergence, share diverged, check_passed, claimed_done, deceived)",
    )
    route: dict[str, Any] = Field(
        default_factory=dict,
        description="with routing rules: where the step was answered (answered: real, sim "
        "or both), the rule and the reason, and fallback or failed when reality could not "
        "answer",
    )
    grounding: dict[str, Any] = Field(
        default_factory=dict,
        description="with a trace store: the ids of the real examples the world model was "
        "shown, the tokens they took, the budget, how many were found",
    )


class AgentWorldState(State):  # type: ignore[misc]
    """The episode as the server keeps it."""

    domain: str = ""
    scenario: str = ""
    session_id: str = ""
    turns: int = 0
    done: bool = False
    session_file: str = ""
    """The name of the episode's session file in the server's --sessions folder (once
    its first step is saved)."""
    twinned: bool = False
    """Episodes run beside a real twin."""
    episode: dict[str, Any] = Field(
        default_factory=dict,
        description="the figures of the episode, once it ended beside its twin",
    )


@dataclass(frozen=True)
class ServeConfig:
    """What every session of the server shares: the domain, its starting point, the
    simulator; ``session_dir`` saves each episode as a session file there."""

    domain: str
    simulator: Simulator
    scenario: str | Scenario | None = None
    """From the command line: a name or a file (clients choose others by name only)."""
    world: str | FictionalWorld | None = None
    schedule: object = None
    max_steps: int | None = None
    params: GenerationParams | None = None
    session_dir: Path | None = None
    max_sessions: int = 64
    """WebSocket sessions at once; one more is refused."""
    session_idle_seconds: float = SESSION_IDLE_SECONDS
    """A WebSocket session with no message for this long is closed."""
    files: EpisodeFiles | None = field(default=None, compare=False)
    """Set by ``make_app`` from ``session_dir``."""
    twin: TwinSpec | None = None
    """Every episode's twin (from the command line only)."""
    deliver: Deliver = "real"
    check: str = ""
    """The check run in the twin at an episode's end ("": the scenario's own, if any)."""
    twin_slots: TwinSlots | None = field(default=None, compare=False)
    """The twins alive at once; ``make_app`` makes one (4) when a twin is given without."""
    routes: RuleSet | None = field(default=None, compare=False)
    """Where each step goes (needs a twin; None: a twin shadows every step)."""
    traces: TraceStore | None = field(default=None, compare=False)
    """The trace store the world model is grounded in (its owner closes it)."""
    grounding_budget: int | None = None


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
            twin=config.twin,
            deliver=config.deliver if config.twin is not None else None,
            check=(config.check or None) if config.twin is not None else None,
            twin_slots=config.twin_slots,
            routes=config.routes,
            traces=config.traces,
            grounding_budget=config.grounding_budget,
        )
        self.episode_id: str | None = None
        self._done = False
        self._file: Path | None = None
        self._checking: asyncio.Future[WorldAction] | None = None
        """The last action check: a session checks one action at a time."""

    # -- OpenEnv's interface ------------------------------------------------------------
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        options = reset_options(seed, episode_id, kwargs)
        first = self.env.reset(seed=options.seed, scenario=self._scenario(options.scenario))
        return self._started(options.episode_id, first.text)

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        options = reset_options(seed, episode_id, kwargs)
        scenario = self._scenario(options.scenario)
        first = await self.env.areset(seed=options.seed, scenario=scenario)
        return self._started(options.episode_id, first.text)

    def step(
        self, action: AgentWorldAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        try:
            if action.done:
                _only_done(action)
                return self._ended(self.env.end_episode(claimed_done=True))
            if self._ended_already():
                return self._refused(ENDED)
            return self._observed(self.env.step(_action_of(action)))
        except ActionError as exc:
            return self._refused(str(exc))

    async def step_async(
        self, action: AgentWorldAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentWorldObservation:
        try:
            if action.done:
                _only_done(action)
                if self.env._episode is None:
                    await self.reset_async()
                ended = await self.env.aend_episode(claimed_done=True)
                return self._ended(ended)
            if self._ended_already():
                return self._refused(ENDED)
            value = _action_of(action)
            if self.env._episode is None:
                await self.reset_async()
            stepping = self.env.astep(await self._checked(value))
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
            session_file=self._file.name if self._file is not None else "",
            twinned=self.config.twin is not None,
            episode=_figures(env.twin_figures),
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
        """End the session's environment; a twinned episode's end (its check) and its
        twin's teardown run on a thread of their own, so that no event loop waits on a
        sandbox (openenv closes a stateless request's environment on its loop)."""
        slots = self.config.twin_slots
        if slots is not None and self.env._episode is not None:
            slots.in_background(self.env.close)
        else:
            self.env.close()

    # -- inside -------------------------------------------------------------------------
    async def _checked(self, value: ActionInput) -> WorldAction:
        """The action ``value`` stands for, made on a worker thread within the check's
        time: its cost (a schema's pattern, a long entry list) is this session's, never the
        event loop's. A check that runs out of time refuses the action; a session's next
        check waits for its last one to end, so one session holds at most one worker."""
        if self._checking is not None and not self._checking.done():
            await asyncio.wait([self._checking])
        checking = asyncio.get_running_loop().run_in_executor(
            _check_workers(), functools.partial(_checked_action, self.env, value)
        )
        checking.add_done_callback(_seen)
        self._checking = checking
        try:
            return await asyncio.wait_for(asyncio.shield(checking), CHECK_SECONDS + LATE_SECONDS)
        except TimeoutError:
            raise ActionError(_too_costly(value), field="action") from None

    def _scenario(self, name: str | None) -> Scenario | None:
        """The scenario a client names: the server's own or one of the domain's, by name."""
        if name is None:
            return None
        started = self.config.scenario
        try:
            return scenario_named(
                self.env.domain, name, [started] if isinstance(started, Scenario) else []
            )
        except EnvError as exc:
            raise ClientError(str(exc)) from None

    def _started(self, episode_id: str | None, text: str) -> AgentWorldObservation:
        self.episode_id = episode_id
        self._done = False
        self._file = None
        twin = self.config.twin
        said: dict[str, Any] = {"kind": twin.kind, "deliver": self.config.deliver} if twin else {}
        if twin is not None and self.config.routes is not None:
            said["routes"] = self.config.routes.source
        return AgentWorldObservation(text=text, tools=self.env.openai_tools(), twin=said)

    def _ended_already(self) -> bool:
        episode = self.env._episode
        return episode is not None and episode.ended

    def _ended(self, figures: EpisodeFigures | None) -> AgentWorldObservation:
        """The observation of a ``done`` action: where the episode stood, and its figures."""
        self._done = True
        shown = self.env.observation()
        return AgentWorldObservation(
            save_error=self._save(),
            text=shown.text,
            turn=shown.turn,
            status="ended",
            note="the agent said it had finished",
            done=True,
            episode=_figures(figures),
        )

    def _observed(self, step: StepResult) -> AgentWorldObservation:
        self._done = step.done
        return AgentWorldObservation(
            save_error=self._save(),
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
            twin=step.twin.figures() if step.twin is not None else {},
            episode=_figures(step.episode),
            route=step.route or {},
            grounding=step.grounding or {},
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
        unsaved = self._save()
        turn = self.env.turns[-1]
        twin = TwinStep.of(turn, self.env.deliver)
        return AgentWorldObservation(
            route=dict(turn.route) if isinstance(turn.route, dict) else {},
            save_error=unsaved,
            text=turn.shown_text,
            turn=turn.number,
            status=turn.status,
            note=f"stopped after the step's timeout of {seconds:g} s",
            reasoning=turn.reasoning,
            twin=twin.figures() if twin is not None else {},
        )

    def _save(self) -> str:
        """Write the episode's session file; returns why it could not be ("" when saved
        or when the server keeps no files)."""
        files = self.config.files
        if files is None:
            return ""
        first = self._file is None
        if self._file is None:
            self._file = files.claim(self.episode_id, self.env.session.id)
        path = self._file
        try:
            self.env.save(path)
        except EnvError as exc:
            said = f"not saved to {path.name}: {exc}"
            log.warning("episode %r %s", (self.episode_id or "")[:200], said)
            return said
        if first:
            files.written(path)
        return ""


ENDED = "the episode has ended: reset it to start another"


def _only_done(action: AgentWorldAction) -> None:
    """``done`` comes alone: an action beside it would be taken or not, nobody knows."""
    if action.action is not None or action.tool is not None:
        raise ActionError("done ends the episode: send it without an action or a tool")


def _figures(figures: EpisodeFigures | None) -> dict[str, Any]:
    return figures.to_dict() if figures is not None else {}


@functools.cache
def _check_workers() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="env-check")


def _checked_action(env: Environment, value: ActionInput) -> WorldAction:
    try:
        with checking_within(CHECK_SECONDS):
            return env.action(value)
    except CheckTimeout:
        raise ActionError(_too_costly(value), field="action") from None


def _too_costly(value: ActionInput) -> str:
    """Why an action whose check ran out of time was refused, in the tool check's words
    where it calls a tool (whose name is the client's: cut)."""
    name = value.name if isinstance(value, ToolCall) else None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        name = value["name"]
    if name is None:
        return f"the action could not be checked within {CHECK_SECONDS:g} s"
    return too_costly(shown_name(name, quoted=False), CHECK_SECONDS)


def _seen(done: asyncio.Future[WorldAction]) -> None:
    """A check answered after its step was refused: its error is not left unread."""
    if not done.cancelled():
        done.exception()


def _action_of(action: AgentWorldAction) -> ActionInput:
    if action.tool is not None:
        return ToolCall(action.tool, dict(action.arguments))
    if action.action is None:
        raise ActionError("give an action, or a tool and its arguments", field="action")
    return action.action


def make_app(config: ServeConfig) -> Any:
    """The FastAPI application OpenEnv builds for the domain (serve it with uvicorn; put
    ``agents.guard.GuardedApp`` in front of it). The scenario and world from the command
    line are read once, here; raises EnvError when they cannot be."""
    domain = resolve_domain(config.domain)
    EpisodeRouting.of(  # rules without a twin, or a bad budget: said once, here
        config.routes, config.traces, config.grounding_budget, twinned=config.twin is not None
    )
    slots = config.twin_slots
    if config.twin is not None and slots is None:
        slots = TwinSlots(4)
    config = replace(
        config,
        scenario=resolve_scenario(domain, config.scenario),
        world=resolve_world(config.world),
        files=EpisodeFiles(config.session_dir) if config.session_dir is not None else None,
        twin_slots=slots,
    )
    app = create_fastapi_app(
        functools.partial(OpenEnvSimulation, config),
        AgentWorldAction,
        AgentWorldObservation,
        max_concurrent_envs=max(1, config.max_sessions),
    )
    app.add_exception_handler(ClientError, _refused)
    app.add_exception_handler(TwinError, _no_twin)
    if slots is not None:
        stopping = slots

        async def close_twins() -> None:  # before uvicorn hands a SIGTERM back to Python
            await asyncio.to_thread(stopping.close_all)

        app.router.on_shutdown.append(close_twins)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_middleware(IdleWebSockets, seconds=config.session_idle_seconds)
    return app


Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class IdleWebSockets:
    """ASGI middleware: a WebSocket whose client sends nothing for ``seconds`` while the
    application waits for its next message is closed (1001, "idle for N s"), and the
    application hears a disconnect, so the session, its environment and its socket go.
    The time a step takes is not idle time."""

    def __init__(self, app: Callable[..., Awaitable[None]], seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        closed = False  # by the idle time or by the client: nothing more reaches it

        async def guarded_send(message: Message) -> None:
            if not closed:
                await send(message)

        async def idle_receive() -> Message:
            nonlocal closed
            if closed:
                return {"type": "websocket.disconnect", "code": 1001}
            getting = asyncio.ensure_future(receive())
            done, _ = await asyncio.wait([getting], timeout=self.seconds)
            if done:
                message = getting.result()
                closed = message["type"] == "websocket.disconnect"
                return message
            closed = True
            getting.cancel()
            with contextlib.suppress(OSError, RuntimeError):  # gone meanwhile
                await send(
                    {"type": "websocket.close", "code": 1001,
                     "reason": f"idle for {self.seconds:g} s"}
                )  # fmt: skip
            return {"type": "websocket.disconnect", "code": 1001}

        await self.app(scope, idle_receive, guarded_send)


class _EscapedJSON(JSONResponse):
    """JSON in ASCII: a client's text echoed in an error (a lone surrogate included)
    cannot break the answer."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


async def _refused(_request: Request, exc: Exception) -> JSONResponse:
    return _EscapedJSON({"detail": str(exc)}, status_code=400)


async def _no_twin(_request: Request, exc: Exception) -> JSONResponse:
    """No twin for this episode (all in use, or it did not start): the server's state, not
    the request's fault."""
    return _EscapedJSON({"detail": str(exc)}, status_code=503)


async def _invalid(_request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in errors
    ]
    return _EscapedJSON({"detail": detail}, status_code=422)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    detail: Any = exc.detail
    if isinstance(detail, list):  # openenv's action errors: pydantic's, inputs included
        detail = [
            {k: v for k, v in item.items() if k in ("loc", "msg", "type")}
            if isinstance(item, dict)
            else item
            for item in detail
        ]
    return _EscapedJSON({"detail": detail}, status_code=exc.status_code, headers=exc.headers)


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
