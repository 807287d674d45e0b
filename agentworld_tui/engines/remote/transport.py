"""The remote engine's one HTTP client: the standard library's ``http.client``.

Every request the engine makes goes through here: the model list, llama.cpp's ``/props``,
vLLM's ``/tokenize``, and the answer's stream (``events``). With many environments
stepping at once the client's CPU is most of a step's; side by side, httpx, the openai SDK
and aiohttp each cost more of it than this client on the thread that reads, enough to
miss benchmark 7's target (BENCHMARKS.md says by how much).

``Connections`` keeps a server's connections alive for the next request (no TCP or TLS
handshake per turn), takes the proxy the environment names (``HTTPS_PROXY``,
``HTTP_PROXY``, ``NO_PROXY``), and hands a request's socket to whoever may have to end it
from another thread (``events``). What a server sends is bounded: a reply at
``MAX_BODY_BYTES`` and in time, an error body cut at ``MAX_ERROR_BYTES``, a line of the
stream at ``MAX_LINE_BYTES``; a compressed body is never unpacked (identity is asked for).

A failure is a ``ServerFailure``: ``errors.describe`` says what it means.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

MAX_BODY_BYTES = 8 << 20
"""The most a reply other than the answer's stream may hold (a model list, /props)."""
MAX_ERROR_BYTES = 64 << 10
"""An error reply's body is cut here."""
MAX_LINE_BYTES = 4 << 20
"""The longest line of the answer's event stream (one chunk, however much it holds)."""
READ_BYTES = 64 << 10
"""The most one read takes from the connection."""
KEEP_IDLE = 64
"""Idle connections kept for the next requests, at most."""
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
"""How a kept connection the server has closed meanwhile fails its next request."""


# -- what can go wrong ------------------------------------------------------------------------
class ServerFailure(Exception):
    """A request that did not get its answer."""


class Unreachable(ServerFailure):
    """The connection could not be made, or broke; the cause is chained."""

    def __init__(self) -> None:
        super().__init__("connection error")


class TimedOut(ServerFailure):
    """The server sent nothing for the request's read timeout."""

    def __init__(self) -> None:
        super().__init__("timed out")


class ReplyRefused(ServerFailure):
    """A reply broke one of the bounds; the message completes "<server> ..."."""


class StatusError(ServerFailure):
    """The server answered an HTTP status of 300 or more.

    ``body`` is the server's error object (``error`` of a JSON body that has one, else the
    JSON value, else the text), ``text`` the body as sent (cut at ``MAX_ERROR_BYTES``),
    ``location`` where a redirect points.
    """

    def __init__(self, status: int, text: str, location: str = "") -> None:
        self.status = status
        self.text = text
        self.location = location
        body: Any = text.strip()
        with contextlib.suppress(ValueError):
            body = json.loads(body)
        self.body: Any = body.get("error", body) if isinstance(body, dict) else body
        message = f"Error code: {status}"
        said = self.body.get("message") if isinstance(self.body, dict) else None
        if isinstance(said, str) and said:
            message += f" - {said}"
        self.message = message
        super().__init__(message)


class ErrorEvent(ServerFailure):
    """The server reported an error inside the answer's stream; ``body`` is its error."""

    def __init__(self, body: Any) -> None:
        said = body.get("message") if isinstance(body, dict) else None
        self.body = body
        self.message = said if isinstance(said, str) and said else "an error in the stream"
        super().__init__(self.message)


def failure(exc: BaseException) -> ServerFailure:
    """What an exception of the standard library's client stands for: a timeout, or a
    connection that failed (the caller chains ``exc`` to it)."""
    return TimedOut() if isinstance(exc, TimeoutError) else Unreachable()


# -- connections ------------------------------------------------------------------------------
@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every connection uses (loading the certificate store costs tens
    of milliseconds of CPU): the system's store, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``; on
    macOS and Windows the system's own trust store (truststore)."""
    if sys.platform in ("darwin", "win32"):
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return ssl.create_default_context()


