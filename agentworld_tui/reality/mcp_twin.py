"""The MCP domain's twin: the real server the tools came from, through the official SDK.

The server is a command started over stdio (its stderr kept, the last part of it, to say
why it ended) or a streamable-HTTP URL. The client lives on an event loop of the twin's own
(an anyio portal), so a twin is used the same way from every front-end. An action's call
goes to the server as it is; the observation is the result the way the simulated server
would show it: the structured content as JSON where the tool gave one, else the text of its
content; an error result or a JSON-RPC error is an observation too (``tool_error``).
Nothing here reaches the server but the calls the caller makes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import termios
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import anyio
import anyio.from_thread

from agentworld_tui.reality.observation import CheckResult, RealObservation, TwinStatus, failed
from agentworld_tui.reality.twin import CHECK_SECONDS
from agentworld_tui.world.action import Action
from agentworld_tui.world.sanitize import one_line

CALL_SECONDS = 60.0
"""How long a server may take to answer one call."""
START_SECONDS = 60.0
MAX_OUTPUT = 1_000_000
"""Characters of a result kept; the rest is cut with a note."""
STDERR_KEPT = 4000


SERVER_ENDED = "the server ended"


class McpTwin:
    """A real MCP server, reached as a client."""

    domain = "mcp"

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        url: str = "",
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        call_timeout: float = CALL_SECONDS,
        start_timeout: float = START_SECONDS,
        max_output: int = MAX_OUTPUT,
    ) -> None:
        self.command = list(command or [])
        self.url = url
        self.env = env
        self.cwd = cwd
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.max_output = max_output
        self._portal_cm: Any = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._client: Any = None
        self._scope: anyio.CancelScope | None = None
        self._closing: anyio.Event | None = None
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._error = ""
        self._dead = ""
        self._stderr: deque[str] = deque()
        self._stderr_size = 0
        self._errlog: Any = None
        self._stderr_fd: int | None = None

    @property
    def source(self) -> str:
        return " ".join(self.command) if self.command else self.url

    # -- the protocol --------------------------------------------------------------------

    def start(self) -> RealObservation:
        began = time.monotonic()
        if not self.command and not self.url:
            self._dead = "the twin did not start: give the server's command or URL"
            return failed(TwinStatus.CRASHED, self._dead)
        try:
            self._portal_cm = anyio.from_thread.start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
            transport = self._transport()
            self._portal.start_task_soon(self._serve, transport)
        except Exception as exc:  # the transport's own refusal (bad URL, no such program)
            self._dead = f"the twin did not start: {_reason(exc)}"
            self._stop_portal()
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        if not self._ready.wait(self.start_timeout):
            self._dead = f"the twin did not start: {self.source} did not answer within {self.start_timeout:g} seconds"
        elif self._client is None:
            self._dead = (
                f"the twin did not start: {self._error or 'the server ended'}{self._stderr_note()}"
            )
        if self._dead:
            self.kill()
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        return RealObservation("", elapsed=time.monotonic() - began)

    def time_limit(self, action: Action) -> float:
        return self.call_timeout + 5.0

    def act(self, action: Action) -> RealObservation:
        began = time.monotonic()
        if self._dead or self._portal is None or self._client is None:
            return failed(TwinStatus.CRASHED, self._said_dead() or "the twin was not started")
        if self._ended.is_set():
            return self._server_ended()
        payload = action.payload if isinstance(action.payload, dict) else {}
        name = payload.get("name")
        arguments = payload.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return failed(TwinStatus.ERROR, 'an MCP action is {"name": ..., "arguments": {...}}')
        try:
            seen = self._portal.call(self._call, name, arguments)
        except Exception as exc:  # the portal itself is gone
            self._dead = f"the twin's client ended: {_reason(exc)}"
            seen = failed(TwinStatus.CRASHED, self._dead)
        return _with_elapsed(seen, time.monotonic() - began)

    def check(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        return CheckResult(
            False,
            None,
            "",
            status=TwinStatus.ERROR,
            error="an MCP twin runs no commands: a check runs in a terminal or SWE twin",
        )

    def kill(self) -> None:
        self._dead = self._dead or "the twin was stopped"
        portal, scope = self._portal, self._scope
        if portal is not None and scope is not None:
            with contextlib.suppress(Exception):
                portal.call(scope.cancel)
        self._ended.wait(10)
        self._stop_portal()

    def close(self) -> None:
        self._dead = self._dead or "the twin was closed"
        portal, closing = self._portal, self._closing
        if portal is not None and closing is not None:
            with contextlib.suppress(Exception):
                portal.call(closing.set)
            if not self._ended.wait(15):
                self.kill()
                return
        self._stop_portal()

    # -- the client ----------------------------------------------------------------------

    def _transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        if self.command:
            read, write = os.pipe()
            self._stderr_fd = read
            threading.Thread(target=self._keep_stderr, args=(read,), daemon=True).start()
            self._errlog = os.fdopen(write, "w", encoding="utf-8", errors="replace")
            params = StdioServerParameters(
                command=self.command[0],
                args=self.command[1:],
                env=dict(self.env) if self.env is not None else dict(os.environ),
                cwd=self.cwd,
            )
            return stdio_client(params, errlog=self._errlog)
        return streamable_http_client(self.url)

    async def _serve(self, transport: Any) -> None:
        from mcp.client import Client

        self._closing = anyio.Event()
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with Client(transport, cache=None) as client:
                    self._client = client
                    self._ready.set()
                    await self._closing.wait()
        except BaseException as exc:  # whatever ended the connection: kept as the reason
            self._error = _reason(exc)
            if not isinstance(exc, Exception | anyio.get_cancelled_exc_class()):
                raise
        finally:
            self._ended.set()
            self._ready.set()

    async def _call(self, name: str, arguments: dict[str, Any]) -> RealObservation:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        try:
            with anyio.fail_after(self.call_timeout):
                result = await client.call_tool(name, arguments)
        except TimeoutError:
            return failed(
                TwinStatus.TIMEOUT,
                f"the server did not answer within {self.call_timeout:g} seconds",
            )
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                return self._server_ended()
            error = exc.error.model_dump(mode="json", exclude_none=True)
            text = json.dumps({"jsonrpc": "2.0", "error": error}, ensure_ascii=False)
            return RealObservation(self._bounded(text), tool_error=True)
        except Exception as exc:  # a result outside the protocol, a broken connection
            if self._ended.is_set():
                return self._server_ended()
            return failed(
                TwinStatus.ERROR, f"the server's answer is not a tool result: {_reason(exc)}"
            )
        return RealObservation(self._bounded(result_text(result)), tool_error=bool(result.is_error))

    def _bounded(self, text: str) -> str:
        if len(text) <= self.max_output:
            return text
        return (
            text[: self.max_output] + f"\n[... {len(text) - self.max_output:,} characters cut ...]"
        )

    def _keep_stderr(self, fd: int) -> None:
        with contextlib.suppress(OSError), os.fdopen(fd, "rb") as stream:
            while chunk := stream.read1(65536):
                text = chunk.decode("utf-8", "replace")
                self._stderr.append(text)
                self._stderr_size += len(text)
                while self._stderr_size > STDERR_KEPT and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())

    def _server_ended(self) -> RealObservation:
        self._dead = SERVER_ENDED
        self._drain_stderr()
        return failed(TwinStatus.CRASHED, self._said_dead())

    def _said_dead(self) -> str:
        """Why the twin is dead; for a server that ended, with its last words as they are
        now (they may reach the pipe's reader after its end was seen)."""
        return self._dead + self._stderr_note() if self._dead == SERVER_ENDED else self._dead

    def _drain_stderr(self, seconds: float = 0.5) -> None:
        """Wait (a little) until what the server wrote to stderr is out of the pipe."""
        fd, deadline = self._stderr_fd, time.monotonic() + seconds
        while fd is not None and time.monotonic() < deadline:
            try:
                pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                return
            if not pending:
                return
            time.sleep(0.01)

    def _stderr_note(self) -> str:
        text = "".join(self._stderr)[-400:].strip()
        return f" (its last words: {' '.join(text.split())})" if text else ""

    def _stop_portal(self) -> None:
        """End the event loop, cancelling whatever still runs on it (a call in flight)."""
        cm, self._portal_cm = self._portal_cm, None
        portal, self._portal = self._portal, None
        if portal is not None:
            with contextlib.suppress(Exception):
                portal.call(portal.stop, True)
        if cm is not None:
            with contextlib.suppress(Exception):
                cm.__exit__(None, None, None)
        if self._errlog is not None:
            with contextlib.suppress(OSError):
                self._errlog.close()
            self._errlog = None


def result_text(result: Any) -> str:
    """A tool result as the simulated server shows one: its structured content as JSON
    where it has one (and is no error), else its content's text, one part a line; parts
    that are not text are named, their data left out."""
    if result.structured_content is not None and not result.is_error:
        return json.dumps(result.structured_content, ensure_ascii=False)
    parts = []
    for part in result.content:
        kind = getattr(part, "type", "")
        if kind == "text":
            parts.append(part.text)
        elif kind == "resource" and hasattr(part.resource, "text"):
            parts.append(part.resource.text)
        else:
            mime = getattr(part, "mime_type", None) or getattr(
                getattr(part, "resource", None), "mime_type", ""
            )
            parts.append(f"[{kind} {mime or ''}]".replace(" ]", "]"))
    return "\n".join(parts)


def _with_elapsed(seen: RealObservation, elapsed: float) -> RealObservation:
    return replace(seen, elapsed=elapsed)


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        text = str(exc) or type(exc).__name__
    return one_line(text, 300)
