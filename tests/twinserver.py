"""A small real MCP server for the twin tests, built on the official SDK's low-level server.

``python twinserver.py stdio FOLDER`` or ``python twinserver.py http FOLDER PORT_FILE``.
Its tools really change files in FOLDER, and every call it receives is added to
FOLDER/calls.log, so a test can tell what reached reality. Some tools misbehave on purpose:
one ends the process, one sleeps, one writes non-MCP text to stdout, one answers megabytes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

TOOLS: list[dict[str, Any]] = [
    {
        "name": "write_note",
        "description": "Write a note (a file) in the notebook.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
            "required": ["name", "text"],
        },
        "annotations": {"destructiveHint": True},
    },
    {
        "name": "read_note",
        "description": "Read a note.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "list_notes",
        "description": "The notes there are.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": {
            "type": "object",
            "properties": {"count": {"type": "integer"}, "notes": {"type": "array"}},
            "required": ["count", "notes"],
        },
    },
    {"name": "crash", "description": "End the server.", "inputSchema": {"type": "object"}},
    {
        "name": "slow",
        "description": "Answer after a while.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
    {"name": "noise", "description": "Write junk on stdout.", "inputSchema": {"type": "object"}},
    {
        "name": "big",
        "description": "Answer a long text.",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
]


def notes_server(folder: Path) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    def text(value: str, *, error: bool = False) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=value)], is_error=error
        )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        args = params.arguments or {}
        with (folder / "calls.log").open("a", encoding="utf-8") as log:
            log.write(json.dumps({"name": params.name, "arguments": args}) + "\n")
        notes = folder / "notes"
        notes.mkdir(exist_ok=True)
        if params.name == "write_note":
            data = str(args["text"]).encode()
            (notes / Path(str(args["name"])).name).write_bytes(data)
            return text(f"wrote {len(data)} bytes to {args['name']}")
        if params.name == "read_note":
            path = notes / Path(str(args["name"])).name
            if not path.exists():
                return text(f"no note named {args['name']}", error=True)
            return text(path.read_text())
        if params.name == "list_notes":
            names = sorted(p.name for p in notes.iterdir())
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text", text=json.dumps({"count": len(names), "notes": names})
                    )
                ],
                structured_content={"count": len(names), "notes": names},
            )
        if params.name == "crash":
            print("the notebook falls over", file=sys.stderr, flush=True)
            os._exit(3)
        if params.name == "slow":
            await asyncio.sleep(float(args.get("seconds", 60)))
            return text("finally")
        if params.name == "noise":
            sys.stdout.buffer.write(b"this is not JSON-RPC\n")
            sys.stdout.buffer.flush()
            return text("noisy")
        if params.name == "big":
            return text("x" * int(args.get("size", 3_000_000)))
        raise ValueError(f"no tool {params.name}")

    return Server("twin-notes", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server) -> None:
    """Serve ``server`` over stdio until the client leaves."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server, port_file: Path) -> None:
    """Serve ``server`` over streamable HTTP on a free port of 127.0.0.1, written to
    ``port_file`` once it listens."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(server.streamable_http_app(), log_config=None, lifespan="on")
    running = uvicorn.Server(config)
    task = asyncio.ensure_future(running.serve(sockets=[sock]))
    while not running.started:
        await asyncio.sleep(0.01)
    port_file.write_text(str(sock.getsockname()[1]), encoding="utf-8")
    await task


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        asyncio.run(serve_stdio(notes_server(Path(sys.argv[2]))))
    else:
        asyncio.run(serve_http(notes_server(Path(sys.argv[2])), Path(sys.argv[3])))