def _proxy_for(url: str) -> tuple[str, int, str] | None:
    """The proxy the environment names for ``url`` (host, port, its Proxy-Authorization
    value or ""), or None."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    named = proxies.get(parts.scheme) or proxies.get("all")
    if not named:
        return None
    proxy = urlsplit(named if "://" in named else f"http://{named}")
    if not proxy.hostname:
        return None
    auth = ""
    if proxy.username is not None:
        pair = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
        auth = "Basic " + base64.b64encode(pair).decode()
    return proxy.hostname, proxy.port or 80, auth


class Connections:
    """The connections to one server (``url``'s scheme, host and port), kept alive after a
    reply read to its end for the next request. Safe to share between threads."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.tls = tls_context() if self.https else None
        self._proxy = _proxy_for(url)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def target(self, url: str) -> str:
        """What a request names: the path, or the whole URL through an HTTP proxy."""
        if self._proxy is not None and not self.https:
            return url
        parts = urlsplit(url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def headers(self) -> dict[str, str]:
        """The headers every request sends: identity (a compressed body is never unpacked)
        and, through a plain HTTP proxy, its credentials."""
        sent = {"Accept-Encoding": "identity"}
        if self._proxy is not None and not self.https and self._proxy[2]:
            sent["Proxy-Authorization"] = self._proxy[2]
        return sent

    def send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        connected: Callable[[http.client.HTTPConnection], None] | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request and read its reply's headers, on a kept connection or a new one.

        ``connected`` is called with the connection before the request goes out (to hand
        its socket to whoever may end it; it may raise to stop). Kept connections the
        server closed meanwhile are passed over, one after the other (answers on other
        threads may give theirs back meanwhile), until a new one is used. Raises a ``ServerFailure``; the
        connection is closed then.
        """
        while True:
            connection, kept = self._take(connect_timeout)
            try:
                if not kept:
                    connection.connect()
                connection.sock.settimeout(read_timeout)
                if connected is not None:
                    connected(connection)
                sent = {**self.headers(), **headers}
                connection.request(method, self.target(url), body=body, headers=sent)
                return connection, connection.getresponse()
            except ServerFailure:
                connection.close()
                raise
            except _STALE as exc:
                connection.close()
                if kept:
                    continue
                raise failure(exc) from exc
            except Exception as exc:
                connection.close()
                raise failure(exc) from exc

    def give(self, connection: http.client.HTTPConnection) -> None:
        """Keep a connection whose reply was read to its end, for the next request."""
        with self._lock:
            if len(self._idle) < KEEP_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self, connect_timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """A kept connection (True) or a new one, not connected yet (False)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        host, port = (self._proxy[0], self._proxy[1]) if self._proxy else (self.host, self.port)
        connection: http.client.HTTPConnection
        if self.https:
            connection = http.client.HTTPSConnection(
                host, port, timeout=connect_timeout, context=self.tls
            )
            if self._proxy is not None:
                tunnel = {"Proxy-Authorization": self._proxy[2]} if self._proxy[2] else None
                connection.set_tunnel(self.host, self.port, headers=tunnel)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=connect_timeout)
        return connection, False


# -- replies ----------------------------------------------------------------------------------
def read_body(
    response: http.client.HTTPResponse, limit: int, *, cut: bool, deadline_s: float | None
) -> bytes:
    """A reply's body, bounded in size (cut short, or refused past ``limit``) and in time
    (``deadline_s`` from now; None: only each read's own timeout)."""
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    parts: list[bytes] = []
    size = 0
    while part := response.read1(READ_BYTES):
        if deadline is not None and time.monotonic() > deadline:
            raise ReplyRefused(f"took more than {deadline_s:g} s to send its reply")
        size += len(part)
        if size > limit:
            if cut:
                parts.append(part[: len(part) - (size - limit)])
                break
            raise ReplyRefused(f"sent a reply longer than {limit >> 20} MiB")
        parts.append(part)
    else:
        response.read()  # nothing is left: the reply is closed and its connection free
    return b"".join(parts)


def status_error(response: http.client.HTTPResponse, *, deadline_s: float | None) -> StatusError:
    """The failure a reply of status 300 or more stands for, its body read (cut short)."""
    content = read_body(response, MAX_ERROR_BYTES, cut=True, deadline_s=deadline_s)
    location = response.getheader("Location", "") if response.status < 400 else ""
    return StatusError(response.status, content.decode("utf-8", "replace"), location)


def fetch_json(
    connections: Connections,
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: Mapping[str, str],
    connect_timeout: float,
    read_timeout: float,
) -> Any:
    """One request whose reply is a JSON value, read whole within its bounds: the reply
    may take ``read_timeout`` for its headers, then as long again for its body."""
    sent = dict(headers)
    content = None
    if body is not None:
        content = json.dumps(body, ensure_ascii=False).encode()
        sent["Content-Type"] = "application/json"
    sent["Accept"] = "application/json"
    connection, response = connections.send(
        method,
        url,
        content,
        sent,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )
    refusal: StatusError | None = None
    data = b""
    try:
        if response.status >= 300:
            refusal = status_error(response, deadline_s=read_timeout)
        else:
            data = read_body(response, MAX_BODY_BYTES, cut=False, deadline_s=read_timeout)
    except ServerFailure:
        connection.close()
        raise
    except Exception as exc:
        connection.close()
        raise failure(exc) from exc
    if response.isclosed() and not response.will_close:
        connections.give(connection)
    else:
        connection.close()
    if refusal is not None:
        raise refusal
    try:
        return json.loads(data)
    except ValueError:
        raise ReplyRefused("sent a reply that is not JSON") from None
