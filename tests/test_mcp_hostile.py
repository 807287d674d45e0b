"""Malformed requests to the simulated server, over HTTP and stdio: each gets the
protocol's error, nothing reaches the world model, and the server goes on serving.

The requests are written by hand here on purpose (an SDK client would never send them);
the server answering them is the SDK's, as everywhere else."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from faultserver import FaultServer
from mcp import Client
from mcpfixtures import (
    TESTS_DIR,
    received_text,
    remote_simulator,
    reply_with,
    serving,
    write_tools,
)

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import SessionFolder

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "hand-written", "version": "0"},
    },
}


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads([d for d in data if d][-1]))


async def test_malformed_http_requests_get_protocol_errors_and_change_nothing(
    tmp_path: Path,
) -> None:
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, httpx2.AsyncClient() as http:
                opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
                session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
                await http.post(
                    url,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=session,
                )

                async def call(params: object) -> dict[str, Any]:
                    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
                    return answer_of(await http.post(url, json=body, headers=session))

                not_json = await http.post(url, content=b"{not json", headers=session)
                no_name = await call({"arguments": {"title": "a"}})
                listed_args = await call({"name": "read_note", "arguments": ["a"]})
                unknown = answer_of(
                    await http.post(
                        url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/erase"},
                        headers=session,
                    )
                )  # fmt: skip
                stranger = await http.post(
                    url, json=INITIALIZE, headers={**ACCEPT, "mcp-session-id": "not-a-session"}
                )
                async with Client(url) as client:
                    after = await client.call_tool("read_note", {"title": "a"})
        finally:
            simulator.close()
        sent = len(fault.chat_requests())
    assert not_json.status_code == 400
    assert answer_of(not_json)["error"]["code"] == -32700
    assert no_name["error"]["code"] == -32602
    assert listed_args["error"]["code"] == -32602
    assert unknown["error"]["code"] == -32601
    assert stranger.status_code == 404
    assert received_text(after) == "fine" and sent == 1


def test_garbage_on_stdin_is_answered_and_the_server_goes_on(tmp_path: Path) -> None:
    tools = write_tools(tmp_path / "tools.json")
    requests = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json-rpc",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    with FaultServer() as fault:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", "mcp", "serve", str(tools),
             "--server", fault.url, "--sessions", str(tmp_path / "s")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=TESTS_DIR.parent,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            for request in requests:
                line = request if isinstance(request, str) else json.dumps(request)
                process.stdin.write(line + "\n")
                process.stdin.flush()
            answers = {}
            while 3 not in answers:  # a client reads its answers before it leaves
                message = json.loads(process.stdout.readline())
                answers[message.get("id")] = message
        finally:
            process.stdin.close()
            code = process.wait(60)
    assert code == 0
    assert answers[2]["error"]["code"] == -32602  # a call without a tool name
    assert [t["name"] for t in answers[3]["result"]["tools"]] == ["read_note", "count_notes"]


@pytest.mark.parametrize("size", [5 * 1024 * 1024])
async def test_a_body_over_the_transport_s_limit_is_refused(tmp_path: Path, size: int) -> None:
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with FaultServer() as fault:
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, httpx2.AsyncClient() as http:
                body = {**INITIALIZE, "params": {**INITIALIZE["params"], "pad": "x" * size}}
                refused = await http.post(url, json=body, headers=ACCEPT)
        finally:
            simulator.close()
    assert refused.status_code == 413


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of an SSE body, each as its fields."""
    events: list[dict[str, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            if name and not line.startswith(":"):
                fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


async def replay(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> str:
    """What a GET with Last-Event-ID is sent within a second (the stream stays open)."""
    text = ""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(1.0), http.stream("GET", url, headers=headers) as response:
            async for chunk in response.aiter_text():
                text += chunk
    return text


async def test_sse_streams_open_with_a_priming_event_and_replay_only_into_their_session(
    tmp_path: Path,
) -> None:
    from agentworld_tui import __version__

    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with FaultServer() as fault:
        fault.default = reply_with("fine")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, httpx2.AsyncClient() as http:
                sessions = []
                for _ in range(2):
                    opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
                    info = answer_of(opened)["result"]["serverInfo"]
                    sessions.append(
                        {
                            **ACCEPT,
                            "mcp-session-id": opened.headers["mcp-session-id"],
                            "mcp-protocol-version": "2025-11-25",
                        }
                    )
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "read_note", "arguments": {"title": "a"}},
                }
                answered = await http.post(url, json=call, headers=sessions[0])
                events = sse_events(answered.text)
                last = events[0]["id"]
                get = {"Accept": "text/event-stream", "last-event-id": last}
                replayed = await replay(http, url, {**sessions[0], **get})
                # Another session cannot have the first one's events replayed to it.
                stranger = await replay(http, url, {**sessions[1], **get})
        finally:
            simulator.close()
    assert info["version"] == __version__
    first = events[0]
    assert first["id"] and first.get("data", "") == "" and first["retry"] == "2000"
    assert "fine" in events[-1]["data"]
    assert '"text":"fine"' in replayed  # what the stream carried after the priming event
    assert replayed and "fine" not in stranger
