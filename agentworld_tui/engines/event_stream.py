"""The answer's stream, read straight from the HTTP client: one request, its events as JSON.

The OpenAI SDK's streaming path (``client.post(..., stream=True)``) builds each request
through its options, auth and retry layers, and decodes the event stream a field at a time
in Python; with many environments stepping at once that cost more CPU than everything
else a step does (about 1.5 ms a request on a 2-core machine, measured with py-spy against
``bench/env.py``'s server). Here the body goes out as the JSON it already is, and the
stream is split into events a line at a time. The failures stay the SDK's exception types
(``openai.APIStatusError`` and its subclasses, ``APITimeoutError``, ``APIConnectionError``,
``APIError`` for an error event), so that ``RemoteEngine`` tells them apart as before.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpx2
import openai

from agentworld_tui.engines.bounded_http import interrupt

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["EventStream", "open_event_stream", "sse_data"]

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


class EventStream:
    """The events of one answer as the JSON values the server sent, until ``[DONE]``.

    Closing it before its end ends its connection at once (``bounded_http.interrupt``): a
    read another thread is blocked in returns, and the server stops working on an answer
    nobody reads. A stream that has ended leaves its connection to the pool.
    """

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response

    def __iter__(self) -> Iterator[Any]:
        request = self.response.request
        try:
            for data in sse_data(self.response.iter_bytes()):
                if data.startswith("[DONE]"):
                    break
                value = json.loads(data)
                if isinstance(value, dict) and value.get("error"):
                    raise _stream_error(value["error"], request)
                yield value
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except httpx2.TransportError as exc:
            raise openai.APIConnectionError(request=request) from exc
        finally:
            self.close()

    def close(self) -> None:
        interrupt(self.response)
        self.response.close()


def open_event_stream(
    client: httpx2.Client,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    timeout: httpx2.Timeout,
) -> EventStream:
    """POST ``body`` to ``url`` and return its stream once the server's headers came;
    raises the SDK's exception for a refusal, a timeout or a connection that failed."""
    request = client.build_request(
        "POST",
        url,
        content=json.dumps(body, ensure_ascii=False).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **headers,
        },
        timeout=timeout,
    )
    try:
        response = client.send(request, stream=True)
    except httpx2.TimeoutException as exc:
        raise openai.APITimeoutError(request=request) from exc
    except httpx2.TransportError as exc:
        raise openai.APIConnectionError(request=request) from exc
    if response.status_code >= 400:
        try:
            response.read()  # bounded in size and time by the client (bounded_http)
        finally:
            response.close()
        raise status_error(response)
    return EventStream(response)


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
