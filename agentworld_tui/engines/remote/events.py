"""The answer's stream: one POST whose reply is a ``text/event-stream``, read as JSON values.

The request goes out through the engine's connections (``transport``) and is read on the
thread of its generation. ``interrupt`` ends it at once from any thread (a stop, a silent
server: ``watch``): the read blocked on the connection returns. A line of the stream is
bounded at ``MAX_LINE_BYTES``; an error reply's body is cut short.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agentworld_tui.engines.remote.transport import (
    MAX_LINE_BYTES,
    READ_BYTES,
    Connections,
    ErrorEvent,
    ReplyRefused,
    ServerFailure,
    failure,
    status_error,
)

__all__ = ["EventStream", "sse_data"]


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


class EventStream:
    """One answer: ``open`` sends the request and waits for the server's headers, then
    iterating gives the events as the JSON values the server sent, until ``[DONE]``.

    ``interrupt`` (from any thread) ends the connection at once, unless the answer has
    ended; ``close`` gives a connection whose answer was read to its end back to be kept.
    Failures are ``ServerFailure``s; an error event is an ``ErrorEvent``.
    """

    def __init__(
        self,
        connections: Connections,
        url: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str],
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self._connections = connections
        self._url = url
        self._body = json.dumps(body, ensure_ascii=False).encode()
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
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
        """Send the request and read the reply's headers; raises a ``ServerFailure`` for a
        refusal, a timeout or a connection that failed."""
        _connection, response = self._connections.send(
            "POST",
            self._url,
            self._body,
            self._headers,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            connected=self._connected,
        )
        self._response = response
        if response.status >= 300:
            try:
                refusal = status_error(response, deadline_s=None)
            except ServerFailure:
                raise
            except Exception as exc:
                raise failure(exc) from exc
            finally:
                self._drop()
            raise refusal

    def __iter__(self) -> Iterator[Any]:
        try:
            for data in sse_data(self._chunks()):
                if data.startswith("[DONE]"):
                    self._finish()
                    break
                value = json.loads(data)
                if isinstance(value, dict) and value.get("error"):
                    raise ErrorEvent(value["error"])
                yield value
        except (ServerFailure, ValueError):
            raise
        except Exception as exc:
            raise failure(exc) from exc
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

    def _connected(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connection = connection
            self._socket = connection.sock
            if self._interrupted:
                raise ConnectionAbortedError("the request was stopped")

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

    def _drop(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
