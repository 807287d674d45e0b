"""textual-serve's Server, guarded: the shared guard (``agents.guard``), the run's token, and
a bound on sessions.

Unguarded, any web page the user visits could open a WebSocket to the server (browsers do
not stop cross-origin WebSockets), list and open saved sessions and send actions, and
every connection started an app with its own copy of the model. Here every request needs
the run's token (in the printed URL, then in a cookie, or as ``Authorization: Bearer``), a
Host and Origin the guard allows (the loopback in any spelling, at the server's port;
against DNS rebinding and other pages), and at most ``max_sessions`` apps run at once.
Imported only by ``agentworld serve``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from typing import Any

import aiohttp_jinja2
from aiohttp import WSCloseCode, web
from textual_serve.server import Server, to_int

from agentworld_tui.agents.guard import Guard, token_of
from agentworld_tui.world.plural import counted


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
        self.guard = Guard(
            host,
            port,
            token,
            token_hint="open the address with the token that `agentworld serve` printed",
        )
        self.cookie = f"agentworld-token-{port}"

    def serve_on(self, sock: socket.socket) -> None:
        """textual-serve's ``serve``, on a socket bound already (so that a port in use is
        said before the address is printed)."""
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        web.run_app(
            self._make_app(),
            sock=sock,
            handle_signals=False,
            loop=loop,
            print=lambda *_args: None,
        )

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
                return refusal
            response: web.StreamResponse = await handler(request)
            cookie = request.cookies.get(self.cookie, "")
            if not response.prepared and not self.guard.matches(cookie):
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
    def refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a request the guard refuses, or None."""
        hosts = request.headers.getall("Host", [])
        origins = request.headers.getall("Origin", [])
        offered = [request.query.get("token", ""), request.cookies.get(self.cookie, "")]
        offered += [t for h in request.headers.getall("Authorization", []) if (t := token_of(h))]
        refusal = self.guard.refusal(hosts, origins, [t for t in offered if t])
        if refusal is None:
            return None
        self.guard.note(refusal, f"{request.method} {request.path}", hosts, origins)
        headers = {"WWW-Authenticate": 'Bearer realm="agentworld"'} if refusal.status == 401 else {}
        return web.Response(
            status=refusal.status, text=f"agentworld serve: {refusal.message}\n", headers=headers
        )

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
