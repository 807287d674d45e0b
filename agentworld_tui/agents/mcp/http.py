"""Streamable HTTP around the SDK's app: the shared guard in front of it, the end of each
MCP session, and uvicorn running inside an event loop that is not its own (the app's).

The socket is bound before anything else starts (``agents.guard.bind``), so a port in use
is one line before a model loads. Host, Origin and the token are checked by
``agents.guard`` for every request, as for every network front-end; the SDK's own
DNS-rebinding check, which knows only the exact strings 127.0.0.1, localhost and ::1, is
left off.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentworld_tui.agents.guard import (
    Guard,
    GuardedApp,
    ListenError,
    address_of,
    bind,
    is_loopback,
)

__all__ = [
    "EmbeddedServer",
    "Gate",
    "Guard",
    "ListenError",
    "address_of",
    "bind",
    "is_loopback",
    "uvicorn_config",
]

SESSION_HEADER = b"mcp-session-id"


class Gate:
    """The ASGI app in front of the SDK's: the guard, and the end of each MCP session
    (a client's DELETE) reported to ``on_end``."""

    def __init__(
        self, app: ASGIApp, guard: Guard, on_end: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.on_end = on_end
        self.guarded = GuardedApp(self._watched, guard)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.guarded(scope, receive, send)

    async def _watched(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        session = headers.get(SESSION_HEADER, b"").decode("latin-1")
        if scope.get("method") != "DELETE" or not session or self.on_end is None:
            await self.app(scope, receive, send)
            return
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watch)
        if 200 <= status < 300:
            self.on_end(session)


class EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves the process's signals to whoever owns the loop (the app, the
    command line) and never exits the process when it cannot start."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().serve(sockets)
        except SystemExit:  # uvicorn's way to say the start failed
            self.should_exit = True
            raise ListenError("the HTTP server could not start (see the log)") from None


def uvicorn_config(app: ASGIApp) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
    )
