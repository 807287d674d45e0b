"""The simulated MCP server: the SDK's low-level server, with the world model behind
every tools/call, and the steering API a person (through the app) drives it with.

One ``AgentServer`` serves one ``Toolset`` on one ``Simulator``. Each connection (an MCP
session over streamable HTTP; the process over stdio) is an ``AgentConnection`` with a
session of its own. A call is checked against the tool's schema first (a bad one gets the
error result a real server gives, and no model time); then it becomes a turn of that
session, and the agent gets the predicted observation as the tool's result. A client that
cancels or goes away stops the generation; the turn is kept, interrupted.

The server runs on the event loop it is started from: ``await start()`` / ``await stop()``
for HTTP inside a running loop (the app's), ``await serve_stdio()`` for stdio. Steering
and events live on that same loop.

What the session file keeps of a call, besides the turn itself, is in
``turn.stats["agent"]``: the connection, the tool, the call numbers, the schedule's
decisions, ``received`` (exactly what the agent got: ``{"result": ...}``,
``{"error": ...}``, or null for nothing), and ``predicted`` (the model's observation,
when the agent got something else: an edit, or nothing). ``turn.observation`` is what the
agent received as the tool's output, so later turns build on what the agent saw; a call
the agent never got an answer to keeps an empty observation (its text stays in
``turn.raw``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from agentworld_tui import __version__
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
from agentworld_tui.agents.mcp.results import (
    error_result,
    observation_result,
    output_problem,
    result_record,
    unfitting,
)
from agentworld_tui.agents.mcp.sessions import SessionFolder, SessionStore, SessionUnavailable
from agentworld_tui.agents.mcp.steering import (
    HOLD_EVERY,
    AgentCall,
    AgentConnection,
    AgentEvent,
    CallAnswered,
    CallRefused,
    ConnectionClosed,
    ConnectionOpened,
    HeldObservation,
    ObservationHeld,
    SteeringError,
    TurnStarted,
)
from agentworld_tui.agents.mcp.toolset import Toolset, UnknownTool
from agentworld_tui.agents.schedule import Schedule, joined_control
from agentworld_tui.domains.json_schema import CHECK_SECONDS, CheckTimeout, checking_within
from agentworld_tui.domains.tool_call import too_costly
from agentworld_tui.simulator import Simulator, SimulatorError, home_on
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.fictional_world import FictionalWorld
from agentworld_tui.world.perturbation import (
    Perturbation,
    load_perturbations,
)
from agentworld_tui.world.sanitize import sanitize

log = logging.getLogger("agentworld.mcp")

T = TypeVar("T")
Listener = Callable[[AgentEvent], None]

DISCONNECT_POLL_SECONDS = 1.0
"""How often a waiting call looks whether its HTTP client is still there."""
STOP_SECONDS = 10.0
"""How long ``stop`` waits, by default, for the calls in flight to be recorded by the
engine before it records them itself."""
LEAVE_SECONDS = 0.5
"""How long the engine has to record the calls in flight once a stdio client has left
(a client gives a server a few seconds before it kills it)."""
IDLE_SECONDS = 1800.0
"""How long an HTTP session (or a 2026-07-28 world) may go without a request before it
ends and lets go of its session file."""
MAX_SESSIONS = 256
"""Open HTTP sessions (and 2026-07-28 worlds) at most; one more is refused."""
OUTPUT_ASKS = 2
"""How many times the model is asked for a result that fits a tool's output schema."""
CHECK_THREADS = 4
"""Calls whose arguments are checked at once, off the event loop."""
WORLD_META_KEY = "agentworld/world"
"""The ``_meta`` key a 2026-07-28 client may name its world with."""
STDIO_KEY = "stdio"
INTERRUPTED = "The tool call was interrupted before it finished."
CANCELLED_NOTE = "the agent's client cancelled the call; it received nothing"
GONE_NOTE = "the agent's client went away during the call; it received nothing"
ENDED_NOTE = "the server stopped before the world model answered; the agent received nothing"
STOPPED_NOTE = "stopped before the agent received it"
EDITED_NOTE = "edited before the agent received it"
HANDSHAKE_FIRST = (
    "over HTTP this simulated server offers the initialize handshake first, which gives "
    "each client a world of its own; a client that speaks only 2026-07-28 is served too "
    f"(see docs/agents.md: its world is keyed by _meta {WORLD_META_KEY!r}, or by its name)"
)


class ServerError(Exception):
    """The server cannot start as asked; the message is one line."""


