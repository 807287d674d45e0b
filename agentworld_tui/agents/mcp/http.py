"""Streamable HTTP around the SDK's app: the listening socket, the bearer token, and
uvicorn running inside an event loop that is not its own (the app's).

The socket is bound before anything else starts, so a port in use is one line before a
model loads. On 127.0.0.1 (or ::1, localhost) the SDK's DNS-rebinding protection checks
Host and Origin; any other address needs a bearer token the user set, checked on every
request.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import ipaddress
import json
import socket
from collections.abc import Callable, Iterator

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost",)
SESSION_HEADER = b"mcp-session-id"


class ListenError(OSError):
    """The address cannot be listened on; the message is one line."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port)."""
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    family, _kind, _proto, _name, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"cannot listen on {host}:{port}: the port is in use (pick another with --port)"
            ) from None
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def address_of(sock: socket.socket, host: str) -> str:
    """``host:port`` as a client writes it in a URL."""
    port = sock.getsockname()[1]
    shown = "localhost" if host in ("0.0.0.0", "::", "") else host.strip("[]")
    if ":" in shown:
        shown = f"[{shown}]"
    return f"{shown}:{port}"


class Gate:
    """The ASGI app in front of the SDK's: the bearer token, and the end of each MCP
    session (a client's DELETE) reported to ``on_end``."""

    def __init__(
        self, app: ASGIApp, token: str, on_end: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else b""
        self.on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.expected and not hmac.compare_digest(
            headers.get(b"authorization", b""), self.expected
        ):
            await _refuse(send)
            return
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


async def _refuse(send: Send) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="agentworld"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
