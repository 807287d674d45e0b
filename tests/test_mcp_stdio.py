"""``agentworld mcp serve`` over stdio, spawned by the official SDK's client as any MCP
client spawns a server: stdout carries nothing but MCP (the command line's sanitizing
wrapper leaves the stream as it is), the world model answers, the process's one
connection is one saved session, and a client that closes mid-call loses no turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
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


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "inspector-like", "version": "0"},
    },
}


@pytest.mark.parametrize("stdin_first", [True, False], ids=["stdin-then-sigterm", "sigterm"])
def test_a_client_that_gives_up_as_the_inspector_does_keeps_the_call(
    tmp_path: Path, stdin_first: bool
) -> None:
    """The MCP Inspector's way to stop a server: close stdin, SIGTERM 2 s later, SIGKILL 2 s
    after that. The call in flight (here: waiting for a model that takes long to load) is
    on disk, interrupted, within a second, and the process is gone before the SIGKILL."""
    tools = write_tools(tmp_path / "tools.json")
    folder = tmp_path / "sessions"
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_note", "arguments": {"title": "tea"}},
    }
    with FaultServer() as fault:
        fault.models_reply = Reply(trickle_s=0.5)  # the model loads for a minute
        process = subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", "mcp", "serve", str(tools),
             "--server", fault.url, "--sessions", str(folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}):
                process.stdin.write((json.dumps(message) + "\n").encode())
                process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1
            process.stdin.write((json.dumps(call) + "\n").encode())
            process.stdin.flush()
            time.sleep(1.0)  # the call waits for the model
            given_up = time.monotonic()
            if stdin_first:
                process.stdin.close()
                saved = _saved_within(folder, 2.0)
                process.send_signal(signal.SIGTERM)
            else:
                process.send_signal(signal.SIGTERM)
                saved = _saved_within(folder, 2.0)
            try:
                code = process.wait(timeout=max(0.1, given_up + 4.0 - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
                code = None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert saved is not None and saved - given_up < 1.0, "not saved within a second"
    assert code is not None, "still running when the SIGKILL would come"
    [turns] = session_turns(folder).values()
    assert [t["status"] for t in turns] == ["interrupted"]
    assert turns[0]["stats"]["agent"]["received"] is None


def _saved_within(folder: Path, seconds: float) -> float | None:
    """When a session file with a turn appeared in ``folder`` (None: not within ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for file in folder.glob("*.json"):
            with contextlib.suppress(ValueError, OSError):
                if json.loads(file.read_text(encoding="utf-8"))["tabs"][0]["turns"]:
                    return time.monotonic()
        time.sleep(0.02)
    return None
