"""Where the MCP SDK's (and uvicorn's) own log records go: to the app's log file, never to
a screen, to stdout (the stdio transport's) or to stderr (the command line's one line)."""

from __future__ import annotations

import logging

LIBRARIES = ("mcp", "uvicorn", "uvicorn.error", "uvicorn.access", "sse_starlette", "httpx2")


def route_library_logs() -> None:
    ours = logging.getLogger("agentworld")
    level = logging.DEBUG if ours.level == logging.DEBUG else logging.WARNING
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        logger.handlers = list(ours.handlers) or [logging.NullHandler()]
        logger.propagate = False
        logger.setLevel(level)
