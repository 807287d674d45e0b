"""The one guard in front of every network front-end (``mcp serve --transport http``, the
app's Ctrl+B, ``env serve``, ``serve``): where a server may listen, and which requests it
answers.

A web page the user visits may send requests and open WebSockets to any address, the
loopback included, and a page whose name was rebound to 127.0.0.1 (DNS rebinding) sends
its own name as the Host. So a server on the loopback answers only a Host that is a
loopback address or ``localhost`` at its own port, however it is spelled (``127.0.0.2``,
``[0:0:0:0:0:0:0:1]``, ``LOCALHOST.``), and no Origin but its own. Any other address needs
a token, and every request must then carry it (``Authorization: Bearer``, the scheme in
any case, or as the password of HTTP Basic, which is what a client sends for a URL like
``http://agent:TOKEN@host:port``). The same checks run for WebSocket handshakes.

``GuardedApp`` wraps an ASGI app (the MCP SDK's Starlette, openenv's FastAPI);
``Guard.refusal`` is the check itself, for servers of another kind (textual-serve's
aiohttp). ``bind`` takes the listening socket first, so that a port in use is one line
before anything else starts.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hmac
import ipaddress
import json
import logging
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("agentworld.guard")

WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})
TOKEN_HINT = "send it as Authorization: Bearer <token>"
LOGGED_PER_MINUTE = 20
"""Refusals written to the log in a minute; a page that keeps trying is counted, not
written out request by request."""


class GuardError(ValueError):
    """The server may not listen so; the message is one line."""


class ListenError(OSError):
    """The address cannot be listened on; the message is one line."""


# -- names and addresses -----------------------------------------------------------------------
def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an address, an IPv6 address with or without brackets)
    is this machine's loopback: ``localhost`` or any address of 127.0.0.0/8 and ::1, in
    any spelling."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name.endswith("."):
        name = name[:-1]
    if name == "localhost":
        return True
    address = _address(name)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def host_part(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    bare = host.strip("[]")
    address = _address(bare)
    return f"[{bare}]" if address is not None and address.version == 6 else host


def authority(text: str) -> tuple[str, int | None] | None:
    """The name and port of a Host header (``name``, ``name:port``, ``[v6]:port``), the
    name lowercased; None when it is not one."""
    if not text or text != text.strip() or any(c in text for c in "/\\@?#% \t"):
        return None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None
        name, rest = text[1:close], text[close + 1 :]
        if _address(name) is None or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, colon, port_text_or_empty = text.partition(":")
        if ":" in port_text_or_empty or not name:
            return None
        port_text = port_text_or_empty if colon else None
    if not name.isascii() or not all(c.isalnum() or c in ".-:" for c in name):
        return None
    if port_text is None:
        return name.lower(), None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name.lower(), int(port_text)


def token_of(header: str) -> str | None:
    """The token an Authorization header carries: ``Bearer TOKEN`` (any case of the
    scheme) or HTTP Basic with the token as the password; None otherwise."""
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if not value:
        return None
    if scheme.lower() == "bearer":
        return value
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        _user, colon, password = decoded.partition(":")
        return password if colon and password else None
    return None


def require_token(host: str, token: str, how: str = "set one") -> None:
    """Refuse to listen on another address than the loopback without a token."""
    if not token and not is_loopback(host):
        raise GuardError(
            f"listening on {host} needs a token: {how} (clients send it as "
            "Authorization: Bearer <token>), or listen on 127.0.0.1"
        )


# -- the check ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    """Why a request is not answered: ``status`` 403 (Host or Origin) or 401 (token)."""

    status: int
    message: str


UNKNOWN_HOST = Refusal(403, "refused: unknown Host: open the address the server printed")
OTHER_PAGE = Refusal(403, "refused: requests from other web pages are not answered")


class Guard:
    """Which requests a server listening on ``host``:``port`` answers (see the module's
    docstring). ``token`` ("" for none) is needed on any address but the loopback."""

    def __init__(self, host: str, port: int, token: str = "", token_hint: str = TOKEN_HINT):
        require_token(host, token)
        self.host = host
        self.port = port
        self.token = token
        self.loopback = is_loopback(host)
        self.no_token = Refusal(401, f"no valid token: {token_hint}")
        self._logged: deque[float] = deque()
        self._unlogged = 0

    def refusal(
        self, hosts: Sequence[str], origins: Sequence[str], tokens: Sequence[str]
    ) -> Refusal | None:
        """Why a request with these Host and Origin headers and these offered tokens
        (from its Authorization header, a query or a cookie) is refused, or None."""
        if len(hosts) != 1 or not self._host_allowed(hosts[0]):
            return UNKNOWN_HOST
        if len(origins) > 1 or (origins and not self._origin_allowed(origins[0], hosts[0])):
            return OTHER_PAGE
        if self.token and not any(self.matches(t) for t in tokens):
            return self.no_token
        return None

    def _host_allowed(self, header: str) -> bool:
        parsed = authority(header)
        if parsed is None:
            return False
        if not self.loopback:
            return True  # the token guards it; names and proxies in front vary
        name, port = parsed
        return is_loopback(name) and (port if port is not None else 80) == self.port

    def _origin_allowed(self, origin: str, host: str) -> bool:
        try:
            parts = urlsplit(origin)
            scheme = parts.scheme.lower()
            parsed = authority(parts.netloc)
        except ValueError:
            return False
        if scheme not in ("http", "https") or parsed is None or parts.path not in ("", "/"):
            return False
        name, port = parsed
        if self.loopback:
            return scheme == "http" and is_loopback(name) and (port or 80) == self.port
        served = authority(host)
        if served is None:
            return False
        default = 443 if scheme == "https" else 80
        return name == served[0] and (port or default) == (served[1] or default)

    def matches(self, given: str) -> bool:
        """Whether ``given`` is the token (in constant time)."""
        if not self.token or not given or not given.isascii():
            return False
        return hmac.compare_digest(given.encode("ascii"), self.token.encode("ascii"))

    def note(
        self, refusal: Refusal, what: str, hosts: Sequence[str], origins: Sequence[str]
    ) -> None:
        """Log a refusal (a bounded number a minute; the rest are counted)."""
        now = time.monotonic()
        while self._logged and now - self._logged[0] > 60:
            self._logged.popleft()
        if len(self._logged) >= LOGGED_PER_MINUTE:
            self._unlogged += 1
            return
        self._logged.append(now)
        more = f" ({self._unlogged} more refused before)" if self._unlogged else ""
        self._unlogged = 0
        log.warning(
            "%s (%s; Host %s, Origin %s)%s",
            refusal.message,
            what[:200],
            _shown(hosts),
            _shown(origins),
            more,
        )


def _shown(values: Sequence[str]) -> str:
    return ", ".join(repr(v[:120]) for v in values) or "none"


# -- ASGI --------------------------------------------------------------------------------------
class GuardedApp:
    """An ASGI app that lets through only what ``guard`` allows: HTTP requests and
    WebSocket handshakes alike (refused with 403 or 401 and a JSON ``detail``)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts: list[str] = []
        origins: list[str] = []
        tokens: list[str] = []
        for name, value in scope.get("headers") or []:
            lowered = name.lower()
            if lowered == b"host":
                hosts.append(value.decode("latin-1"))
            elif lowered == b"origin":
                origins.append(value.decode("latin-1"))
            elif lowered == b"authorization":
                given = token_of(value.decode("latin-1"))
                if given is not None:
                    tokens.append(given)
        refusal = self.guard.refusal(hosts, origins, tokens)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self.guard.note(refusal, f"{kind} {scope.get('path', '')}", hosts, origins)
        if kind == "http":
            await _answer(send, "http.response", refusal)
        elif "websocket.http.response" in (scope.get("extensions") or {}):
            await receive()  # the handshake's websocket.connect
            await _answer(send, "websocket.http.response", refusal)
        else:
            await receive()
            await send({"type": "websocket.close", "code": 1008})


async def _answer(send: Send, kind: str, refusal: Refusal) -> None:
    body = json.dumps({"detail": refusal.message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="agentworld"'))
    await send({"type": f"{kind}.start", "status": refusal.status, "headers": headers})
    await send({"type": f"{kind}.body", "body": body})


# -- listening ---------------------------------------------------------------------------------
def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port); ListenError in one line."""
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
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
    """``host:port`` of a listening socket as a URL writes it: the address it is bound to."""
    port = sock.getsockname()[1]
    return f"{host_part(host or '0.0.0.0')}:{port}"


def reachable_hint(host: str, port: int, path: str = "") -> str:
    """For an address that is every address of the machine, how to reach it, in words
    (an empty string for any other address)."""
    if host not in WILDCARDS:
        return ""
    return (
        f"every address of this machine: http://127.0.0.1:{port}{path} from here, "
        f"http://{socket.gethostname()}:{port}{path} from others"
    )
