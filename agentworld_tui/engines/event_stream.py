"""The answer's stream: one POST through the standard library's HTTP client, read as JSON.

The answer is the one request a step makes that streams, and with many environments
stepping at once its client's CPU is most of a step's. Measured side by side on a 2-core
machine, 256 clients each asking 5 times a server of 256 slots that answers after 2 s
(``bench/env.py``'s server), as a fraction of that server's limit: the standard library's
``http.client`` on a thread per request 0.98, ``httpx`` on threads 0.94, ``aiohttp`` 0.95-0.96,
``httpx`` on asyncio 0.87. So the stream goes out through ``http.client`` on the thread that
reads it, and every other request (the model list, ``/props``, ``/tokenize``) through the
SDK's client (``bounded_http``).

What a server sends is bounded here as there: a line of the stream at ``MAX_LINE_BYTES``,
an error body at ``MAX_ERROR_BYTES``. ``interrupt`` ends the connection at once from any
thread (a stop, a silent server): the read blocked on it returns. The failures are the
SDK's exception types (``openai.APIStatusError`` and its subclasses, ``APITimeoutError``,
``APIConnectionError``, ``APIError`` for an error event), so that ``RemoteEngine`` tells
them apart whichever client made the request. Proxies come from the environment
(``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), as the SDK's client takes them.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import socket
import threading
import urllib.request
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import httpx2
import openai

from agentworld_tui.engines.bounded_http import (
    MAX_ERROR_BYTES,
    MAX_LINE_BYTES,
    ReplyRefused,
    tls_context,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Connections", "EventStream", "sse_data", "status_error"]

READ_BYTES = 64 << 10
"""The most one read of the stream takes from the connection."""
KEEP_IDLE = 64
"""Idle connections kept for the next answers, at most."""
_BODY_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
"""How a kept connection the server has closed meanwhile fails its next request."""

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The data of each event of a ``text/event-stream`` body, in order.

    Lines end in LF or CRLF; ``data:`` lines of one event are joined with LF; comments,
    ``event:``, ``id:`` and ``retry:`` lines are read past (a chat completion's events
    are told apart by their JSON, not their names).
    """
    parts: list[bytes] = []
    data: list[str] = []
    for chunk in chunks:
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        parts.append(chunk)
        lines = b"".join(parts).split(b"\n")
        parts = [lines.pop()]
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                value = line[6:] if line.startswith(b"data: ") else line[5:]
                data.append(value.decode("utf-8", "replace"))
    rest = b"".join(parts).rstrip(b"\r")
    if rest.startswith(b"data:"):
        data.append(
            (rest[6:] if rest.startswith(b"data: ") else rest[5:]).decode("utf-8", "replace")
        )
    if data:
        yield "\n".join(data)


class Connections:
    """The connections of one server's answers: kept alive after an answer read to its
    end, for the next one (no new TCP or TLS handshake). Safe to share between threads."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.url = url
        self._proxy = _proxy_for(url)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def target(self) -> str:
        """What a request names: the path, or the whole URL through an HTTP proxy."""
        if self._proxy is not None and not self.https:
            return self.url
        parts = urlsplit(self.url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def proxy_headers(self) -> dict[str, str]:
        if self._proxy is None or self.https or not self._proxy[2]:
            return {}
        return {"Proxy-Authorization": self._proxy[2]}

    def take(self, connect_timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """A kept connection (True) or a new one, not connected yet (False)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        host, port = (self._proxy[0], self._proxy[1]) if self._proxy else (self.host, self.port)
        connection: http.client.HTTPConnection
        if self.https:
            connection = http.client.HTTPSConnection(
                host, port, timeout=connect_timeout, context=tls_context()
            )
            if self._proxy is not None:
                tunnel = {"Proxy-Authorization": self._proxy[2]} if self._proxy[2] else None
                connection.set_tunnel(self.host, self.port, headers=tunnel)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=connect_timeout)
        return connection, False

    def give(self, connection: http.client.HTTPConnection) -> None:
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


