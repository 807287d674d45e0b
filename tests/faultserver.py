"""A small OpenAI-compatible server on 127.0.0.1 that misbehaves on request.

The remote engine must survive what real servers and networks do: refuse, hang, answer
401 or 500, separate the reasoning into its own field, cut the stream mid-answer, or
report usage. Each chat request takes the next queued ``Reply`` (or the default one) and
every request is recorded, headers included, so tests can see what the engine sent.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG_LIMIT_S = 30.0
"""A hanging reply gives up after this long even if nobody stops the server."""
ENDLESS_CHUNKS = 100_000
ENDLESS_LINE_BYTES = 64 << 20


@dataclass
class Reply:
    """How the server answers one chat request."""

    content: Sequence[str] = ()
    reasoning: Sequence[str] = ()
    """Sent before the content, in the delta field named by ``reasoning_field``."""
    reasoning_field: str = "reasoning_content"
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = None
    status: int = 200
    error_message: str = "something went wrong"
    hang: bool = False
    """Accept the request and never answer."""
    hang_after: int = -1
    """Send this many delta chunks, then go silent (all of them: before the finish chunk)."""
    cut_after: int = -1
    """Send this many delta chunks, then drop the connection in the middle of the body."""
    chunked: bool = True
    """Chunked transfer encoding; without it a cut looks like a clean end of the body."""
    error_event_after: int = -1
    """Send this many delta chunks, then an in-stream error event."""
    error_body: bytes | None = None
    """The error reply's body as given (instead of an OpenAI-style JSON error)."""
    error_content_type: str = "text/plain"
    cut_with: bytes = b""
    """Raw bytes written (outside the chunked framing) just before a cut."""
    raw_chunks: Sequence[Any] = ()
    """JSON values sent as they are, as chunks of their own, before the deltas."""
    content_encoding: str = ""
    """A Content-Encoding header for an error body (which is then sent as given)."""
    trickle_s: float = 0.0
    """Send the body one byte at a time with this pause (after ``trickle_after`` deltas
    for the chat stream; the whole body for an error or ``models_reply``)."""
    trickle_after: int = 0
    endless: str = ""
    """After the deltas, send this text as content chunks until the client goes away: a
    server that ignores max_tokens (it gives up after ``ENDLESS_CHUNKS``)."""
    endless_line: bool = False
    """After the deltas, start a chunk and never end its line (given up after
    ``ENDLESS_LINE_BYTES``)."""
    location: str = ""
    """A Location header for an error reply (a redirect)."""
    delta_extra: dict[str, Any] = field(default_factory=dict)
    """Fields added to every delta, e.g. an empty ``reasoning_content``."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FaultServer:
    """Start with ``start()`` (or as a context manager); ``url`` ends in ``/v1``."""

    models: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": "world-model", "object": "model", "max_model_len": 8192}]
    )
    api_key: str | None = None
    """When set, every request must carry ``Authorization: Bearer <api_key>``."""
    port_wanted: int = 0
    """0 picks a free port; a fixed one lets a test restart a server where it was."""
    tokenize: bool = False
    """Serve vLLM's ``POST /tokenize`` (a count of four characters per token)."""
    default: Reply = field(default_factory=lambda: Reply(content=["hello"]))
    models_reply: Reply | None = None
    """When set, ``GET /v1/models`` answers with this reply: its error, or with status 200
    the model list sent as the reply says (trickled)."""
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    accepted: frozenset[str] | None = None
    """When set, a chat request with any other top-level field is refused, as a strict
    hosted API does, in the style ``refusal`` names."""
    refusal: str = "openai"
    """"openai": 400 naming the first unknown field; "pydantic": 422 listing each one;
    "vague": 400 naming none."""
    body_bytes_sent: int = 0
    """Bytes of error and model-list bodies the client took (a cut-short read takes less)."""
    keep_alive: bool = False
    """Keep each connection open after a JSON reply or a chat stream that ends as it
    should (chunked), for the client's next request, as real servers do; otherwise every
    reply closes its connection."""
    connections: int = 0
    """Connections accepted."""
    closed: int = 0
    """Connections ended (by either side)."""

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FaultServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port_wanted), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def next_reply(self) -> Reply:
        return self.replies.popleft() if self.replies else self.default

    def wait(self, seconds: float) -> None:
        """Sleep until the server stops, at most ``seconds``."""
        self._stop.wait(min(seconds, HANG_LIMIT_S))

    def stopped(self, pause: float) -> bool:
        """Pause for ``pause`` seconds; True once the server stops."""
        return self._stop.wait(pause)


