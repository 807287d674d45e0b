"""The simulated MCP server: the SDK's low-level server over stdio or streamable HTTP,
with the world model behind every tools/call and the steering API a person (through the
app) drives it with.

One ``AgentServer`` serves one ``Toolset`` on one ``Simulator``, from its parts: the open
connections (``connections``: one session each), the calls (``checking``, then
``answering``: each checked call a turn of its connection's session) and the steering API
(``steering``, which ``AgentServer`` is). This module is the transport: it starts and
stops serving, and hands each request to its part.

The server runs on the event loop it is started from: ``await start()`` / ``await stop()``
for HTTP inside a running loop (the app's), ``await serve_stdio()`` for stdio. Steering
and events live on that same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from starlette.requests import Request

from agentworld_tui import __version__
from agentworld_tui.agents.mcp.answering import Answering
from agentworld_tui.agents.mcp.checking import CallChecker
from agentworld_tui.agents.mcp.connections import (
    HANDSHAKE_FIRST,
    IDLE_SECONDS,
    MAX_SESSIONS,
    Connections,
)
from agentworld_tui.agents.mcp.events import RETRY_MS, SessionEvents, SessionScope
from agentworld_tui.agents.mcp.http import (
    EmbeddedServer,
    Gate,
    Guard,
    ListenError,
    address_of,
    bind,
    is_loopback,
    uvicorn_config,
)
from agentworld_tui.agents.mcp.logs import route_library_logs
from agentworld_tui.agents.mcp.sessions import SessionFolder, SessionStore
from agentworld_tui.agents.mcp.steering import Listeners, Steering
from agentworld_tui.agents.mcp.toolset import Toolset
from agentworld_tui.agents.schedule import Schedule
from agentworld_tui.domains.json_schema import CHECK_SECONDS
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.routing import Reality
from agentworld_tui.world.fictional_world import FictionalWorld

__all__ = ["IDLE_SECONDS", "LEAVE_SECONDS", "MAX_SESSIONS", "AgentServer", "ServerError"]

log = logging.getLogger("agentworld.mcp")

STOP_SECONDS = 10.0
"""How long ``stop`` waits, by default, for the calls in flight to be recorded by the
engine before it records them itself."""
LEAVE_SECONDS = 0.5
"""How long the engine has to record the calls in flight once a stdio client has left
(a client gives a server a few seconds before it kills it)."""


class ServerError(Exception):
    """The server cannot start as asked; the message is one line."""


class AgentServer(Steering):
    def __init__(
        self,
        simulator: Simulator,
        toolset: Toolset,
        *,
        sessions: SessionStore | None = None,
        schedule: Schedule | None = None,
        world: FictionalWorld | None = None,
        idle_seconds: float = IDLE_SECONDS,
        max_sessions: int = MAX_SESSIONS,
        check_seconds: float = CHECK_SECONDS,
        reality: Reality | None = None,
    ) -> None:
        """``reality``: a real twin of the served tools (every call shadowed, or routed by
        its rules) and a trace store to ground the world model in; the caller starts the
        twin and closes it after ``stop``."""
        self.simulator = simulator
        self.toolset = toolset
        self.reality = reality
        self.url = ""
        """Where agents connect over HTTP, once started ("" otherwise)."""
        listeners = Listeners()
        self._events = SessionEvents()
        self._connections = Connections(
            toolset,
            sessions if sessions is not None else SessionFolder(),
            listeners,
            self._events,
            world=world,
            idle_seconds=idle_seconds,
            max_sessions=max_sessions,
        )
        self._answering = Answering(
            simulator,
            toolset,
            self._connections,
            listeners,
            CallChecker(toolset, check_seconds),
            schedule,
            reality,
        )
        super().__init__(self._connections.open, listeners, toolset.domain.name)
        self._sweeper: asyncio.Task[None] | None = None
        self._uvicorn: EmbeddedServer | None = None
        self._serving: asyncio.Task[None] | None = None

    async def start(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str = "",
        path: str = "/mcp",
        sock: socket.socket | None = None,
    ) -> str:
        """Serve streamable HTTP in the running loop; returns the URL agents connect to.
        Another address than the loopback only with a bearer ``token``."""
        if self._serving is not None:
            raise ServerError("the server is running already")
        if not token and not is_loopback(host):
            raise ServerError(
                f"listening on {host} needs a bearer token: set one (see --token-env), or "
                "listen on 127.0.0.1"
            )
        try:
            listening = sock if sock is not None else bind(host, port)
        except ListenError as exc:
            raise ServerError(str(exc)) from None
        route_library_logs()
        connections = self._connections
        # Host, Origin and the token are the shared guard's (agents.guard), for every address.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = self._mcp(http=True).streamable_http_app(
            streamable_http_path=path,
            host=host,
            transport_security=security,
            session_idle_timeout=connections.idle_seconds,
            max_sessions=connections.max_sessions,
            event_store=self._events,
            retry_interval=RETRY_MS,
        )
        connections.closing = False
        guard = Guard(host, listening.getsockname()[1], token)
        served = SessionScope(app)
        self._uvicorn = EmbeddedServer(
            uvicorn_config(Gate(served, guard, connections.session_ended))
        )
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[listening]))
        while not self._uvicorn.started:
            if self._serving.done():
                problem = self._serving.exception()
                self._uvicorn = self._serving = None
                listening.close()
                raise ServerError(str(problem or "the HTTP server ended as it started"))
            await asyncio.sleep(0.01)
        self.url = f"http://{address_of(listening, host)}{path}"
        self._sweeper = asyncio.create_task(connections.sweep_idle_worlds())
        log.info("serving MCP at %s", self.url)
        return self.url

    async def serve_stdio(self) -> None:
        """Serve the process's stdin and stdout (nothing else is written to stdout while
        it runs) until the client closes stdin. The call in flight then ends at once: it
        is recorded (interrupted) and saved within ``LEAVE_SECONDS``, whatever the engine
        is doing, since a client that leaves kills its server moments later."""
        route_library_logs()
        server = self._mcp(http=False)
        self._connections.closing = False
        try:
            async with stdio_server() as (read, write), anyio.create_task_group() as group:
                mine, received = anyio.create_memory_object_stream[SessionMessage | Exception]()

                async def until_stdin_closes() -> None:
                    async with mine:
                        async for message in read:
                            await mine.send(message)
                    self._connections.closing = True
                    await self._answering.settle_all(LEAVE_SECONDS)
                    group.cancel_scope.cancel()

                group.start_soon(until_stdin_closes)
                await server.run(received, write, server.create_initialization_options())
                group.cancel_scope.cancel()
        finally:
            await self._answering.settle_all(LEAVE_SECONDS)
            self._connections.close_all()

    async def stop(self, grace: float = STOP_SECONDS) -> None:
        """Stop every call (the agents get an interrupted result), save and close every
        connection's session, and stop serving. A call the engine has not recorded
        within ``grace`` seconds is recorded as interrupted all the same."""
        self._connections.closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        await self._answering.settle_all(grace)
        if self._uvicorn is not None and self._serving is not None:
            self._uvicorn.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._serving), STOP_SECONDS)
            except TimeoutError:
                self._uvicorn.force_exit = True
                with contextlib.suppress(Exception):
                    await self._serving
            except Exception as exc:  # it stopped all the same; the log says how
                log.warning("the HTTP server ended with: %s", exc)
        self._uvicorn = self._serving = None
        self.url = ""
        self._connections.close_all()
        self._answering.checker.close()

    def _mcp(self, *, http: bool) -> Server[Any]:
        toolset = self.toolset
        server: Server[Any] = Server(
            toolset.server_name,
            version=toolset.server_version or __version__,
            instructions=toolset.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        if http:
            # A 2026-07-28 exchange carries no session, so a client that can also do the
            # handshake is steered to it (its probe is declined, and it falls back): only
            # the handshake tells two instances of one client program apart. A client
            # that speaks 2026-07-28 alone is served all the same (``Connections``).
            server.add_request_handler("server/discover", types.RequestParams, _no_discover)
        return server

    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._connections.listing(ctx)
        return types.ListToolsResult(tools=list(self.toolset.declared))

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        connection = self._connections.of_request(ctx, params.meta)
        request = ctx.request
        left = request.is_disconnected if isinstance(request, Request) else None
        return await self._answering.call(connection, params.name, params.arguments, left)


async def _no_discover(ctx: Any, params: types.RequestParams | None) -> types.DiscoverResult:
    raise MCPError(types.METHOD_NOT_FOUND, HANDSHAKE_FIRST)
