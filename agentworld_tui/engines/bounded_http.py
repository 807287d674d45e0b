"""An HTTP client whose replies are bounded: what a server sends cannot exhaust memory.

The OpenAI client reads error bodies and model lists whole; a broken or hostile server
could send gigabytes, or a byte a second. Each reply is wrapped before it is read: a body
is bounded in size and in time, and an error body is cut short (only its first line is
ever shown). The answer's stream does not come through this client (``event_stream``);
its bounds are kept there, with the same limits.

One client serves an engine for its life, from many threads: the bounds are set per
reply, the time a reply may take by its own request's read timeout.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Iterator

import httpx2
import openai

MAX_BODY_BYTES = 8 << 20
"""The most a reply other than the answer's stream may hold (a model list, /props)."""
MAX_ERROR_BYTES = 64 << 10
"""An error reply's body is cut here."""
MAX_LINE_BYTES = 4 << 20
"""The longest line of the answer's event stream (one chunk, however much it holds)."""


class ReplyRefused(Exception):
    """A reply broke one of the bounds; the message completes "<server> ..."."""


class _BoundedBody(httpx2.SyncByteStream):
    """A response body checked against its bounds as the bytes arrive, before buffering."""

    def __init__(
        self, body: httpx2.SyncByteStream, *, limit: int, truncate: bool, deadline_s: float | None
    ) -> None:
        self._body = body
        self._limit = limit
        self._truncate = truncate
        self._deadline_s = deadline_s
        self._deadline = None if deadline_s is None else time.monotonic() + deadline_s

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for part in self._body:
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise ReplyRefused(f"took more than {self._deadline_s:g} s to send its reply")
            size += len(part)
            if size > self._limit:
                if self._truncate:
                    yield part[: len(part) - (size - self._limit)]
                    return
                raise ReplyRefused(f"sent a reply longer than {self._limit >> 20} MiB")
            yield part

    def close(self) -> None:
        self._body.close()


def _read_timeout(request: httpx2.Request) -> float | None:
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, int | float) else None


def _bound(response: httpx2.Response, *, deadline_s: float | None) -> None:
    """Wrap a response's body in its bounds (a response hook: it runs before any read).

    A body gets ``deadline_s`` seconds, or when that is
    None its own request's read timeout (the client's, or the one the request was sent
    with). A compressed body is left undecoded, so it fails to parse instead of unpacking
    to gigabytes past every bound; identity is what the client asks for.
    """
    if not isinstance(response.stream, httpx2.SyncByteStream):
        return
    if deadline_s is None:
        deadline_s = _read_timeout(response.request)
    response.headers.pop("content-encoding", None)
    error = response.status_code >= 400
    response.stream = _BoundedBody(
        response.stream,
        limit=MAX_ERROR_BYTES if error else MAX_BODY_BYTES,
        truncate=error,
        deadline_s=deadline_s,
    )


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every client uses: loading the certificate store takes tens of
    milliseconds of CPU."""
    return httpx2.create_ssl_context()


def bounded_client(timeout: httpx2.Timeout, *, deadline_s: float | None = None) -> httpx2.Client:
    """An HTTP client for the OpenAI client, with the SDK's defaults and bounded replies.

    It is safe to share between threads. ``deadline_s`` bounds the time a reply other than
    the answer's stream may take; None: each request's own read timeout. The number of
    connections is not limited here (the caller bounds its requests in flight), nor that
    of idle ones kept for reuse (each is dropped after a few idle seconds).
    """
    return openai.DefaultHttpxClient(
        timeout=timeout,
        verify=tls_context(),
        headers={"Accept-Encoding": "identity"},
        limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
        event_hooks={"response": [functools.partial(_bound, deadline_s=deadline_s)]},
    )
