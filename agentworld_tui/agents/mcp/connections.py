"""The open connections: each agent's connection is opened on its first request, with a
session of its own, and closed when its client's session ends, when it goes idle, or when
the server stops.

Over streamable HTTP a connection is an MCP session (the handshake's ``mcp-session-id``);
the SDK ends an idle one itself and says so through its per-session teardown. A client
that speaks only 2026-07-28 sends no session: its world is keyed by the world it names in
``_meta`` (or by its name and version) and ends after ``idle_seconds`` without a request.
Over stdio the process is the one connection. At most ``max_sessions`` are open over HTTP.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import mcp_types as types
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from agentworld_tui.agents.mcp.events import SessionEvents
from agentworld_tui.agents.mcp.sessions import SessionStore, SessionUnavailable
from agentworld_tui.agents.mcp.steering import (
    AgentConnection,
    ConnectionClosed,
    ConnectionOpened,
    Listeners,
)
from agentworld_tui.agents.mcp.toolset import Toolset
from agentworld_tui.world.fictional_world import FictionalWorld
from agentworld_tui.world.sanitize import one_line

log = logging.getLogger("agentworld.mcp")

IDLE_SECONDS = 1800.0
"""How long an HTTP session (or a 2026-07-28 world) may go without a request before it
ends and lets go of its session file."""
MAX_SESSIONS = 256
"""Open HTTP sessions (and 2026-07-28 worlds) at most; one more is refused."""
WORLD_META_KEY = "agentworld/world"
"""The ``_meta`` key a 2026-07-28 client may name its world with."""
STDIO_KEY = "stdio"
STOPPING = "the simulated server is stopping"
HANDSHAKE_FIRST = (
    "over HTTP this simulated server offers the initialize handshake first, which gives "
    "each client a world of its own; a client that speaks only 2026-07-28 is served too "
    f"(see docs/agents.md: its world is keyed by _meta {WORLD_META_KEY!r}, or by its name)"
)


class Connections:
    """The open connections, by MCP session id (HTTP), world key (2026-07-28) or stdio."""

    def __init__(
        self,
        toolset: Toolset,
        sessions: SessionStore,
        listeners: Listeners,
        events: SessionEvents,
        *,
        world: FictionalWorld | None = None,
        idle_seconds: float = IDLE_SECONDS,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.toolset = toolset
        self.sessions = sessions
        self.world = world
        """The fictional world every new connection starts with (None: none)."""
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self.open: dict[str, AgentConnection] = {}
        """The open connections (the same mapping for the server's life: steering reads it)."""
        self.closing = False
        """The server is stopping: no new connection, no new call."""
        self._listeners = listeners
        self._events = events
        self._ids = 0

    def ensure_serving(self) -> None:
        """Raise the protocol error a stopping server answers a request with."""
        if self.closing:
            raise MCPError(types.INTERNAL_ERROR, STOPPING)

    def of_request(self, ctx: Any, meta: Mapping[str, Any] | None = None) -> AgentConnection:
        """The connection a request belongs to, opened on its first request: the MCP
        session over HTTP, the world a 2026-07-28 client names (or its client's), the
        process over stdio."""
        request = ctx.request
        transport: Literal["stdio", "http"] = "stdio"
        key = STDIO_KEY
        modern = False
        if isinstance(request, Request):
            transport = "http"
            key = request.headers.get(MCP_SESSION_ID_HEADER, "")
            if not key:
                modern = getattr(ctx, "protocol_version", "") in MODERN_PROTOCOL_VERSIONS
                if not modern:
                    raise MCPError(types.INVALID_REQUEST, HANDSHAKE_FIRST)
                key = _world_key(ctx, meta)
        found = self.open.get(key)
        if found is not None and not found.closed:
            found.last_seen = time.monotonic()
            return found
        self.ensure_serving()
        if transport == "http" and self._open_worlds() >= self.max_sessions:
            raise MCPError(
                types.INTERNAL_ERROR,
                f"too many worlds are open ({self.max_sessions}, the server's limit): "
                "try again once others end",
            )
        client = _client_name(ctx)
        title = f"MCP agent {client}" if client else "MCP agent"
        try:
            opened = self.sessions.open(self.toolset.domain, self.toolset.scenario, title)
        except SessionUnavailable as exc:
            raise MCPError(types.INVALID_REQUEST, str(exc)) from None
        if self.world is not None and opened.session.world is None:
            opened.session.world = self.world
        self._ids += 1
        connection = AgentConnection(f"agent-{self._ids}", transport, client, opened)
        connection.keyed = modern
        self.open[key] = connection
        if transport == "http" and not modern:
            _on_session_end(ctx, functools.partial(self.session_ended, key, connection))
        log.info("%s connected over %s (%s)", connection.id, transport, client or "unnamed")
        self._listeners.emit(ConnectionOpened(connection))
        return connection

    def listing(self, ctx: Any) -> None:
        """A tools/list opens (or keeps alive) the connection of a stdio or handshake
        client; a 2026-07-28 client's names no world, and opens none."""
        request = ctx.request
        if not isinstance(request, Request) or request.headers.get(MCP_SESSION_ID_HEADER):
            self.of_request(ctx)

    async def sweep_idle_worlds(self) -> None:
        """End the 2026-07-28 worlds that had no request for ``idle_seconds`` (the SDK
        ends idle handshake sessions itself, and ``session_ended`` hears of it)."""
        every = max(0.05, min(30.0, self.idle_seconds / 4))
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for key, connection in list(self.open.items()):
                if connection.keyed and now - connection.last_seen >= self.idle_seconds:
                    self.session_ended(key, connection)

    def session_ended(self, key: str, connection: AgentConnection | None = None) -> None:
        """The client's session ended (DELETE, the SDK's idle timeout, the server
        stopping): its connection is closed now, or once its call is recorded."""
        self._events.forget(key)
        found = self.open.get(key)
        if found is None or (connection is not None and found is not connection):
            return
        if found.busy:
            found.connected = False
        else:
            self.close(found)

    def close(self, connection: AgentConnection) -> None:
        """Let the connection go: its session saved (when it has turns) and released."""
        for key, found in list(self.open.items()):
            if found is connection:
                del self.open[key]
        if connection.closed:
            return
        connection.connected, connection.closed = False, True
        if connection.session.turns:
            connection.save()
        connection.opened.close()
        self._listeners.emit(ConnectionClosed(connection))

    def close_all(self) -> None:
        for connection in list(self.open.values()):
            self.close(connection)

    def _open_worlds(self) -> int:
        return sum(1 for c in self.open.values() if c.transport == "http")


def _world_key(ctx: Any, meta: Mapping[str, Any] | None) -> str:
    """What keys a 2026-07-28 client's world over HTTP: the world it names in ``_meta``,
    or else its name and version (so one program's calls build on each other)."""
    named = (meta or {}).get(WORLD_META_KEY)
    if isinstance(named, str) and named.strip():
        return "world:" + one_line(named)[:200]
    return "client:" + (_client_name(ctx) or "unnamed")


def _on_session_end(ctx: Any, ended: Callable[[], None]) -> None:
    """Call ``ended`` when the SDK ends the request's MCP session, however it ends (a
    DELETE, its idle timeout, the server stopping). The SDK's per-connection teardown
    (``Connection.exit_stack``) is reached through the request's session."""
    sdk_connection = getattr(ctx.session, "_connection", None)
    stack = getattr(sdk_connection, "exit_stack", None)
    if stack is None:
        log.warning("this mcp SDK does not say when a session ends: idle sessions stay open")
        return
    stack.callback(ended)


def _client_name(ctx: Any) -> str:
    """The client's name and version from its initialize request, made safe to show."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is None:
        return ""
    text = one_line(f"{info.name} {info.version or ''}")
    return text[:80]
