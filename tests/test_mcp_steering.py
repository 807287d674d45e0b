"""Steering agents through the server's API, as the app will, while a real SDK client
calls over HTTP: follow a turn as it streams, hold an observation, edit and release it,
stop a call, inject a perturbation, attach a world."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from faultserver import FaultServer
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcpfixtures import (
    received_text,
    remote_simulator,
    reply_with,
    serving,
    session_turns,
    until,
    write_tools,
)

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import OpenSession, SessionFolder, SessionUnavailable
from agentworld_tui.agents.mcp.steering import (
    AgentEvent,
    CallAnswered,
    ConnectionOpened,
    ObservationHeld,
    SteeringError,
    TurnStarted,
)
from agentworld_tui.simulator import TurnUpdate
from agentworld_tui.world.fictional_world import list_worlds
from agentworld_tui.world.session import Session, new_session

PREDICTED = "groceries: milk, eggs"
EDITED = "groceries: (the file is empty)"


@pytest.fixture
def notes(tmp_path: Path) -> toolsets.Toolset:
    return toolsets.from_file(write_tools(tmp_path / "tools.json"))


def sent_messages(fault: FaultServer, index: int) -> str:
    return json.dumps(fault.chat_requests()[index].body["messages"], ensure_ascii=False)


async def test_a_held_observation_is_edited_and_the_agent_gets_the_edit(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    events: list[AgentEvent] = []
    with FaultServer() as fault:
        fault.default = reply_with(PREDICTED)
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        server.subscribe(events.append)
        try:
            async with serving(server) as url, Client(url) as client:
                await client.list_tools()
                [connection] = server.connections()
                server.hold(connection.id)
                call = asyncio.ensure_future(client.call_tool("read_note", {"title": "groceries"}))
                await until(lambda: server.held(connection.id) is not None)
                held = server.held(connection.id)
                assert held is not None and held.predicted == PREDICTED
                assert not call.done()  # the agent waits while the person decides
                # The prediction is on disk while it is held.
                [on_disk] = session_turns(folder).values()
                assert on_disk[0]["observation"] == PREDICTED
                assert server.release(connection.id, EDITED)
                edited = await call
                # Holding was for one observation: the next goes straight through.
                plain = await client.call_tool("read_note", {"title": "groceries"})
        finally:
            simulator.close()
    assert received_text(edited) == EDITED
    assert received_text(plain) == PREDICTED
    kinds = [type(e) for e in events]
    assert kinds[:4] == [ConnectionOpened, TurnStarted, ObservationHeld, CallAnswered]
    [turns] = session_turns(folder).values()
    first = turns[0]
    assert first["observation"] == EDITED
    assert first["stats"]["agent"]["predicted"] == PREDICTED
    assert first["stats"]["agent"]["received"]["result"]["content"][0]["text"] == EDITED
    assert first["note"] == "edited before the agent received it"
    assert "predicted" not in turns[1]["stats"]["agent"]
    # The world goes on from what the agent saw.
    assert EDITED in sent_messages(fault, 1) and PREDICTED not in sent_messages(fault, 1)


async def test_holding_every_observation_until_told_otherwise(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    envelope = {"content": [{"type": "text", "text": "permission denied"}], "isError": True}
    with FaultServer() as fault:
        fault.default = reply_with(PREDICTED)
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        try:
            async with serving(server) as url, Client(url) as client:
                await client.list_tools()
                agent = server.connections()[0].id
                server.hold(agent, None)
                results = []
                for text in (None, json.dumps(envelope)):
                    call = asyncio.ensure_future(client.call_tool("read_note", {"title": "a"}))
                    await until(lambda: server.held(agent) is not None)
                    assert server.release(agent, text)
                    results.append(await call)
                    await until(lambda: server.held(agent) is None)
                server.hold(agent, 0)
                results.append(await client.call_tool("read_note", {"title": "a"}))
                assert not server.release(agent)  # nothing is held
        finally:
            simulator.close()
    assert received_text(results[0]) == PREDICTED and not results[0].is_error
    # An edit may be an MCP result of its own: an error result stays one.
    assert results[1].is_error and received_text(results[1]) == "permission denied"
    assert received_text(results[2]) == PREDICTED


async def test_stopping_a_held_call_gives_the_agent_an_interrupted_result(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    with FaultServer() as fault:
        fault.default = reply_with(PREDICTED)
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as client:
                await client.list_tools()
                agent = server.connections()[0].id
                server.hold(agent)
                call = asyncio.ensure_future(client.call_tool("read_note", {"title": "a"}))
                await until(lambda: server.held(agent) is not None)
                assert server.stop_call(agent)
                stopped = await call
                assert not server.stop_call(agent)  # nothing runs now
        finally:
            simulator.close()
    assert stopped.is_error and "interrupted" in received_text(stopped)
    [turns] = session_turns(folder).values()
    assert turns[0]["status"] == "interrupted" and turns[0]["observation"] == ""
    assert turns[0]["stats"]["agent"]["predicted"] == PREDICTED


async def test_a_turn_streams_to_whoever_follows_its_run(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    started: list[TurnStarted] = []
    with FaultServer() as fault:
        from faultserver import Reply

        fault.queue(
            Reply(
                reasoning=["the note ", "exists"],
                content=["<predicted_observation>", "milk", ", eggs", "</predicted_observation>"],
            )
        )
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(tmp_path / "s"))
        server.subscribe(lambda e: started.append(e) if isinstance(e, TurnStarted) else None)
        try:
            async with serving(server) as url, Client(url) as client:
                call = asyncio.ensure_future(client.call_tool("read_note", {"title": "a"}))
                await until(lambda: bool(started))
                run = started[0].run
                updates: list[TurnUpdate] = []
                while not updates or updates[-1].finished is None:
                    update = run.take()
                    if update is not None:
                        updates.append(update)
                    await asyncio.sleep(0.01)
                result = await call
        finally:
            simulator.close()
    assert "".join(u.reasoning for u in updates) == "the note exists"
    assert "".join(u.answer for u in updates) == "milk, eggs" == received_text(result)
    assert started[0].connection.id == "agent-1" and started[0].call.tool == "read_note"


async def test_a_perturbation_and_a_world_go_with_the_coming_calls(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "s"
    world = next(w for w in list_worlds()[0])
    with FaultServer() as fault:
        fault.default = reply_with(PREDICTED)
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder))
        try:
            async with serving(server) as url, Client(url) as client:
                await client.list_tools()
                agent = server.connections()[0].id
                preset = next(p for p in server.perturbations() if p.name == "rate-limit")
                server.set_control(agent, preset.instruction, preset=preset.name)
                await client.call_tool("read_note", {"title": "a"})
                await client.call_tool("read_note", {"title": "b"})
                server.attach_world(agent, world)
                await client.call_tool("read_note", {"title": "c"})
                with pytest.raises(SteeringError, match="there is no connection 'agent-9'"):
                    server.hold("agent-9")
        finally:
            simulator.close()
    [turns] = session_turns(folder).values()
    assert turns[0]["control"] == preset.instruction
    assert "Simulation Instruction" in turns[0]["user_message"]
    assert turns[1]["control"] == "" and "Simulation Instruction" not in turns[1]["user_message"]
    assert f"Fictional world: {world.title}" in turns[2]["user_message"]
    assert preset.instruction in fault.chat_requests()[0].body["messages"][-1]["content"]


class OneTab:
    """A store that serves one session the program already has (the app's tab), to one
    agent at a time, saving it where the program saves it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.saves = 0
        self.taken = False

    def open(self, domain: object, scenario: object, title: str) -> OpenSession:
        if self.taken:
            raise SessionUnavailable("this tab is served to another agent")
        self.taken = True

        def save() -> str | None:
            self.saves += 1
            return None

        return OpenSession(self.session, save, lambda: None)


async def test_a_session_the_program_has_is_served_with_its_history(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    from agentworld_tui.agents.mcp.toolset import for_scenario
    from agentworld_tui.domains import get_domain
    from agentworld_tui.world.prompts import load_scenarios

    domain = get_domain("terminal")
    scenario = load_scenarios("terminal")[0][0]
    tab, _problems = new_session(domain, scenario)
    earlier = tab.begin_turn(domain.parse_action("cd /tmp", scenario))
    tab.finish_turn(earlier, observation="root@box:/tmp#", reasoning="", status="complete")
    store = OneTab(tab)
    with FaultServer() as fault:
        fault.default = reply_with("root@box:/tmp# ls\nnotes.txt")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, for_scenario(domain, scenario), sessions=store)
        try:
            async with serving(server) as url, Client(url) as agent, Client(url) as other:
                result = await agent.call_tool("send_keystrokes", {"keystrokes": "ls\n"})
                with pytest.raises(MCPError, match="this tab is served to another agent"):
                    await other.call_tool("send_keystrokes", {"keystrokes": "ls\n"})
        finally:
            simulator.close()
    assert received_text(result) == "root@box:/tmp# ls\nnotes.txt"
    assert [t.number for t in tab.turns] == [1, 2] and store.saves >= 1
    # The agent's call went on from the tab's own history.
    assert "root@box:/tmp#" in sent_messages(fault, 0)
