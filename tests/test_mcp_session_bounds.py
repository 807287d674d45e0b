"""Hostile or careless clients cannot take the server's descriptors, memory or time:
sessions nobody ends expire after their idle time and let go of their session files,
open sessions are bounded with a clear refusal, and a costly argument check runs off the
event loop, bounded in time, while the other clients are served."""

from __future__ import annotations

import asyncio
import gc
import os
from pathlib import Path
from typing import Any

import httpx2
from faultserver import FaultServer
from mcp import Client
from mcpfixtures import (
    received_text,
    remote_simulator,
    reply_with,
    serving,
    until,
    write_tools,
)

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import SessionFolder
from agentworld_tui.agents.mcp.steering import AgentEvent, ConnectionClosed
from agentworld_tui.world.workspace import lock_session_file

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "careless", "version": "1"},
    },
}
HOSTILE_TOOLS = [
    {
        "name": "lookup",
        "description": "Look a name up.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^(a|aa)+$"},
                "rows": {"type": "array", "uniqueItems": True},
            },
        },
    }
]


async def abandoned_session(http: httpx2.AsyncClient, url: str, call: bool = True) -> str:
    """Open a session, make one call (or list the tools), and leave without ending it."""
    opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
    await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
    )
    if call:
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read_note", "arguments": {"title": "a"}},
        }
        answered = await http.post(url, json=body, headers=session)
        assert answered.status_code == 200 and "fine" in answered.text
    else:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await http.post(url, json=body, headers=session)).status_code == 200
    return str(opened.headers["mcp-session-id"])


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_session_nobody_ends_expires_and_lets_go_of_its_file(tmp_path: Path) -> None:
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    events: list[AgentEvent] = []
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url)
        server = AgentServer(
            simulator, notes, sessions=SessionFolder(tmp_path / "s"), idle_seconds=0.5
        )
        server.subscribe(events.append)
        try:
            async with serving(server) as url:
                async with httpx2.AsyncClient() as http:
                    await abandoned_session(http, url)
                    [connection] = server.connections()
                    assert connection.path is not None
                await until(lambda: any(isinstance(e, ConnectionClosed) for e in events))
                lock_session_file(connection.path).release()  # nobody holds it now
                assert server.connections() == []
                async with httpx2.AsyncClient() as http:  # its id is gone with it
                    gone = await http.post(
                        url,
                        json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                        headers={**ACCEPT, "mcp-session-id": connection.id},
                    )
        finally:
            simulator.close()
    assert gone.status_code == 404
    assert not list((tmp_path / "s").glob(".*.lock"))  # no lock file left behind


async def test_open_sessions_are_bounded_with_a_clear_refusal(tmp_path: Path) -> None:
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url)
        server = AgentServer(
            simulator, notes, sessions=SessionFolder(tmp_path / "s"), max_sessions=2
        )
        try:
            async with serving(server) as url, httpx2.AsyncClient() as http:
                for _ in range(2):
                    await abandoned_session(http, url, call=False)
                refused = await http.post(url, json=INITIALIZE, headers=ACCEPT)
        finally:
            simulator.close()
    assert refused.status_code == 503
    assert "Too many open sessions" in refused.text


async def test_a_thousand_abandoned_sessions_leave_descriptors_and_memory_as_they_were(
    tmp_path: Path,
) -> None:
    """1,000 sessions opened and left without a DELETE, one in four after a call (a call
    is what takes a session file, and its lock, a descriptor)."""
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url, concurrency=32)
        server = AgentServer(
            simulator, notes, sessions=SessionFolder(tmp_path / "s"), idle_seconds=5.0,
            max_sessions=2000,
        )  # fmt: skip
        peak = {"connections": 0, "descriptors": 0}

        async def watch() -> None:
            while True:
                peak["connections"] = max(peak["connections"], len(server.connections()))
                peak["descriptors"] = max(peak["descriptors"], open_descriptors())
                await asyncio.sleep(0.05)

        try:
            async with serving(server) as url:
                async with httpx2.AsyncClient() as http:  # a warm-up: imports, pools, caches
                    await asyncio.gather(*(abandoned_session(http, url) for _ in range(20)))
                await until(lambda: not server.connections(), timeout=60)
                gc.collect()
                descriptors, objects = open_descriptors(), len(gc.get_objects())
                watcher = asyncio.ensure_future(watch())
                for _batch in range(20):
                    async with httpx2.AsyncClient() as http:
                        await asyncio.gather(
                            *(abandoned_session(http, url, call=i % 4 == 0) for i in range(50))
                        )
                await until(lambda: not server.connections(), timeout=120)
                watcher.cancel()
                await asyncio.sleep(0.2)
                gc.collect()
                left, kept = open_descriptors(), len(gc.get_objects()) - objects
        finally:
            simulator.close()
    # Many were open at once (how many depends on the machine's load), and each held a descriptor.
    assert peak["connections"] >= 100 and peak["descriptors"] >= descriptors + 50
    assert left <= descriptors + 5
    assert kept < 3000, f"{kept} objects kept"
    assert len(list((tmp_path / "s").glob("*.json"))) == 280
    assert not list((tmp_path / "s").glob(".*"))  # no lock or owner file left


async def test_a_costly_argument_check_is_bounded_and_the_others_are_served_meanwhile(
    tmp_path: Path,
) -> None:
    tools = toolsets.from_file(write_tools(tmp_path / "tools.json", HOSTILE_TOOLS))
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url)
        server = AgentServer(
            simulator, tools, sessions=SessionFolder(tmp_path / "s"), check_seconds=3.0
        )
        try:
            async with serving(server) as url, Client(url) as hostile, Client(url) as other:
                began = asyncio.get_running_loop().time()
                check = asyncio.ensure_future(hostile.call_tool("lookup", {"name": "a" * 80 + "!"}))
                pings: list[float] = []  # the other client lists the tools meanwhile
                while not check.done():
                    sent = asyncio.get_running_loop().time()
                    await other.list_tools()
                    pings.append(asyncio.get_running_loop().time() - sent)
                    await asyncio.sleep(0.02)
                took = asyncio.get_running_loop().time() - began
                refused = check.result()
                rows: list[Any] = [{"id": i, "tags": ["x"]} for i in range(3000)]
                repeated = await hostile.call_tool(
                    "lookup", {"name": "aa", "rows": [*rows, {"tags": ["x"], "id": 0}]}
                )
        finally:
            simulator.close()
    assert refused.is_error
    assert received_text(refused) == (
        "Input validation error: lookup: the arguments could not be checked within 3 s "
        "(a pattern or a uniqueness rule of its schema costs too much for them)"
    )
    assert 2.9 < took < 6, took  # a deadline, not a measurement: bench/mcp.py measures
    assert len(pings) > 20, pings  # the other client was answered all along
    assert received_text(repeated) == (
        "Input validation error: lookup: arguments.rows repeats an item (item 3000 is an "
        "earlier one again)"
    )
