"""Steering agents: what a person sees and holds (connections, calls, held observations,
and the events the server reports as they happen), and what they ask of a connection
(``Steering``: hold, release, stop, answer now, control instructions, worlds).

Everything here lives on the server's event loop (the app's, when the app runs it):
events are delivered there, and the objects are read and changed there only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentworld_tui.simulator import TurnRun
from agentworld_tui.world.fictional_world import FictionalWorld
from agentworld_tui.world.perturbation import Perturbation, load_perturbations
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.agents.mcp.sessions import OpenSession
    from agentworld_tui.agents.schedule import Decision
    from agentworld_tui.simulator.routing import RoutedSession

log = logging.getLogger("agentworld.mcp")

HOLD_EVERY = -1
"""``AgentConnection.hold``: hold every observation until told otherwise."""

CallState = Literal["running", "held", "answered", "undelivered"]


class SteeringError(LookupError):
    """A steering request about a connection or call that is not there."""


@dataclass(eq=False)
class HeldObservation:
    """A finished call's observation, waiting for the person before the agent gets it."""

    call: AgentCall
    predicted: str
    """The observation as it would reach the agent: the world model's prediction, or
    reality's answer where that is what the call delivers."""
    _answer: asyncio.Future[str | None] = field(repr=False)
    stopped: bool = False

    @property
    def released(self) -> bool:
        return self._answer.done()

    def release(self, text: str | None = None) -> bool:
        """Let the agent have the observation: as predicted, or ``text`` instead (which
        may be an MCP result of its own, ``{"content": [...], "isError": true}``).
        False when it was released already."""
        return self._settle(text, stopped=False)

    def stop(self) -> bool:
        """Give the agent nothing of it: the call ends as interrupted."""
        return self._settle(None, stopped=True)

    def _settle(self, text: str | None, *, stopped: bool) -> bool:
        if self._answer.done():
            return False
        self.stopped = stopped
        self._answer.set_result(text)
        return True


@dataclass(eq=False)
class AgentCall:
    """One tools/call on its way through the world model."""

    connection: AgentConnection
    tool: str
    number: int
    """The connection's call number, from 1."""
    tool_call: int
    """The how-manieth call of ``tool`` on this connection."""
    run: TurnRun
    decisions: list[Decision] = field(default_factory=list)
    state: CallState = "running"
    held: HeldObservation | None = None
    received: dict[str, Any] | None = None
    """What the agent got, once it got it (``results.result_record``)."""
    asked: int = 1
    """How many times the world model was asked for a result that fits the tool's
    output schema."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the call's turn is final and saved."""
    failure: str = ""
    """Why reality did not answer a call whose routing rule says to fail then ("" when
    it did, or the call was not routed to it)."""

    @property
    def turn(self) -> Turn:
        return self.run.turn

    @property
    def predicted(self) -> str:
        """The turn's own observation before anyone changed it: the world model's
        prediction (reality's answer for a call reality answered alone)."""
        return self.turn.observation


@dataclass(eq=False)
class AgentConnection:
    """One agent's connection (an MCP session over HTTP, the process over stdio) and its
    session, with what the person steering it asked for."""

    id: str
    """Short and stable for the server's life: ``agent-1``, ``agent-2``..."""
    transport: Literal["stdio", "http"]
    client: str
    """The client's name and version as it gave them (made safe to show)."""
    opened: OpenSession
    since: float = field(default_factory=time.time)
    connected: bool = True
    """False once the client ended its MCP session (or the server stopped)."""
    closed: bool = False
    """The session is saved and let go: no more calls."""
    calls: int = 0
    refused: int = 0
    """Calls refused before any model time (unknown tool, bad arguments)."""
    last_refusal: str = ""
    call: AgentCall | None = None
    """The call in progress, or the last one."""
    hold: int = 0
    """How many coming observations to hold (``HOLD_EVERY``: all of them)."""
    save_error: str = ""
    """Why the last save failed ("" when it did not)."""
    per_tool: Counter[str] = field(default_factory=Counter)
    turn_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """A connection's calls run one after another: each builds on the one before."""
    check_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """A connection's calls are checked one at a time (each check is bounded in time)."""
    keyed: bool = False
    """A 2026-07-28 world (no MCP session): it ends after its idle time."""
    last_seen: float = field(default_factory=time.monotonic)
    """When its client last sent a request (``time.monotonic``)."""
    routed: RoutedSession | None = None
    """How its calls go between the world model and reality, where the server has a
    twin or a trace store (made at its first call, from the session's recorded turns)."""

    @property
    def session(self) -> Session:
        return self.opened.session

    @property
    def path(self) -> Path | None:
        return self.opened.path

    @property
    def busy(self) -> bool:
        return self.call is not None and self.call.state in ("running", "held")

    @property
    def held(self) -> HeldObservation | None:
        call = self.call
        return call.held if call is not None and call.state == "held" else None

    def save(self) -> None:
        """Save the session now; why it could not be saved is kept in ``save_error``."""
        problem = self.opened.save()
        self.save_error = problem or ""
        if problem:
            log.warning("%s: the session was not saved: %s", self.id, problem)


