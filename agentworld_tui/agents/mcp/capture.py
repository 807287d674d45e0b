"""Taking a real MCP server's tool list: connect as a client with the official SDK, list
its tools (every page), and leave. No tool is ever called.

The server is a command started over stdio (with the user's own environment, as their
shell would run it) or a streamable-HTTP URL. Whatever goes wrong, the caller gets one
line saying what and where.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import anyio

from agentworld_tui.agents.mcp.logs import route_library_logs
from agentworld_tui.world.sanitize import one_line

CAPTURE_SECONDS = 60.0
"""How long a server may take to start and list its tools."""
MAX_PAGES = 100
STDERR_TAIL_BYTES = 2048
"""How much of the end of a failed server's stderr is read for the one line."""


class CaptureError(Exception):
    """The server could not be reached or listed; the message is one line."""


@dataclass(frozen=True)
class CapturedServer:
    """A real server's identity and tools, as it listed them."""

    source: str
    tools: list[dict[str, Any]]
    name: str = ""
    version: str = ""
    instructions: str | None = None


async def capture(
    *,
    command: Sequence[str] | None = None,
    url: str = "",
    timeout: float = CAPTURE_SECONDS,
) -> CapturedServer:
    """List the tools of the server ``command`` starts, or of the one at ``url``. A
    started server's stderr never reaches the terminal: the end of it, made clean, is
    part of the message when the listing fails."""
    with tempfile.TemporaryFile() as errlog:
        try:
            return await _capture(command, url, timeout, errlog)
        except CaptureError as exc:
            said = _stderr_tail(errlog)
            if said:
                raise CaptureError(f"{exc} (its stderr ended with: {said})") from None
            raise


async def _capture(
    command: Sequence[str] | None, url: str, timeout: float, errlog: IO[bytes]
) -> CapturedServer:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    route_library_logs()
    server: Any
    if command:
        source = shlex.join(command)
        parameters = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=dict(os.environ)
        )
        server = stdio_client(parameters, errlog=errlog)  # type: ignore[arg-type]
    elif url:
        source = url
        server = url
    else:
        raise CaptureError("give a command or a URL to capture the tools of")
    try:
        with anyio.fail_after(timeout):
            async with Client(server, cache=None) as client:
                tools: list[dict[str, Any]] = []
                cursor: str | None = None
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools += [
                        t.model_dump(by_alias=True, mode="json", exclude_none=True)
                        for t in page.tools
                    ]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                info = client.server_info
                return CapturedServer(
                    source,
                    tools,
                    name=info.name if info is not None else "",
                    version=info.version if info is not None else "",
                    instructions=client.instructions,
                )
    except TimeoutError:
        raise CaptureError(
            f"{one_line(source)} did not list its tools within {timeout:g} seconds"
        ) from None
    except Exception as exc:  # the SDK's and the transport's errors, whatever they are
        raise CaptureError(f"cannot list the tools of {one_line(source)}: {_reason(exc)}") from None


def capture_blocking(
    *, command: Sequence[str] | None = None, url: str = "", timeout: float = CAPTURE_SECONDS
) -> CapturedServer:
    """``capture`` for a caller with no event loop (the command line)."""

    async def run() -> CapturedServer:
        return await capture(command=command, url=url, timeout=timeout)

    return anyio.run(run)


def _stderr_tail(errlog: IO[bytes]) -> str:
    """The last lines a server wrote to its stderr, as one clean, bounded line."""
    with contextlib.suppress(OSError, ValueError):
        size = os.fstat(errlog.fileno()).st_size
        tail = os.pread(errlog.fileno(), STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        lines = [one_line(line) for line in tail.decode(errors="replace").splitlines()]
        kept = " | ".join([line for line in lines if line][-3:])
        return one_line(kept, 240) if kept else ""
    return ""


def _reason(exc: BaseException) -> str:
    """The first real error inside the exception groups a task group raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
        if exc.filename:
            text += f": {exc.filename}"
        return one_line(text)
    text = str(exc) or type(exc).__name__
    return one_line(text)


def parse_command(text: str) -> list[str]:
    """A command line as the user typed it into one argument."""
    try:
        words = shlex.split(text, posix=sys.platform != "win32")
    except ValueError as exc:
        raise CaptureError(f"cannot read the command {one_line(text)!r}: {exc}") from None
    if not words:
        raise CaptureError("the command to capture the tools of is empty")
    return words
