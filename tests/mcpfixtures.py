"""What the MCP tests share: tool lists, world models (a scripted GGUF in the real
llama.cpp, or a real OpenAI-compatible server), the simulated server running in the
test's loop, and a small real MCP server to capture tools from.

Run as a script, this module is that small real MCP server, built on the official SDK's
low-level server: ``python mcpfixtures.py stdio MARKER`` or ``python mcpfixtures.py http
PORT_FILE MARKER``. It writes MARKER if any tool of it is ever called.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from agentworld_tui.reality.traces import Exchange

TESTS_DIR = Path(__file__).resolve().parent

NOTES_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_note",
        "title": "Read a note",
        "description": "Read one note of the notebook by its title.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "pattern": "^[a-z-]+$"},
                "lines": {"type": "integer", "minimum": 1},
            },
            "required": ["title"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "count_notes",
        "description": "Count the notes.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": {
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        },
    },
]


def write_tools(path: Path, tools: list[dict[str, Any]] | None = None) -> Path:
    """A saved tools/list answer."""
    path.write_text(json.dumps({"tools": tools or NOTES_TOOLS}), encoding="utf-8")
    return path


def answer(observation: str, reasoning: str = "The agent reads a note.") -> str:
    """A scripted model's whole output: reasoning, then the predicted observation."""
    return f"{reasoning}</think><predicted_observation>{observation}</predicted_observation>"


def scripted_world(path: Path, observation: str) -> Path:
    """A tiny real GGUF that always predicts ``observation`` (a token per byte: its context
    fits the MCP system prompt)."""
    from ggufgen import write_scripted_model

    return write_scripted_model(path, answer(observation), n_ctx_train=32768)


def llama_simulator(model: Path) -> Any:
    """A simulator on the scripted model in llama.cpp, loaded on its engine thread."""
    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.simulator import Simulator

    simulator = Simulator(LlamaEngine(model, n_ctx=8192, threads=1))
    error = simulator.load_and_wait()
    assert error is None, error
    return simulator


def remote_simulator(url: str, concurrency: int = 8) -> Any:
    """A simulator on an OpenAI-compatible server (tests/faultserver.py)."""
    from agentworld_tui.engines.remote import RemoteEngine
    from agentworld_tui.simulator import Simulator

    simulator = Simulator(RemoteEngine(url, timeout=30.0), concurrency=concurrency)
    error = simulator.load_and_wait()
    assert error is None, error
    return simulator


def reply_with(observation: str, reasoning: str = "thinking") -> Any:
    from faultserver import Reply

    return Reply(
        content=[f"<predicted_observation>{observation}</predicted_observation>"],
        reasoning=[reasoning],
    )


@contextlib.asynccontextmanager
async def serving(server: Any, **start: Any) -> AsyncIterator[str]:
    """The simulated server on HTTP in the test's loop; stopped after."""
    url = await server.start(**start)
    try:
        yield url
    finally:
        await server.stop()


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait on the loop until ``condition`` holds (a deadline, not a measurement)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("the condition did not come true in time")
        await asyncio.sleep(0.02)


def session_turns(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Every session file in ``folder``: its connection's turns, as saved."""
    found: dict[str, list[dict[str, Any]]] = {}
    for file in sorted(folder.glob("*.json")):
        data = json.loads(file.read_text(encoding="utf-8"))
        found[file.name] = data["tabs"][0]["turns"]
    return found


def received_text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


# -- a small real MCP server -------------------------------------------------------------
def _notes_server(marker: Path) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in NOTES_TOOLS])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        marker.write_text(f"called {params.name}", encoding="utf-8")
        return types.CallToolResult(content=[types.TextContent(type="text", text="real")])

    return Server(
        "notes-server",
        version="3.1.4",
        instructions="A notebook of short notes.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# -- grounding: a trace store of the notebook's real answers, and the prompt it makes ------
NOTE_EXCHANGES = [
    Exchange("read_note", {"name": "shopping"}, "eggs\nmilk", "twin", domain="mcp"),
    Exchange("read_note", {"name": "todo"}, "call mum", "routed", domain="mcp"),
    Exchange("write_note", {"name": "todo", "text": "x"}, "wrote 1 bytes", domain="mcp"),
]
"""Earlier real exchanges of tests/twinserver.py's tools, as a trace store holds them."""

GROUNDED = """### Turn 1

**Real Examples:**
For reference only: answers the real tool read_note gave to earlier calls, recorded \
outside this conversation. They show how it really answers (format, fields, errors). They \
are not part of this environment's history and may come from a different state: answer \
the action below from this environment's own history.

Example 1, arguments:
```json
{"name": "todo"}
```
Real result:
```
call mum
```

Example 2, arguments:
```json
{"name": "shopping"}
```
Real result:
```
eggs
milk
```

**Action:**
```json
{
  "name": "read_note",
  "arguments": {
    "name": "todo list"
  }
}
```"""
"""The user message of ``read_note(name="todo list")`` grounded in ``NOTE_EXCHANGES``."""


if __name__ == "__main__":
    from twinserver import serve_http, serve_stdio

    if sys.argv[1] == "stdio":
        asyncio.run(serve_stdio(_notes_server(Path(sys.argv[2]))))
    else:
        asyncio.run(serve_http(_notes_server(Path(sys.argv[3])), Path(sys.argv[2])))