def _proxy_for(url: str) -> tuple[str, int, str] | None:
    """The proxy the environment names for ``url`` (host, port, its Proxy-Authorization
    value or ""), or None."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    named = urllib.request.getproxies().get(parts.scheme) or urllib.request.getproxies().get("all")
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


class EventStream:
    """One answer: ``open`` sends the request and waits for the server's headers, then
    iterating gives the events as the JSON values the server sent, until ``[DONE]``.

    ``interrupt`` (from any thread) ends the connection at once, unless the answer has
    ended; ``close`` gives a connection whose answer was read to its end back to be kept.
    """

    def __init__(
        self,
        connections: Connections,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str],
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self._connections = connections
        self._body = json.dumps(body, ensure_ascii=False).encode()
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
            **connections.proxy_headers(),
            **headers,
        }
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._connection: http.client.HTTPConnection | None = None
        self._socket: socket.socket | None = None
        """The connection's socket: ``http.client`` lets go of it once a reply that ends the
        connection has come, and that reply's body is still read through it."""
        self._response: http.client.HTTPResponse | None = None
        self._lock = threading.Lock()
        self._interrupted = False
        self._ended = False

    @functools.cached_property
    def request(self) -> httpx2.Request:
        """The request as the SDK's exceptions name it (made only for one: 0.15 ms)."""
        return httpx2.Request("POST", self._connections.url)

    # -- from any thread -------------------------------------------------------------------
    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            sock = self._socket
            if self._ended or sock is None:
                return
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # -- on the reading thread -------------------------------------------------------------
    def open(self) -> None:
        """Send the request and read the reply's headers; raises the SDK's exception for a
        refusal, a timeout or a connection that failed."""
        while True:  # a kept connection the server closed: again, until a new one is used
            connection, kept = self._connections.take(self._connect_timeout)
            with self._lock:
                self._connection = connection
            try:
                if not kept:
                    connection.connect()
                    connection.sock.settimeout(self._read_timeout)
                with self._lock:
                    self._socket = connection.sock
                self._check_interrupted()
                connection.request(
                    "POST", self._connections.target(), body=self._body, headers=self._headers
                )
                response = connection.getresponse()
            except _STALE as exc:
                self._drop()
                if kept and not self._interrupted:
                    continue
                raise self._failure(exc) from exc
            except Exception as exc:
                self._drop()
                raise self._failure(exc) from exc
            break
        self._response = response
        if response.status >= 400:
            try:
                content = response.read(MAX_ERROR_BYTES)
            except Exception as exc:
                raise self._failure(exc) from exc
            finally:
                self._drop()
            raise status_error(
                httpx2.Response(
                    response.status,
                    # The body as sent: a compressed one stays unread, never unpacked.
                    headers=[
                        (name, value)
                        for name, value in response.getheaders()
                        if name.lower() not in _BODY_HEADERS
                    ],
                    content=content,
                    request=self.request,
                )
            )

    def __iter__(self) -> Iterator[Any]:
        try:
            for data in sse_data(self._chunks()):
                if data.startswith("[DONE]"):
                    self._finish()
                    break
                value = json.loads(data)
                if isinstance(value, dict) and value.get("error"):
                    raise _stream_error(value["error"], self.request)
                yield value
        except (openai.APIError, ReplyRefused, ValueError):
            raise
        except Exception as exc:
            raise self._failure(exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Keep the connection of an answer read to its end; close any other."""
        with self._lock:
            ended = self._ended and not self._interrupted
            connection, self._connection = self._connection, None
        if connection is None:
            return
        response = self._response
        if ended and response is not None and response.isclosed() and not response.will_close:
            self._connections.give(connection)
        else:
            connection.close()

    def _chunks(self) -> Iterator[bytes]:
        """The body's bytes as they come; a line longer than ``MAX_LINE_BYTES`` is
        refused before it is buffered."""
        response = self._response
        assert response is not None, "open() first"
        line = 0
        while True:
            part = response.read1(READ_BYTES)
            if not part:
                with self._lock:
                    self._ended = True
                return
            newline = part.rfind(b"\n")
            line = len(part) - newline - 1 if newline >= 0 else line + len(part)
            if line > MAX_LINE_BYTES:
                raise ReplyRefused(
                    f"sent a line of its stream longer than {MAX_LINE_BYTES >> 20} MiB"
                )
            yield part

    def _finish(self) -> None:
        """After ``[DONE]``: read what is left of the body (a chunked body's end), so the
        connection can carry the next answer."""
        response = self._response
        if response is None:
            return
        with contextlib.suppress(Exception):
            while response.read1(READ_BYTES):
                pass
            with self._lock:
                self._ended = True

    def _check_interrupted(self) -> None:
        if self._interrupted:
            raise ConnectionAbortedError("the request was stopped")

    def _drop(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _failure(self, exc: BaseException) -> openai.APIError | ReplyRefused:
        if isinstance(exc, openai.APIError | ReplyRefused):
            return exc
        if isinstance(exc, TimeoutError):
            return openai.APITimeoutError(request=self.request)
        return openai.APIConnectionError(request=self.request)


def status_error(response: httpx2.Response) -> openai.APIStatusError:
    """The SDK's exception for a refusal, with the server's JSON (its ``error`` object when
    it has one) as the body, as the SDK itself raises it."""
    message = f"Error code: {response.status_code}"
    text = response.text.strip()
    body: Any = text
    with contextlib.suppress(ValueError):
        body = json.loads(text)
    error = body.get("error", body) if isinstance(body, dict) else body
    said = error.get("message") if isinstance(error, dict) else None
    if isinstance(said, str) and said:
        message += f" - {said}"
    status = response.status_code
    kind = _STATUS_ERRORS.get(status)
    if kind is None:
        kind = openai.InternalServerError if status >= 500 else openai.APIStatusError
    return kind(message, response=response, body=error)


def _stream_error(error: Any, request: httpx2.Request) -> openai.APIError:
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = "An error occurred during streaming"
    return openai.APIError(message, request, body=error)
