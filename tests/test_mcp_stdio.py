"""``agentworld mcp serve`` over stdio, spawned by the official SDK's client as any MCP
client spawns a server: stdout carries nothing but MCP (the command line's sanitizing
wrapper leaves the stream as it is), the world model answers, the process's one
connection is one saved session, and a client that closes mid-call loses no turn."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from faultserver import FaultServer, Reply
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcpfixtures import received_text, reply_with, scripted_world, session_turns, until, write_tools

NOTE = "Tea: \x1b]0;pwned\x07 oolong, 90°C — ‮ 3 minutes\x00."


def command(*words: str) -> StdioServerParameters:
    """The server as a client's configuration names it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentworld_tui", "mcp", "serve", *words],
        env=dict(os.environ),  # the isolated config and data dirs of this test
        cwd=str(Path(__file__).resolve().parent.parent),
    )


class Received:
    """Everything the client's transport handed over that was not a reply it awaited."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)


async def test_a_spawned_server_answers_with_the_world_model_over_a_clean_stdout(
    tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    model = scripted_world(tmp_path / "world.gguf", NOTE)
    tools = write_tools(tmp_path / "tools.json")
    folder = tmp_path / "sessions"
    seen = Received()
    params = command(
        str(tools),
        "--model",
        str(model),
        "--ctx",
        "8192",
        "--threads",
        "1",
        "--sessions",
        str(folder),
    )
    async with Client(params, message_handler=seen) as client:
        listed = await client.list_tools()
        first = await client.call_tool("read_note", {"title": "tea"})
        bad = await client.call_tool("read_note", {"title": "Tea!"})
        second = await client.call_tool("read_note", {"title": "tea", "lines": 2})
    assert seen.errors == []  # not one line of stdout that was not MCP
    assert listed.tools[0].title == "Read a note"
    # The agent gets the observation exactly: the sanitizer that guards the terminal
    # never touches the MCP stream.
    assert received_text(first) == NOTE == received_text(second)
    assert bad.is_error and "does not match" in received_text(bad)
    [turns] = session_turns(folder).values()
    assert [t["observation"] for t in turns] == [NOTE, NOTE]
    assert turns[1]["stats"]["agent"]["received"]["result"]["content"][0]["text"] == NOTE
    # What the server had to say went to the log file.
    log = (isolated_dirs["data"] / "agentworld.log").read_text(encoding="utf-8")
    assert "agent-1 connected over stdio" in log
    assert "refused a call of read_note: Input validation error" in log


async def test_a_domain_over_stdio_is_a_simulated_terminal(tmp_path: Path) -> None:
    screen = "root@ad092d3df69c:/app# ls\nREADME.md  src\nroot@ad092d3df69c:/app#"
    model = scripted_world(tmp_path / "world.gguf", screen)
    folder = tmp_path / "sessions"
    params = command(
        "--domain",
        "terminal",
        "--model",
        str(model),
        "--ctx",
        "8192",
        "--threads",
        "1",
        "--sessions",
        str(folder),
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        result = await client.call_tool("send_keystrokes", {"keystrokes": "ls\n"})
    assert [t.name for t in listed.tools] == ["send_keystrokes"]
    assert received_text(result) == screen
    [turns] = session_turns(folder).values()
    assert turns[0]["action"]["payload"] == [{"keystrokes": "ls\n", "duration": 1.0}]
    assert turns[0]["state"]  # the scenario's starting screen went with the first turn


async def test_a_client_that_leaves_mid_call_leaves_the_turn_interrupted_and_saved(
    tmp_path: Path,
) -> None:
    tools = write_tools(tmp_path / "tools.json")
    folder = tmp_path / "sessions"
    with FaultServer() as fault:
        fault.queue(reply_with("first"), Reply(hang=True))
        params = command(str(tools), "--server", fault.url, "--sessions", str(folder))
        async with Client(params) as client:
            first = await client.call_tool("read_note", {"title": "a"})
            call = asyncio.ensure_future(client.call_tool("read_note", {"title": "b"}))
            await until(lambda: len(fault.chat_requests()) == 2, timeout=60)
            call.cancel()
        # The client closed the pipe and waited for the server to exit.
    assert received_text(first) == "first"
    [turns] = session_turns(folder).values()
    assert [t["status"] for t in turns] == ["complete", "interrupted"]
    assert turns[1]["stats"]["agent"]["received"] is None