class AgentServer:
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
    ) -> None:
        self.simulator = simulator
        self.toolset = toolset
        self.sessions = sessions if sessions is not None else SessionFolder()
        self.schedule = schedule
        self.world = world
        """The fictional world every new connection starts with (None: none)."""
        self.url = ""
        """Where agents connect over HTTP, once started ("" otherwise)."""
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self.check_seconds = check_seconds
        """How long checking one call's arguments may take (then the call is refused)."""
        self._connections: dict[str, AgentConnection] = {}
        """The open connections, by session id (HTTP), world key (2026-07-28) or stdio."""
        self._checker: ThreadPoolExecutor | None = None
        self._events = SessionEvents()
        self._sweeper: asyncio.Task[None] | None = None
        self._ids = 0
        self._listeners: list[tuple[Listener, str]] = []
        self._calls: set[AgentCall] = set()
        self._closing = False
        self._uvicorn: EmbeddedServer | None = None
        self._serving: asyncio.Task[None] | None = None

    # -- serving ---------------------------------------------------------------------------
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
        # Host, Origin and the token are the shared guard's (agents.guard), for every address.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = self._mcp(http=True).streamable_http_app(
            streamable_http_path=path,
            host=host,
            transport_security=security,
            session_idle_timeout=self.idle_seconds,
            max_sessions=self.max_sessions,
            event_store=self._events,
            retry_interval=RETRY_MS,
        )
        self._closing = False
        guard = Guard(host, listening.getsockname()[1], token)
        served = SessionScope(app)
        self._uvicorn = EmbeddedServer(uvicorn_config(Gate(served, guard, self._session_ended)))
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[listening]))
        while not self._uvicorn.started:
            if self._serving.done():
                problem = self._serving.exception()
                self._uvicorn = self._serving = None
                listening.close()
                raise ServerError(str(problem or "the HTTP server ended as it started"))
            await asyncio.sleep(0.01)
        self.url = f"http://{address_of(listening, host)}{path}"
        self._sweeper = asyncio.create_task(self._sweep_idle_worlds())
        log.info("serving MCP at %s", self.url)
        return self.url

    async def serve_stdio(self) -> None:
        """Serve the process's stdin and stdout (nothing else is written to stdout while
        it runs) until the client closes stdin. The call in flight then ends at once: it
        is recorded (interrupted) and saved within ``LEAVE_SECONDS``, whatever the engine
        is doing, since a client that leaves kills its server moments later."""
        from mcp.server.stdio import stdio_server
        from mcp.shared.message import SessionMessage

        route_library_logs()
        server = self._mcp(http=False)
        self._closing = False
        try:
            async with stdio_server() as (read, write), anyio.create_task_group() as group:
                mine, received = anyio.create_memory_object_stream[SessionMessage | Exception]()

                async def until_stdin_closes() -> None:
                    async with mine:
                        async for message in read:
                            await mine.send(message)
                    self._closing = True
                    await self._settle_all(LEAVE_SECONDS)
                    group.cancel_scope.cancel()

                group.start_soon(until_stdin_closes)
                await server.run(received, write, server.create_initialization_options())
                group.cancel_scope.cancel()
        finally:
            await self._settle_all(LEAVE_SECONDS)
            for connection in list(self._connections.values()):
                self._close(connection)

    async def stop(self, grace: float = STOP_SECONDS) -> None:
        """Stop every call (the agents get an interrupted result), save and close every
        connection's session, and stop serving. A call the engine has not recorded
        within ``grace`` seconds is recorded as interrupted all the same."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        await self._settle_all(grace)
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
        for connection in list(self._connections.values()):
            self._close(connection)
        if self._checker is not None:
            self._checker.shutdown(wait=False, cancel_futures=True)
            self._checker = None

    async def _settle_all(self, grace: float = STOP_SECONDS) -> None:
        """Stop every call in flight, give the engine ``grace`` seconds to record each,
        and record (interrupted) and save those it did not."""
        calls = list(self._calls)
        for call in calls:
            if call.held is not None:
                call.held.stop()
            call.run.stop()
        pending = [asyncio.ensure_future(c.settled.wait()) for c in calls]
        if pending:
            _done, late = await asyncio.wait(pending, timeout=grace)
            for task in late:
                task.cancel()
        for call in calls:
            if not call.settled.is_set():
                self._record_unfinished(call, ENDED_NOTE)

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
            # that speaks 2026-07-28 alone is served all the same (``_connection``).
            server.add_request_handler("server/discover", types.RequestParams, _no_discover)
        return server

    # -- connections -----------------------------------------------------------------------
    def _connection(self, ctx: Any, meta: Mapping[str, Any] | None = None) -> AgentConnection:
        """The connection a request belongs to, opened on its first request: the MCP
        session over HTTP, the world a 2026-07-28 client names (or its client's), the
        process over stdio."""
        request = ctx.request
        transport: Literal["stdio", "http"] = "stdio"
        key = STDIO_KEY
        modern = False
        if isinstance(request, Request):
            transport = "http"
            key = request.headers.get("mcp-session-id", "")
            if not key:
                modern = getattr(ctx, "protocol_version", "") in MODERN_PROTOCOL_VERSIONS
                if not modern:
                    raise MCPError(types.INVALID_REQUEST, HANDSHAKE_FIRST)
                key = _world_key(ctx, meta)
        found = self._connections.get(key)
        if found is not None and not found.closed:
            found.last_seen = time.monotonic()
            return found
        if self._closing:
            raise MCPError(types.INTERNAL_ERROR, "the simulated server is stopping")
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
        self._connections[key] = connection
        if transport == "http" and not modern:
            _on_session_end(ctx, functools.partial(self._session_ended, key, connection))
        log.info("%s connected over %s (%s)", connection.id, transport, client or "unnamed")
        self._emit(ConnectionOpened(connection))
        return connection

    def _open_worlds(self) -> int:
        return sum(1 for c in self._connections.values() if c.transport == "http")

    async def _sweep_idle_worlds(self) -> None:
        """End the 2026-07-28 worlds that had no request for ``idle_seconds`` (the SDK
        ends idle handshake sessions itself, and ``_session_ended`` hears of it)."""
        every = max(0.05, min(30.0, self.idle_seconds / 4))
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for key, connection in list(self._connections.items()):
                if connection.keyed and now - connection.last_seen >= self.idle_seconds:
                    self._session_ended(key, connection)

    def _session_ended(self, key: str, connection: AgentConnection | None = None) -> None:
        """The client's session ended (DELETE, the SDK's idle timeout, the server
        stopping): its connection is closed now, or once its call is recorded."""
        self._events.forget(key)
        found = self._connections.get(key)
        if found is None or (connection is not None and found is not connection):
            return
        if found.busy:
            found.connected = False
        else:
            self._close(found)

    def _close(self, connection: AgentConnection) -> None:
        for key, found in list(self._connections.items()):
            if found is connection:
                del self._connections[key]
        if connection.closed:
            return
        connection.connected, connection.closed = False, True
        if connection.session.turns:
            self._save(connection)
        connection.opened.close()
        self._emit(ConnectionClosed(connection))

    # -- the handlers ------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        request = ctx.request
        if not isinstance(request, Request) or request.headers.get("mcp-session-id"):
            self._connection(ctx)
        return types.ListToolsResult(tools=list(self.toolset.declared))

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        connection = self._connection(ctx, params.meta)
        name = params.name
        try:
            action = await self._checked(connection, name, params.arguments)
        except UnknownTool as exc:
            self._refused(connection, name, str(exc))
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except ActionError as exc:
            message = f"Input validation error: {exc}"
            self._refused(connection, name, message)
            return error_result(message)
        request = ctx.request if isinstance(ctx.request, Request) else None
        async with connection.turn_lock:
            return await self._answer(connection, name, action, request)

    async def _checked(
        self, connection: AgentConnection, name: str, arguments: Mapping[str, Any] | None
    ) -> Action:
        """``toolset.action`` on a worker thread: a hostile argument costs its own
        connection's time, never the loop's. The agent has its answer within
        ``check_seconds`` of wall-clock time; the check itself ends by then too, or, on a
        machine so busy that the pattern engine (which counts CPU time) has not had that
        much CPU yet, once it has. A connection's calls are checked one at a time, so
        one connection never holds more than one worker."""
        if self._checker is None:
            self._checker = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="mcp-check")
        check = functools.partial(_check, self.toolset, name, arguments, self.check_seconds)
        await connection.check_lock.acquire()
        future = asyncio.get_running_loop().run_in_executor(self._checker, check)

        def checked(done: asyncio.Future[Action]) -> None:
            connection.check_lock.release()
            if not done.cancelled():
                done.exception()  # seen here when the agent was answered without it

        future.add_done_callback(checked)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.check_seconds + 0.2)
        except TimeoutError:
            raise ActionError(too_costly(name, self.check_seconds), field="arguments") from None

    def _refused(self, connection: AgentConnection, tool: str, message: str) -> None:
        connection.refused += 1
        connection.last_refusal = message
        log.info("%s: refused a call of %s: %s", connection.id, tool[:100], message[:300])
        self._emit(CallRefused(connection, tool, message))

    async def _answer(
        self, connection: AgentConnection, tool: str, action: Action, request: Request | None
    ) -> types.CallToolResult:
        last = connection.call
        if last is not None and not last.settled.is_set():
            await last.settled.wait()  # a cancelled call ends a moment after its client left
        if self._closing:
            raise MCPError(types.INTERNAL_ERROR, "the simulated server is stopping")
        session = connection.session
        number, tool_call = connection.calls + 1, connection.per_tool[tool] + 1
        decisions = self.schedule.decide(tool, number, tool_call) if self.schedule else []
        own = session.control
        scheduled = joined_control(own, decisions)
        if scheduled is not None:
            session.control = scheduled
        try:
            run = self.simulator.send(
                session, action, owner=connection.id, home=home_on(asyncio.get_running_loop())
            )
        except SimulatorError as exc:
            session.control = own
            raise MCPError(types.INTERNAL_ERROR, f"the world model cannot answer: {exc}") from None
        if scheduled is not None:
            session.control = own if own is not None and own.persistent else None
        connection.calls, connection.per_tool[tool] = number, tool_call
        call = AgentCall(connection, tool, number, tool_call, run, decisions)
        connection.call = call
        self._calls.add(call)
        self._emit(TurnStarted(connection, call))
        try:
            answered, _final = await self._until_gone(run.result(), request)
        except BaseException:
            self._abandon(call, CANCELLED_NOTE)
            raise
        if not answered:
            self._abandon(call, GONE_NOTE)
            return error_result(INTERRUPTED)
        declared = self.toolset.tool(tool)
        asked = 1
        while (
            call.turn.status == "complete"
            and asked < OUTPUT_ASKS
            and not self._closing
            and output_problem(call.turn.observation, declared)
        ):
            asked += 1  # a result that breaks the output schema: ask once more
            try:
                call.run = self.simulator.retry(
                    session, owner=connection.id, home=home_on(asyncio.get_running_loop())
                )
            except SimulatorError:
                break
            self._emit(TurnStarted(connection, call))
            try:
                answered, _final = await self._until_gone(call.run.result(), request)
            except BaseException:
                self._abandon(call, CANCELLED_NOTE)
                raise
            if not answered:
                self._abandon(call, GONE_NOTE)
                return error_result(INTERRUPTED)
        turn = call.turn
        if turn.status == "interrupted":
            return self._deliver(call, error_result(INTERRUPTED), observation="")
        edited: str | None = None
        if connection.hold and not self._closing:
            if connection.hold != HOLD_EVERY:
                connection.hold -= 1
            self._save(connection)  # the prediction is on disk while the person decides
            answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
            call.held = HeldObservation(call, turn.observation, answer)
            call.state = "held"
            self._emit(ObservationHeld(connection, call.held))
            try:
                answered, edited = await self._until_gone(answer, request)
            except BaseException:
                self._abandon(call, CANCELLED_NOTE)
                raise
            if not answered:
                self._abandon(call, GONE_NOTE)
                return error_result(INTERRUPTED)
            if call.held.stopped:
                turn.status, turn.note = "interrupted", STOPPED_NOTE
                return self._deliver(call, error_result(INTERRUPTED), observation="")
        if edited is not None:
            turn.status, turn.note = "complete", EDITED_NOTE
            outcome = observation_result(edited, self.toolset.tool(tool))
            return self._deliver(call, outcome, observation=edited)
        if turn.status != "complete":
            problem = types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the world model could not answer: {turn.note or turn.status}",
            )
            self._deliver(call, problem, observation="")
            raise MCPError.from_error_data(problem)
        unfit_because = output_problem(turn.observation, declared)
        if unfit_because:
            turn.note = (
                f"the world model's result did not fit the tool's output schema "
                f"(asked {asked} times): {unfit_because}"
            )
            unfit = types.CallToolResult(
                content=[
                    types.TextContent(type="text", text=unfitting(unfit_because, asked)),
                    types.TextContent(type="text", text=turn.observation),
                ],
                is_error=True,
            )
            return self._deliver(call, unfit, observation=turn.observation)
        outcome = observation_result(turn.observation, declared)
        return self._deliver(call, outcome, observation=turn.observation)

    async def _until_gone(
        self, waited: Awaitable[T], request: Request | None
    ) -> tuple[bool, T | None]:
        """Wait for ``waited``; (False, None) when the HTTP client went away first. The
        connection is looked at only while the wait lasts, every poll interval."""
        if request is None:
            return True, await waited
        task = asyncio.ensure_future(waited)
        try:
            while True:
                await asyncio.wait((task,), timeout=DISCONNECT_POLL_SECONDS)
                if task.done():
                    return True, task.result()
                if await request.is_disconnected():
                    task.cancel()
                    return False, None
        except BaseException:
            task.cancel()
            raise

    def _deliver(
        self,
        call: AgentCall,
        outcome: types.CallToolResult | types.ErrorData,
        *,
        observation: str,
    ) -> types.CallToolResult:
        turn = call.turn
        predicted = turn.observation if call.held is None else call.held.predicted
        turn.observation = observation
        call.received = result_record(outcome)
        self._finish(call, predicted)
        if isinstance(outcome, types.ErrorData):
            return error_result(outcome.message)
        return outcome

    def _abandon(self, call: AgentCall, note: str) -> None:
        """The agent will get nothing: stop the turn, and once it is recorded, keep it as
        interrupted with an empty observation."""
        call.run.stop()

        def settle(_run: object = None) -> None:
            turn = call.turn
            predicted = turn.observation if call.held is None else call.held.predicted
            turn.observation, turn.status, turn.note = "", "interrupted", note
            call.received = None
            self._finish(call, predicted)

        if call.run.completed:
            settle()
        else:
            call.run.on_complete.append(settle)

    def _record_unfinished(self, call: AgentCall, note: str) -> None:
        """Keep a call the engine has not finished as interrupted, with what it had
        streamed, and save it now (a later end of its run changes nothing)."""
        turn = call.turn
        predicted = turn.observation if call.held is None else call.held.predicted
        turn.observation, turn.status, turn.note = "", "interrupted", note
        call.received = None
        self._finish(call, predicted)

    def _finish(self, call: AgentCall, predicted: str) -> None:
        if call.settled.is_set():
            return  # recorded already (the server stopping did not wait for the engine)
        turn = call.turn
        record: dict[str, Any] = {
            "connection": call.connection.id,
            "client": call.connection.client,
            "tool": call.tool,
            "call": call.number,
            "tool_call": call.tool_call,
            "received": call.received,
        }
        if call.decisions:
            record["schedule"] = [d.to_dict() for d in call.decisions]
        if predicted != turn.observation:
            record["predicted"] = predicted
        turn.stats = {**turn.stats, "agent": record}
        call.state = "answered" if call.received is not None else "undelivered"
        self._save(call.connection)
        self._calls.discard(call)
        call.settled.set()
        self._emit(CallAnswered(call.connection, call))
        if not call.connection.connected:
            self._close(call.connection)

    def _save(self, connection: AgentConnection) -> None:
        problem = connection.opened.save()
        connection.save_error = problem or ""
        if problem:
            log.warning("%s: the session was not saved: %s", connection.id, problem)

    # -- steering (on the server's loop) ---------------------------------------------------
    def connections(self) -> list[AgentConnection]:
        """The open connections, oldest first (a closed one is let go)."""
        return list(self._connections.values())

    def connection(self, connection_id: str) -> AgentConnection:
        for connection in self._connections.values():
            if connection.id == connection_id:
                return connection
        raise SteeringError(f"there is no connection {connection_id!r}")

    def subscribe(self, listener: Listener, connection_id: str = "") -> Callable[[], None]:
        """Call ``listener`` with every event (of one connection, when given), on the
        server's loop; returns what unsubscribes it."""
        entry = (listener, connection_id)
        self._listeners.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(entry)

        return unsubscribe

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
        return load_perturbations(self.toolset.domain.name)[0]

    def _emit(self, event: AgentEvent) -> None:
        connection_id = event.connection.id
        for listener, wanted in list(self._listeners):
            if wanted and wanted != connection_id:
                continue
            try:
                listener(event)
            except Exception:  # a listener's bug must never break an agent's call
                log.exception("an MCP event listener failed")


async def _no_discover(ctx: Any, params: types.RequestParams | None) -> types.DiscoverResult:
    raise MCPError(types.METHOD_NOT_FOUND, HANDSHAKE_FIRST)


def _check(
    toolset: Toolset, name: str, arguments: Mapping[str, Any] | None, seconds: float
) -> Action:
    try:
        with checking_within(seconds):
            return toolset.action(name, arguments)
    except CheckTimeout:
        raise ActionError(too_costly(name, seconds), field="arguments") from None


def _world_key(ctx: Any, meta: Mapping[str, Any] | None) -> str:
    """What keys a 2026-07-28 client's world over HTTP: the world it names in ``_meta``,
    or else its name and version (so one program's calls build on each other)."""
    named = (meta or {}).get(WORLD_META_KEY)
    if isinstance(named, str) and named.strip():
        return "world:" + " ".join(sanitize(named).split())[:200]
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
    text = " ".join(sanitize(f"{info.name} {info.version or ''}").split())
    return text[:80]