class _Handler(BaseHTTPRequestHandler):
    owner: FaultServer
    protocol_version = "HTTP/1.1"
    _trickling = False

    def setup(self) -> None:
        super().setup()
        self.owner.connections += 1  # one handler for each connection

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner.closed += 1

    def _keep_or_close(self, keep: bool) -> None:
        """Say whether the connection stays open after this reply (before end_headers)."""
        keep = keep and self.owner.keep_alive
        if not keep:
            self.send_header("Connection", "close")
        self.close_connection = not keep

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    # -- routing --------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._record({})
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/v1/models"):
            reply = self.owner.models_reply
            listing = {"object": "list", "data": self.owner.models}
            if reply is None:
                self._json(200, listing)
            elif reply.status == 200:
                body = json.dumps(listing).encode()
                self._send_body(reply, 200, "application/json", body)
            else:
                self._reply_error(reply)
        else:
            self._error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._record({})
            self._error(400, "the body is not JSON")
            return
        self._record(body)
        if not self._authorised():
            return
        path = self.path.rstrip("/")
        if path.endswith("/v1/chat/completions"):
            self._chat(body)
        elif path == "/tokenize" and self.owner.tokenize:
            chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
            self._json(200, {"count": chars // 4 + 8, "max_model_len": 8192, "tokens": []})
        else:
            self._error(404, f"no route for POST {self.path}")

    # -- chat -----------------------------------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> None:
        accepted = self.owner.accepted
        unknown = [key for key in body if accepted is not None and key not in accepted]
        if unknown:
            self._refuse(unknown)
            return
        reply = self.owner.next_reply()
        if reply.hang:
            self.owner.wait(HANG_LIMIT_S)
            self.close_connection = True
            return
        if reply.status != 200:
            self._reply_error(reply)
            return
        model = str(body.get("model", ""))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self._keep_or_close(reply.chunked)
        if reply.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True  # unless the stream ends as it should (_keep_after_end)
        deltas = [{reply.reasoning_field: text} for text in reply.reasoning]
        deltas += [{"content": text} for text in reply.content]
        deltas = [{**reply.delta_extra, **delta} for delta in deltas]
        self._trickling = False
        try:
            self._event(reply, _chunk(model, {"role": "assistant", "content": ""}, None))
            for raw_chunk in reply.raw_chunks:
                self._event(reply, raw_chunk)
            for sent, delta in enumerate([*deltas, None]):  # None: before the finish chunk
                self._trickling = reply.trickle_s > 0 and sent >= reply.trickle_after
                if sent == reply.cut_after:
                    self._cut(reply.cut_with)
                    return
                if sent == reply.hang_after:
                    self.owner.wait(HANG_LIMIT_S)
                    return
                if sent == reply.error_event_after:
                    error = {"message": reply.error_message, "type": "server_error", "code": 500}
                    self._event(reply, {"error": error})
                    self._end(reply)
                    self._keep_after_end(reply)
                    return
                if delta is not None:
                    self._event(reply, _chunk(model, delta, None))
            if reply.endless:
                endless = {**reply.delta_extra, "content": reply.endless}
                for _ in range(ENDLESS_CHUNKS):
                    self._event(reply, _chunk(model, endless, None))
                return
            if reply.endless_line:
                self._write(reply, b'data: {"choices": [{"index": 0, "delta": {"content": "')
                for _ in range(ENDLESS_LINE_BYTES >> 16):
                    self._write(reply, b"a" * 65536)
                return
            self._event(reply, _chunk(model, {}, reply.finish_reason))
            if reply.usage is not None and (body.get("stream_options") or {}).get("include_usage"):
                usage_chunk = _chunk(model, {}, None)
                usage_chunk["choices"] = []
                usage_chunk["usage"] = reply.usage
                self._event(reply, usage_chunk)
            self._write(reply, b"data: [DONE]\n\n")
            self._end(reply)
            self._keep_after_end(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancelled stream)

    def _event(self, reply: Reply, data: Any) -> None:
        self._write(reply, f"data: {json.dumps(data)}\n\n".encode())

    def _write(self, reply: Reply, data: bytes) -> None:
        pieces = [data[i : i + 1] for i in range(len(data))] if self._trickling else [data]
        for piece in pieces:
            if reply.chunked:
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            else:
                self.wfile.write(piece)
            self.wfile.flush()
            self.owner.body_bytes_sent += len(piece)
            if self._trickling and self.owner.stopped(reply.trickle_s):
                return

    def _keep_after_end(self, reply: Reply) -> None:
        self.close_connection = not (self.owner.keep_alive and reply.chunked)

    def _end(self, reply: Reply) -> None:
        if reply.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _cut(self, raw: bytes = b"") -> None:
        """Drop the connection without finishing the body."""
        if raw:
            self.wfile.write(raw)
        self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    # -- plumbing -------------------------------------------------------------------------
    def _record(self, body: dict[str, Any]) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.owner.requests.append(Recorded(self.command, self.path, headers, body))

    def _authorised(self) -> bool:
        key = self.owner.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Incorrect API key provided")
        return False

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self._keep_or_close(True)
        self.end_headers()
        self.wfile.write(payload)

    def _refuse(self, unknown: list[str]) -> None:
        style = self.owner.refusal
        if style == "pydantic":
            detail = [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", key],
                    "msg": "Extra inputs are not permitted",
                    "input": None,
                }
                for key in unknown
            ]
            self._json(422, {"detail": detail})
        elif style == "vague":
            self._error(400, "Invalid request: unsupported parameter")
        else:
            self._error(400, f"Unrecognized request argument supplied: {unknown[0]}")

    def _reply_error(self, reply: Reply) -> None:
        if reply.error_body is None and not reply.trickle_s:
            self._error(reply.status, reply.error_message)
            return
        body = reply.error_body
        content_type = reply.error_content_type
        if body is None:
            error = {"message": reply.error_message, "type": "error", "code": reply.status}
            body, content_type = json.dumps({"error": error}).encode(), "application/json"
        self._send_body(reply, reply.status, content_type, body)

    def _send_body(self, reply: Reply, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if reply.content_encoding:
            self.send_header("Content-Encoding", reply.content_encoding)
        if reply.location:
            self.send_header("Location", reply.location)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        step = 1 if reply.trickle_s else 1 << 16
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for i in range(0, len(body), step):
                self.wfile.write(body[i : i + step])
                self.wfile.flush()
                self.owner.body_bytes_sent += len(body[i : i + step])
                if reply.trickle_s and self.owner.stopped(reply.trickle_s):
                    return

    def _error(self, status: int, message: str) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def free_port() -> int:
    """A port nobody listens on (for the connection-refused case)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
