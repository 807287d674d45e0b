"""textual-serve's Server, guarded: a token, the Host and Origin, and a bound on sessions.

Unguarded, any web page the user visits could open a WebSocket to the server (browsers do
not stop cross-origin WebSockets), list and open saved sessions and send actions, and
every connection started an app with its own copy of the model. Here every request needs
the run's token (in the printed URL, then in a cookie), a Host that is the served address
or a loopback name (against DNS rebinding), and no Origin but the server's own; and at most
``max_sessions`` apps run at once. Imported only by ``agentworld serve``.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import socket
from typing import Any

import aiohttp_jinja2
from aiohttp import WSCloseCode, web
from textual_serve.server import Server, to_int

from agentworld_tui.world.plural import counted

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "")


def host_part(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` headers the server answers: its address and the loopback names (and,
    bound to every address, this machine's own names)."""
    names = {host_part(host), *LOOPBACK}
    if host in WILDCARDS:
        names.discard(host_part(host))
        names |= machine_names()
    hosts = {f"{name.lower()}:{port}" for name in names}
    if port == 80:
        hosts |= {name.lower() for name in names}
    return frozenset(hosts)


def machine_names() -> set[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        addresses = socket.getaddrinfo(socket.gethostname(), None)
        names |= {host_part(str(info[4][0])) for info in addresses}
    return {n for n in names if n}


class GuardedServer(Server):
    """A textual-serve Server that only the holder of the token, on a page it served
    itself, can use, for at most ``max_sessions`` apps at once."""

    def __init__(
        self, command: str, *, host: str, port: int, token: str, max_sessions: int
    ) -> None:
        super().__init__(command, host=host, port=port, title="agentworld")
        self.token = token
        self.max_sessions = max_sessions
        self.sessions = 0
        self.hosts = allowed_hosts(host, port)
        self.origins = frozenset(f"http://{h}" for h in self.hosts)
        self.cookie = f"agentworld-token-{port}"

    # -- textual-serve's hooks ------------------------------------------------------------
    def initialize_logging(self) -> None:
        """textual-serve's records go to agentworld.log, not the terminal."""
        served = logging.getLogger("textual-serve")
        served.handlers[:] = logging.getLogger("agentworld").handlers
        served.propagate = False
        served.setLevel(logging.INFO)

    async def on_startup(self, app: web.Application) -> None:
        """No banner: ``serve`` prints the address, with its token, itself."""

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()

        @web.middleware
        async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
            refusal = self.refusal(request)
            if refusal is not None:
                logging.getLogger("agentworld.serve").warning(
                    "refused %s %s: %s", request.method, request.path, refusal
                )
                return web.Response(status=403, text=f"agentworld serve: {refusal}\n")
            response: web.StreamResponse = await handler(request)
            if not response.prepared and not self._matches(request.cookies.get(self.cookie)):
                response.set_cookie(
                    self.cookie, self.token, httponly=True, samesite="Strict", path="/"
                )
            return response

        app.middlewares.append(guard)
        return app

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """The page, its links made from the address the browser used (which the guard
        checked), so that the token's cookie goes with the page's WebSocket."""
        base = f"http://{request.host}"
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"ws://{request.host}{request.app.router['websocket'].url_for()}",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self.sessions >= self.max_sessions:
            return await self._refuse_session(request)
        self.sessions += 1
        try:
            return await super().handle_websocket(request)
        finally:
            self.sessions -= 1

    # -- the checks -----------------------------------------------------------------------
    def refusal(self, request: web.Request) -> str | None:
        """Why ``request`` is refused, or None."""
        host = request.headers.get("Host", "").lower()
        if host not in self.hosts:
            return "unknown Host: open the address that `agentworld serve` printed"
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in self.origins:
            return "requests from other web pages are refused"
        given = request.query.get("token") or request.cookies.get(self.cookie)
        if not self._matches(given):
            return "no valid token: open the address with the token that `agentworld serve` printed"
        return None

    def _matches(self, given: str | None) -> bool:
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    async def _refuse_session(self, request: web.Request) -> web.WebSocketResponse:
        """Accept the WebSocket only to say, in the page's terminal, why no app starts."""
        verb = "is" if self.max_sessions == 1 else "are"
        message = (
            f"agentworld serve: {counted(self.max_sessions, 'session')} {verb} already open, "
            "the most this server runs at once (each loads its own copy of the model). "
            "Close the other tab, or start serve with --max-sessions N."
        )
        logging.getLogger("agentworld.serve").warning("refused a session: %d open", self.sessions)
        websocket = web.WebSocketResponse()
        await websocket.prepare(request)
        await websocket.send_bytes(message.encode("utf-8") + b"\r\n")
        await websocket.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"too many sessions")
        return websocket
