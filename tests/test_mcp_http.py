"""The simulated MCP server over streamable HTTP, driven by the official SDK's client:
the world model answers each call, each connection is its own saved session, several
clients run at once, and a client that cancels or goes away stops its generation."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcpfixtures import (
    TESTS_DIR,
    llama_simulator,
    received_text,
    remote_simulator,
    reply_with,
    scripted_world,
    serving,
    session_turns,
    until,
    write_tools,
)

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import SessionFolder
from agentworld_tui.agents.mcp.steering import AgentEvent, CallAnswered, TurnStarted
from agentworld_tui.simulator.queue import CallJob
from agentworld_tui.world.workspace import load_workspace

NOTE = "Milk, eggs and 2 lemons.\nRemember the \x1b[1mbold\x1b[0m café receipt."


@pytest.fixture
def notes(tmp_path: Path) -> toolsets.Toolset:
    return toolsets.from_file(write_tools(tmp_path / "tools.json"))


async def test_a_call_gets_the_predicted_observation_and_the_file_holds_it(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    simulator = llama_simulator(scripted_world(tmp_path / "world.gguf", NOTE))
    folder = tmp_path / "sessions"
    server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
    try:
        async with serving(server) as url, Client(url) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["read_note", "count_notes"]
            assert listed.tools[0].annotations is not None
            first = await client.call_tool("read_note", {"title": "groceries"})
            second = await client.call_tool("read_note", {"title": "groceries", "lines": 1})
    finally:
        simulator.close()
    assert not first.is_error
    assert received_text(first) == NOTE  # exactly: escapes and all, never the reasoning
    assert received_text(second) == NOTE
    (name, turns), *others = session_turns(folder).items()
    assert not others
    assert [t["status"] for t in turns] == ["complete", "complete"]
    assert [t["observation"] for t in turns] == [NOTE, NOTE]
    assert turns[0]["reasoning"] == "The agent reads a note."
    agent = turns[1]["stats"]["agent"]
    assert agent["tool"] == "read_note" and agent["call"] == 2 and agent["tool_call"] == 2
    assert agent["received"] == {
        "result": {
            "content": [{"type": "text", "text": NOTE}],
            "isError": False,
            "resultType": "complete",
        }
    }
    # The history the second turn was sent with is the first call and what the agent got.
    workspace = load_workspace(folder / name)
    session = workspace.tabs[0]
    assert session.conversation(session.turns[1]).earlier == (
        (session.turns[0].user_message, NOTE),
    )


async def test_a_refused_call_costs_no_model_time_and_reads_as_a_real_server_s_error(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    with FaultServer() as fault:
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, Client(url) as client:
                bad = await client.call_tool("read_note", {"title": 7})
                huge = await client.call_tool("read_note", {"title": "a" * 300_000})
                with pytest.raises(MCPError, match="Unknown tool: erase_all"):
                    await client.call_tool("erase_all", {})
                [connection] = server.connections()
        finally:
            simulator.close()
        assert fault.chat_requests() == []
    assert bad.is_error
    assert received_text(bad) == (
        "Input validation error: read_note: arguments.title must be a string, not 7"
    )
    assert huge.is_error and "characters of JSON; the limit is 200,000" in received_text(huge)
    assert connection.refused == 3 and connection.calls == 0


async def test_an_observation_that_is_an_mcp_result_is_passed_as_such(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    envelope = {"content": [{"type": "text", "text": "note not found"}], "isError": True}
    with FaultServer() as fault:
        fault.queue(
            reply_with(json.dumps(envelope)),
            reply_with('{"count": 12}'),
            reply_with('{"count": "12"}'),
        )
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, Client(url) as client:
                missing = await client.call_tool("read_note", {"title": "ghost"})
                counted = await client.call_tool("count_notes", {})
                quoted = await client.call_tool("count_notes", {})
        finally:
            simulator.close()
    assert missing.is_error and received_text(missing) == "note not found"
    # A tool with an output schema gets the JSON object as its structured content.
    assert counted.structured_content == {"count": 12}
    assert received_text(counted) == '{"count": 12}'
    # A number written as a string, where the schema wants a number, is read as one.
    assert quoted.structured_content == {"count": 12}
    assert received_text(quoted) == '{"count": 12}'


async def test_an_engine_failure_is_a_protocol_error_and_the_turn_is_kept(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    with FaultServer() as fault:
        fault.queue(Reply(status=500, error_message="GPU fell over"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as client:
                with pytest.raises(MCPError, match="the world model could not answer"):
                    await client.call_tool("read_note", {"title": "a"})
        finally:
            simulator.close()
    [turns] = session_turns(folder).values()
    assert turns[0]["status"] == "error"
    assert turns[0]["stats"]["agent"]["received"]["error"]["message"].startswith(
        "the world model could not answer"
    )


async def test_two_clients_at_once_are_two_isolated_sessions_run_concurrently(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    with FaultServer() as fault:
        # Each first call streams a little and then goes silent: both are in flight at once.
        fault.queue(Reply(content=["<predicted_observation>slow"], hang_after=1))
        fault.queue(Reply(content=["<predicted_observation>slow"], hang_after=1))
        fault.default = reply_with("after")
        simulator = remote_simulator(fault.url, concurrency=4)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as one, Client(url) as two:
                calls = [
                    asyncio.ensure_future(one.call_tool("read_note", {"title": "one"})),
                    asyncio.ensure_future(two.call_tool("read_note", {"title": "two"})),
                ]
                await until(lambda: len(fault.chat_requests()) == 2)
                assert all(c.busy for c in server.connections())
                for connection in server.connections():
                    assert server.stop_call(connection.id)
                stopped = await asyncio.gather(*calls)
                again = await one.call_tool("read_note", {"title": "one-again"})
        finally:
            simulator.close()
    assert all(r.is_error and "interrupted" in received_text(r) for r in stopped)
    assert received_text(again) == "after"
    files = session_turns(folder)
    assert len(files) == 2
    by_count = sorted(files.values(), key=len)
    assert [len(t) for t in by_count] == [1, 2]
    assert by_count[0][0]["status"] == "interrupted"
    assert by_count[0][0]["observation"] == ""  # the agent got no observation
    assert '"title": "two"' in by_count[0][0]["user_message"]
    assert '"title": "one"' in by_count[1][0]["user_message"]
    # The second session's history has only its own turns.
    assert "two" not in by_count[1][1]["user_message"]


async def test_with_a_local_model_the_calls_of_several_clients_queue_in_order(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    import threading

    simulator = llama_simulator(scripted_world(tmp_path / "world.gguf", "ok"))
    server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
    started: list[str] = []
    server.subscribe(
        lambda e: started.append(e.connection.id) if isinstance(e, TurnStarted) else None
    )
    gate = threading.Event()
    simulator.call(CallJob(lambda _engine: gate.wait(30), lambda _r, _e: None))
    try:
        async with serving(server) as url, Client(url) as one, Client(url) as two:
            first = asyncio.ensure_future(one.call_tool("read_note", {"title": "one"}))
            await until(lambda: len(started) == 1)
            second = asyncio.ensure_future(two.call_tool("read_note", {"title": "two"}))
            await until(lambda: len(started) == 2)
            assert simulator.waiting() == started  # one engine: they wait, in the order asked
            gate.set()
            results = await asyncio.gather(first, second)
            runs = [c.call.run for c in server.connections() if c.call is not None]
    finally:
        gate.set()
        simulator.close()
    assert [received_text(r) for r in results] == ["ok", "ok"]
    assert runs[0].started_at <= runs[1].started_at


def streamed(server: AgentServer) -> list[str]:
    """What the world model has streamed so far in each call being answered (read from
    its run's events, which nobody takes while an agent's call is answered)."""
    from agentworld_tui.engines.base import AnswerDelta, ReasoningDelta

    return [
        "".join(
            e.text for e in list(c.call.run._events) if isinstance(e, (ReasoningDelta, AnswerDelta))
        )
        for c in server.connections()
        if c.call is not None
    ]


async def test_a_client_that_cancels_stops_the_generation_and_the_turn_is_kept(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    events: list[AgentEvent] = []
    with FaultServer() as fault:
        fault.queue(Reply(content=["<predicted_observation>par", "tial"], hang_after=1))
        fault.default = reply_with("next")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        server.subscribe(events.append)
        try:
            async with serving(server) as url, Client(url) as client:
                call = asyncio.ensure_future(client.call_tool("read_note", {"title": "a"}))
                # The first piece has reached the engine (the server then hangs; without
                # its closing tag the engine takes it for reasoning until the end).
                await until(lambda: streamed(server) == ["<predicted_observation>par"])
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
                await until(lambda: any(isinstance(e, CallAnswered) for e in events))
                after = await client.call_tool("read_note", {"title": "b"})
        finally:
            simulator.close()
    assert received_text(after) == "next"
    [turns] = session_turns(folder).values()
    assert turns[0]["status"] == "interrupted"
    assert turns[0]["observation"] == ""
    assert turns[0]["stats"]["agent"]["received"] is None
    assert turns[0]["stats"]["agent"]["predicted"] == "par"
    assert "cancelled the call" in turns[0]["note"]
    # What the agent never saw is not in the history the next call was sent with.
    assert "par" not in json.dumps(fault.chat_requests()[-1].body["messages"])


async def test_a_call_right_after_a_cancelled_one_waits_for_it_to_be_recorded(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    with FaultServer() as fault:
        # The cancelled stream ends only when its server notices: a moment, not at once.
        fault.queue(Reply(content=["<predicted_observation>x"] * 50, trickle_s=0.02))
        fault.default = reply_with("next")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as client:
                call = asyncio.ensure_future(client.call_tool("read_note", {"title": "a"}))
                await until(lambda: len(fault.chat_requests()) == 1)
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
                after = await client.call_tool("read_note", {"title": "b"})
        finally:
            simulator.close()
    assert received_text(after) == "next"
    [turns] = session_turns(folder).values()
    assert [t["status"] for t in turns] == ["interrupted", "complete"]


CLIENT = textwrap.dedent(
    """
    import asyncio, sys
    from mcp import Client

    async def main():
        async with Client(sys.argv[1]) as client:
            print("calling", flush=True)
            await client.call_tool("read_note", {"title": "a"})

    asyncio.run(main())
    """
)


async def test_a_client_that_goes_away_mid_call_stops_it_and_the_server_keeps_serving(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    events: list[AgentEvent] = []
    with FaultServer() as fault:
        fault.queue(Reply(hang=True))
        fault.default = reply_with("still here")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        server.subscribe(events.append)
        try:
            async with serving(server) as url:
                agent = subprocess.Popen(
                    [sys.executable, "-c", CLIENT, url],
                    stdout=subprocess.PIPE,
                    env={**os.environ, "PYTHONPATH": str(TESTS_DIR)},
                )
                try:
                    await until(lambda: len(fault.chat_requests()) == 1, timeout=60)
                finally:
                    agent.send_signal(signal.SIGKILL)
                    agent.wait(10)
                await until(lambda: any(isinstance(e, CallAnswered) for e in events))
                async with Client(url) as client:
                    after = await client.call_tool("read_note", {"title": "b"})
        finally:
            simulator.close()
    assert received_text(after) == "still here"
    first = next(e for e in events if isinstance(e, CallAnswered))
    assert first.call.received is None
    gone, kept = sorted(
        session_turns(folder).values(), key=lambda t: t[0]["status"] != "interrupted"
    )
    assert gone[0]["status"] == "interrupted" and "went away" in gone[0]["note"]
    assert kept[0]["status"] == "complete"


async def test_a_client_that_speaks_only_2026_07_28_is_served_with_a_world_of_its_own(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    with FaultServer() as fault:
        fault.queue(reply_with("one"), reply_with("two"), reply_with("other"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url:
                async with Client(url, mode="2026-07-28") as client:
                    listed = await client.list_tools()
                    first = await client.call_tool("read_note", {"title": "a"})
                async with Client(url, mode="2026-07-28") as again:  # the same program, later
                    second = await again.call_tool("read_note", {"title": "b"})
                async with Client(url, mode="2026-07-28") as named:
                    other = await named.call_tool(
                        "read_note", {"title": "c"}, meta={"agentworld/world": "lab-7"}
                    )
                async with Client(url) as handshake:  # probes, is steered to the handshake
                    assert handshake.protocol_version == "2025-11-25"
        finally:
            simulator.close()
        requests = fault.chat_requests()
    assert [t.name for t in listed.tools] == ["read_note", "count_notes"]
    assert [received_text(r) for r in (first, second, other)] == ["one", "two", "other"]
    # The second call was sent with the first as its history; the named world has its own.
    sent = ["".join(m["content"] for m in r.body["messages"]) for r in requests]
    assert '"title": "a"' in sent[1] and "one" in sent[1]
    assert '"title": "a"' not in sent[2]
    files = sorted(session_turns(folder).values(), key=len)
    assert [len(turns) for turns in files] == [1, 2]


async def test_another_address_needs_a_bearer_token_and_every_request_carries_it(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    import httpx2

    from agentworld_tui.agents.mcp.server import ServerError

    with FaultServer() as fault:
        fault.default = reply_with("secret note")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            with pytest.raises(ServerError, match=r"listening on 0\.0\.0\.0 needs a bearer token"):
                await server.start("0.0.0.0")
            token = "t0ken-" + "x" * 20
            async with serving(server, host="0.0.0.0", token=token) as url:
                port = url.rsplit(":", 1)[1].split("/")[0]
                address = f"http://127.0.0.1:{port}/mcp"
                async with httpx2.AsyncClient() as plain:
                    refused = await plain.post(
                        address, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
                    )
                headers = {"Authorization": f"Bearer {token}"}
                async with Client(_authorised(address, headers)) as client:
                    result = await client.call_tool("read_note", {"title": "a"})
        finally:
            simulator.close()
    assert refused.status_code == 401
    assert received_text(result) == "secret note"


def _authorised(url: str, headers: dict[str, str]) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))


async def test_a_port_in_use_is_one_line(tmp_path: Path, notes: toolsets.Toolset) -> None:
    import socket

    from agentworld_tui.agents.mcp.server import ServerError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    with FaultServer() as fault:
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            with pytest.raises(ServerError) as caught:
                await server.start(port=port)
        finally:
            simulator.close()
            taken.close()
    assert str(caught.value) == (
        f"cannot listen on 127.0.0.1:{port}: the port is in use (pick another with --port)"
    )


async def test_a_client_that_ends_its_session_lets_go_of_the_file(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    from agentworld_tui.agents.mcp.steering import ConnectionClosed
    from agentworld_tui.world.workspace import SessionInUse, load_workspace, lock_session_file

    events: list[AgentEvent] = []
    with FaultServer() as fault:
        fault.default = reply_with("ok")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        server.subscribe(events.append)
        try:
            async with serving(server) as url:
                async with Client(url) as client:
                    await client.call_tool("read_note", {"title": "a"})
                    [connection] = server.connections()
                    assert connection.path is not None
                    with pytest.raises(SessionInUse, match="open in this program"):
                        lock_session_file(connection.path)
                await until(lambda: connection.closed)
                lock_session_file(connection.path).release()  # the lock is free again
                reopened = load_workspace(connection.path)
        finally:
            simulator.close()
    assert isinstance(events[-1], ConnectionClosed) and not connection.connected
    assert len(reopened.tabs[0].turns) == 1


async def test_every_output_schema_shape_gets_structured_content_that_conforms(
    tmp_path: Path,
) -> None:
    from outputschemas import RESULTS, TOOLS

    tools = toolsets.from_file(write_tools(tmp_path / "tools.json", TOOLS))
    with FaultServer() as fault:
        fault.queue(*(reply_with(RESULTS[t["name"]][0]) for t in TOOLS))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, tools, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, Client(url) as client:
                # The SDK's client checks structured content against the output schema.
                results = {t["name"]: await client.call_tool(t["name"], {}) for t in TOOLS}
        finally:
            simulator.close()
        system = fault.chat_requests()[0].body["messages"][0]["content"]
    for name, (_text, data) in RESULTS.items():
        result = results[name]
        assert not result.is_error, received_text(result)
        assert result.structured_content == data
        assert json.loads(received_text(result)) == data  # the JSON beside it, as text
    # The model is told each output schema with its tool.
    assert system.count('"outputSchema"') == len(TOOLS)


async def test_output_that_breaks_the_schema_is_asked_again_then_said_on_the_turn(
    tmp_path: Path,
) -> None:
    from outputschemas import TOOLS

    tools = toolsets.from_file(write_tools(tmp_path / "tools.json", TOOLS))
    folder = tmp_path / "s"
    with FaultServer() as fault:
        fault.queue(
            reply_with("It is 22 degrees and cloudy."),
            reply_with('{"temperature": 22, "conditions": "cloudy", "humidity": 70}'),
            reply_with('{"temperature": "warm"}'),
            reply_with("still prose"),
        )
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, tools, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as client:
                fixed = await client.call_tool("get_structured_content", {})
                failed = await client.call_tool("get_structured_content", {})
        finally:
            simulator.close()
        asked = len(fault.chat_requests())
    assert asked == 4
    assert fixed.structured_content == {"temperature": 22, "conditions": "cloudy", "humidity": 70}
    assert failed.is_error
    assert received_text(failed).startswith(
        "The simulated server's result did not fit the tool's output schema (asked 2 times):"
    )
    [turns] = session_turns(folder).values()
    assert len(turns[0]["attempts"]) == 1  # the answer that did not fit is kept
    assert "did not fit the tool's output schema" in turns[1]["note"]