# -- events ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ConnectionOpened:
    connection: AgentConnection


@dataclass(frozen=True)
class ConnectionClosed:
    connection: AgentConnection


@dataclass(frozen=True)
class TurnStarted:
    """A call reached the world model: ``run`` streams its turn (take its updates with
    ``run.take()``/``run.park()``: the server itself never takes them)."""

    connection: AgentConnection
    call: AgentCall

    @property
    def run(self) -> TurnRun:
        return self.call.run


@dataclass(frozen=True)
class ObservationHeld:
    connection: AgentConnection
    held: HeldObservation


@dataclass(frozen=True)
class CallAnswered:
    """A call ended: ``call.received`` is what the agent got (None: nothing, the client
    cancelled or went away), ``call.turn`` is final and saved."""

    connection: AgentConnection
    call: AgentCall


@dataclass(frozen=True)
class CallRefused:
    """A call refused before the world model (unknown tool, bad arguments)."""

    connection: AgentConnection
    tool: str
    message: str


AgentEvent = (
    ConnectionOpened | ConnectionClosed | TurnStarted | ObservationHeld | CallAnswered | CallRefused
)
Listener = Callable[[AgentEvent], None]


class Listeners:
    """Who hears the events: each listener, of every connection or of one. A listener's
    failure is logged, and never reaches an agent's call."""

    def __init__(self) -> None:
        self._entries: list[tuple[Listener, str]] = []

    def subscribe(self, listener: Listener, connection_id: str = "") -> Callable[[], None]:
        entry = (listener, connection_id)
        self._entries.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._entries.remove(entry)

        return unsubscribe

    def emit(self, event: AgentEvent) -> None:
        connection_id = event.connection.id
        for listener, wanted in list(self._entries):
            if wanted and wanted != connection_id:
                continue
            try:
                listener(event)
            except Exception:  # a listener's bug must never break an agent's call
                log.exception("an MCP event listener failed")


# -- the steering API ------------------------------------------------------------------
class Steering:
    """What a person asks of the open connections, by connection id (on the server's
    loop). ``steered`` is the live mapping of the open connections (by whatever keys
    them)."""

    def __init__(
        self, steered: Mapping[str, AgentConnection], listeners: Listeners, domain: str
    ) -> None:
        self._steered = steered
        self._listeners = listeners
        self._domain = domain

    def connections(self) -> list[AgentConnection]:
        """The open connections, oldest first (a closed one is let go)."""
        return list(self._steered.values())

    def connection(self, connection_id: str) -> AgentConnection:
        for connection in self._steered.values():
            if connection.id == connection_id:
                return connection
        raise SteeringError(f"there is no connection {connection_id!r}")

    def subscribe(self, listener: Listener, connection_id: str = "") -> Callable[[], None]:
        """Call ``listener`` with every event (of one connection, when given), on the
        server's loop; returns what unsubscribes it."""
        return self._listeners.subscribe(listener, connection_id)

    def hold(self, connection_id: str, count: int | None = 1) -> None:
        """Hold the connection's next ``count`` observations (None: every one, until
        ``hold(id, 0)``); a held call waits until ``release``."""
        connection = self.connection(connection_id)
        if count is None:
            connection.hold = HOLD_EVERY
        elif count < 0:
            raise ValueError("count must be 0 or more, or None for every observation")
        else:
            connection.hold = count

    def held(self, connection_id: str) -> HeldObservation | None:
        return self.connection(connection_id).held

    def release(self, connection_id: str, text: str | None = None) -> bool:
        """Let a held observation go to the agent, as predicted or as ``text`` (the
        session keeps both); False when nothing is held."""
        held = self.held(connection_id)
        return held.release(text) if held is not None else False

    def stop_call(self, connection_id: str) -> bool:
        """Stop the call in progress (generating or held): the agent gets an interrupted
        result, the turn is kept as interrupted. False when there is none."""
        connection = self.connection(connection_id)
        call = connection.call
        if call is None or not connection.busy:
            return False
        if call.held is not None and call.state == "held":
            return call.held.stop()
        call.run.stop()
        return True

    def answer_now(self, connection_id: str) -> bool:
        """Tell the model to stop reasoning and answer the call in progress."""
        connection = self.connection(connection_id)
        call = connection.call
        if call is None or call.state != "running":
            return False
        call.run.answer_now()
        return True

    def set_control(
        self, connection_id: str, text: str, *, persistent: bool = False, preset: str = ""
    ) -> None:
        """Send a control instruction with the connection's next call (or every call, when
        ``persistent``); raises ControlError for an empty or oversized one."""
        self.connection(connection_id).session.set_control(
            text, persistent=persistent, preset=preset
        )

    def clear_control(self, connection_id: str) -> None:
        self.connection(connection_id).session.clear_control()

    def attach_world(self, connection_id: str, world: FictionalWorld | None) -> None:
        """Every coming call of the connection carries ``world`` (None: no world)."""
        self.connection(connection_id).session.world = world

    def perturbations(self) -> list[Perturbation]:
        """The presets of the served domain (prompts/<domain>/perturbations.toml)."""
        return load_perturbations(self._domain)[0]
