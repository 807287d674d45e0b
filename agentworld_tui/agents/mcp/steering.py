"""What a person steering agents sees and holds: connections, calls, held observations,
and the events the server reports as they happen.

Everything here lives on the server's event loop (the app's, when the app runs it):
events are delivered there, and the objects are read and changed there only.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentworld_tui.simulator import TurnRun
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.agents.mcp.sessions import OpenSession
    from agentworld_tui.agents.schedule import Decision

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
    """The observation as the world model predicted it."""
    _answer: asyncio.Future[str | None] = field(repr=False)
    stopped: bool = False

    @property
    def released(self) -> bool:
        return self._answer.done()

    def release(self, text: str | None = None) -> bool:
        """Let the agent have the observation: as predicted, or ``text`` instead (which
        may be an MCP result of its own, ``{"content": [...], "isError": true}``).
        False when it was released already."""
        if self._answer.done():
            return False
        self._answer.set_result(text)
        return True

    def stop(self) -> bool:
        """Give the agent nothing of it: the call ends as interrupted."""
        if self._answer.done():
            return False
        self.stopped = True
        self._answer.set_result(None)
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
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the call's turn is final and saved."""

    @property
    def turn(self) -> Turn:
        return self.run.turn


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
