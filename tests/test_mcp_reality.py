"""The simulated MCP server with reality beside it, driven by the official SDK's client: a
real twin (tests/twinserver.py, which really writes files and logs every call it gets)
shadows every call, or routing rules send each call real, sim or shadow by the tools' MCP
annotations; a call kept simulated never reaches the real server; after a simulated write
the world model answers what could observe it; a real server that dies mid-session falls
back or fails as its rule says; and every turn records where it was answered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcpfixtures import (
    GROUNDED,
    NOTE_EXCHANGES,
    TESTS_DIR,
    llama_simulator,
    received_text,
    remote_simulator,
    reply_with,
    scripted_world,
    serving,
    until,
    write_tools,
)
from realitykit import notes_twin_over_http
from twinserver import TOOLS

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import OpenSession, SessionFolder
from agentworld_tui.agents.mcp.steering import AgentEvent, CallAnswered
from agentworld_tui.domains import get_domain
from agentworld_tui.reality.grounding import Grounder, Grounding
from agentworld_tui.reality.routing import Route, Router, RuleSet, default_rules, parse_rules
from agentworld_tui.reality.spec import Deliver, TwinSpec
from agentworld_tui.reality.traces import TraceStore
from agentworld_tui.simulator.routing import Reality
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.session_file import ROUTES
from agentworld_tui.world.workspace import load_workspace, open_or_new

SERVER = str(TESTS_DIR / "twinserver.py")


def calls_received(folder: Path) -> list[dict[str, Any]]:
    """What reached the real server, in order (its own log)."""
    log = folder / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def tabs(folder: Path) -> list[dict[str, Any]]:
    """The saved session file's tabs; the file is one the app opens (its records pass the
    session file's declared shape)."""
    [file] = sorted(folder.glob("*.json"))
    load_workspace(file).close()
    return list(json.loads(file.read_text(encoding="utf-8"))["tabs"])


def chat_messages(fault: FaultServer) -> list[list[dict[str, str]]]:
    return [r.body["messages"] for r in fault.chat_requests()]


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    made = tmp_path / "notebook"
    (made / "notes").mkdir(parents=True)
    (made / "notes" / "plan").write_text("ship it")
    return made


@pytest.fixture
def notes(tmp_path: Path) -> toolsets.Toolset:
    """The real server's own tools, annotations and all, as a captured tools file."""
    return toolsets.from_file(write_tools(tmp_path / "tools.json", TOOLS))


def real_twin(
    toolset: toolsets.Toolset,
    spec: TwinSpec,
    rules: RuleSet | None = None,
    deliver: Deliver = "real",
) -> Reality:
    runner, first = spec.start()
    return Reality(runner, spec, deliver, rules, toolsets.tool_infos(toolset), first=first)


def stdio_twin(notebook: Path) -> TwinSpec:
    return TwinSpec("mcp", command=(sys.executable, SERVER, "stdio", str(notebook)))


@pytest.fixture
def http_twin(notebook: Path, tmp_path: Path) -> Iterator[tuple[TwinSpec, subprocess.Popen[bytes]]]:
    with notes_twin_over_http(notebook, tmp_path / "port") as made:
        yield made


async def test_a_twin_without_rules_shadows_every_call_and_the_agent_gets_reality(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook))
    with FaultServer() as fault:
        fault.queue(reply_with("no such notebook"), reply_with("a boat"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                wrote = await client.call_tool("write_note", {"name": "idea", "text": "a boat"})
                read = await client.call_tool("read_note", {"name": "idea"})
        finally:
            simulator.close()
            reality.close()
        messages = chat_messages(fault)
    # Both sides ran every call: reality really wrote, and its answers went to the agent.
    assert (notebook / "notes" / "idea").read_text() == "a boat"
    assert calls_received(notebook) == [
        {"name": "write_note", "arguments": {"name": "idea", "text": "a boat"}},
        {"name": "read_note", "arguments": {"name": "idea"}},
    ]
    assert received_text(wrote) == "wrote 6 bytes to idea"
    assert received_text(read) == "a boat" and not read.is_error
    [tab] = tabs(folder)
    assert tab["twin"]["kind"] == "mcp-command" and tab["twin"]["deliver"] == "real"
    first, second = tab["turns"]
    assert first["observation"] == "no such notebook"  # the prediction stays the turn's own
    assert first["reality"]["real"]["text"] == "wrote 6 bytes to idea"
    assert first["reality"]["delivered"] == "real"
    assert first["reality"]["divergence"]["diverged"] is True
    assert second["reality"]["divergence"]["diverged"] is False
    assert "route" not in first and "predicted" not in first["stats"]["agent"]
    # The world model's history is what the agent received: reality's answer.
    assert messages[1][-2] == {"role": "assistant", "content": "wrote 6 bytes to idea"}


async def test_shadow_mode_can_deliver_the_world_model_s_side(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook), deliver="sim")
    with FaultServer() as fault:
        fault.queue(reply_with("the note says: sail"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                read = await client.call_tool("read_note", {"name": "plan"})
        finally:
            simulator.close()
            reality.close()
    assert received_text(read) == "the note says: sail"
    [turn] = tabs(folder)[0]["turns"]
    assert turn["reality"]["delivered"] == "sim"
    assert turn["reality"]["real"]["text"] == "ship it"
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]


async def test_default_rules_keep_writes_from_reality_and_one_world_after_a_simulated_write(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook), default_rules())
    with FaultServer() as fault:
        fault.queue(
            reply_with("wrote 3 bytes to plan"),
            reply_with("fly"),
            reply_with('{"count": 1, "notes": ["plan"]}'),
        )
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                before = await client.call_tool("read_note", {"name": "plan"})
                wrote = await client.call_tool("write_note", {"name": "plan", "text": "fly"})
                after = await client.call_tool("read_note", {"name": "plan"})
                listed = await client.call_tool("list_notes", {})
        finally:
            simulator.close()
            reality.close()
        messages = chat_messages(fault)
    # Only the first read reached the real server: the write and all after it did not.
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]
    assert (notebook / "notes" / "plan").read_text() == "ship it"
    assert [received_text(r) for r in (before, wrote, after)] == [
        "ship it",
        "wrote 3 bytes to plan",
        "fly",  # the world model's, consistent with the write the agent was told of
    ]
    assert listed.structured_content == {"count": 1, "notes": ["plan"]}
    turns = tabs(folder)[0]["turns"]
    routes = [t["route"] for t in turns]
    assert [(r["route"], r["ruled"], r["rule"], r["answered"]) for r in routes] == [
        ("real", "real", 2, "real"),
        ("sim", "sim", 3, "sim"),
        ("sim", "real", 2, "sim"),
        ("sim", "sim", 1, "sim"),
    ]
    assert routes[0]["reason"] == "rule 2 (reads): readOnlyHint=true"
    assert routes[1]["changes_state"] is True
    assert routes[2]["reason"] == (
        "sim: write_note was simulated at turn 2, read_note may observe it "
        "(real by rule 2 (reads): readOnlyHint=true)"
    )
    assert routes[2]["forced_by"]["tool"] == "write_note"
    # A real call is a turn whose observation is reality's answer, and the world model was
    # not asked for it; later prompts show it as history.
    assert turns[0]["observation"] == "ship it" and turns[0]["status"] == "complete"
    assert turns[0]["stats"]["real"]["status"] == "ok" and "reality" not in turns[0]
    assert len(messages) == 3
    assert messages[0][1:3] == [
        {"role": "user", "content": turns[0]["user_message"]},
        {"role": "assistant", "content": "ship it"},
    ]
    assert all("reality" not in t for t in turns)


ANNOTATION_RULES = """
[[rule]]
name = "reads watched"
readOnlyHint = true
openWorldHint = true
route = "shadow"

[[rule]]
name = "unannotated, by name"
annotated = false
tool = "list_*"
route = "real"

[[rule]]
name = "writes, seen by nothing"
destructiveHint = true
readOnlyHint = false
route = "sim"
affects = []
"""


async def test_rules_on_annotations_route_each_call_through_the_served_path(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook), parse_rules(ANNOTATION_RULES, "rules"))
    with FaultServer() as fault:
        fault.queue(
            reply_with("ship it"),
            reply_with("wrote 4 bytes to plan"),
            reply_with("ship it"),
            reply_with("finally"),
        )
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                await client.call_tool("read_note", {"name": "plan"})
                listed = await client.call_tool("list_notes", {})
                await client.call_tool("write_note", {"name": "plan", "text": "rest"})
                again = await client.call_tool("read_note", {"name": "plan"})
                await client.call_tool("slow", {"seconds": 0})
        finally:
            simulator.close()
            reality.close()
        asked = len(fault.chat_requests())
    # shadow reached reality, real reached it alone, sim never; affects = [] forced nothing.
    assert [c["name"] for c in calls_received(notebook)] == ["read_note", "list_notes", "read_note"]
    assert listed.structured_content == {"count": 1, "notes": ["plan"]}  # reality's, as given
    assert received_text(again) == "ship it"
    assert asked == 4  # read (shadow), write, read (shadow), slow; the real listing asked none
    turns = tabs(folder)[0]["turns"]
    assert [(t["route"]["route"], t["route"]["rule"]) for t in turns] == [
        ("shadow", 1),
        ("real", 2),
        ("sim", 3),
        ("shadow", 1),
        ("sim", 3),  # absent hints are the MCP defaults: it may write
    ]
    assert "changes_state" not in turns[2]["route"]
    assert turns[1]["route"]["reason"] == (
        "rule 2 (unannotated, by name): tool list_notes matches list_*, no annotations"
    )


RULES_WITH_FAILURE = """
[[rule]]
tool = "list_notes"
route = "real"
on_failure = "fail"

[[rule]]
readOnlyHint = true
route = "real"
"""


async def test_a_real_server_killed_mid_session_falls_back_or_fails_as_its_rule_says(
    tmp_path: Path,
    notebook: Path,
    notes: toolsets.Toolset,
    http_twin: tuple[TwinSpec, subprocess.Popen[bytes]],
) -> None:
    spec, process = http_twin
    folder = tmp_path / "sessions"
    reality = real_twin(notes, spec, parse_rules(RULES_WITH_FAILURE, "rules"))
    with FaultServer() as fault:
        fault.queue(reply_with("ship it, says the model"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                real = await client.call_tool("read_note", {"name": "plan"})
                os.kill(process.pid, signal.SIGKILL)
                process.wait(10)
                fallen = await client.call_tool("read_note", {"name": "plan"})
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("list_notes", {})
        finally:
            simulator.close()
            reality.close()
        asked = len(fault.chat_requests())
    assert received_text(real) == "ship it"
    assert received_text(fallen) == "ship it, says the model"
    assert str(failed.value).startswith("the real server could not answer: ")
    assert asked == 1
    turns = tabs(folder)[0]["turns"]
    assert [t["status"] for t in turns] == ["complete", "complete", "error"]
    assert turns[1]["route"]["route"] == "sim" and turns[1]["route"]["ruled"] == "real"
    assert turns[1]["route"]["fallback"]
    assert turns[1]["route"]["reason"].startswith("sim: reality failed (")
    assert turns[1]["stats"]["agent"]["received"]["result"]["content"][0]["text"] == (
        "ship it, says the model"
    )
    assert turns[2]["route"]["failed"] and turns[2]["route"]["route"] == "real"
    assert turns[2]["stats"]["agent"]["received"]["error"]["message"].startswith(
        "the real server could not answer: "
    )


class Reopened:
    """The sessions store of a front-end that serves a session it already has (the app
    serving a tab): here the session file a first server saved, opened again."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self, domain: Domain, scenario: Scenario, title: str) -> OpenSession:
        workspace = open_or_new(self.path)
        session = workspace.tabs[0]

        def save() -> str | None:
            workspace.save()
            return None

        return OpenSession(session, save, workspace.close, self.path)


async def test_a_reopened_session_takes_up_its_router_again(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    with FaultServer() as fault:
        fault.queue(reply_with("wrote 3 bytes to plan"), reply_with("fly"))
        simulator = remote_simulator(fault.url)
        try:
            reality = real_twin(notes, stdio_twin(notebook), default_rules())
            server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
            try:
                async with serving(server) as url, Client(url) as client:
                    await client.call_tool("write_note", {"name": "plan", "text": "fly"})
            finally:
                reality.close()
            [saved] = folder.glob("*.json")
            reality = real_twin(notes, stdio_twin(notebook), default_rules())
            server = AgentServer(simulator, notes, sessions=Reopened(saved), reality=reality)
            try:
                async with serving(server) as url, Client(url) as client:
                    read = await client.call_tool("read_note", {"name": "plan"})
            finally:
                reality.close()
        finally:
            simulator.close()
    # The simulated write, recorded in the file, still keeps reads from reality.
    assert received_text(read) == "fly"
    assert calls_received(notebook) == []
    session = load_workspace(saved).tabs[0]
    assert [t.route["route"] for t in session.turns if t.route] == ["sim", "sim"]
    assert session.turns[1].route is not None
    assert session.turns[1].route["forced_by"]["turn"] == 1


# -- grounding ------------------------------------------------------------------------------


async def test_a_grounded_call_sends_the_most_similar_real_answers_in_its_prompt(
    tmp_path: Path, notes: toolsets.Toolset
) -> None:
    store = TraceStore(tmp_path / "traces.db", create=True)
    store.add_many(NOTE_EXCHANGES)
    folder = tmp_path / "sessions"
    reality = Reality(grounder=Grounder(store), keep_in=store)  # no twin: grounding alone
    with FaultServer() as fault:
        fault.queue(reply_with("buy a boat"), reply_with("wrote 4 bytes to todo"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                read = await client.call_tool("read_note", {"name": "todo list"})
                await client.call_tool("write_note", {"name": "todo", "text": "boat"})
        finally:
            simulator.close()
            reality.close()
        messages = chat_messages(fault)
    assert received_text(read) == "buy a boat"
    # The prompt the world model got, exactly: the examples, best first, before the action.
    assert messages[0][-1] == {"role": "user", "content": GROUNDED}
    turns = tabs(folder)[0]["turns"]
    assert turns[0]["grounding"]["examples"] == [2, 1]
    assert turns[0]["grounding"]["found"] == 2 and turns[0]["grounding"]["budget"] == 2000
    section = turns[0]["grounding"]["text"]
    heading = "### Turn 1\n\n"
    assert turns[0]["user_message"].replace(heading, heading + section + "\n\n") == GROUNDED
    # Later prompts show the turn as written, without its examples; the write was shown
    # the one write_note example.
    assert messages[1][1] == {"role": "user", "content": turns[0]["user_message"]}
    assert turns[1]["grounding"]["examples"] == [3]
    assert "wrote 1 bytes" in messages[1][-1]["content"]
    assert "route" not in turns[0] and "reality" not in turns[0]


async def test_reality_s_answers_go_into_the_store_and_ground_later_simulated_calls(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    store = TraceStore(tmp_path / "traces.db", create=True)
    folder = tmp_path / "sessions"
    runner, first = stdio_twin(notebook).start()
    reality = Reality(
        runner,
        stdio_twin(notebook),
        rules=default_rules(),
        tools=toolsets.tool_infos(notes),
        grounder=Grounder(store),
        keep_in=store,
        first=first,
    )
    with FaultServer() as fault:
        fault.queue(reply_with("wrote 3 bytes to plan"), reply_with("fly"))
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                await client.call_tool("read_note", {"name": "plan"})
                await until(lambda: store.count() == 1)
                await client.call_tool("write_note", {"name": "plan", "text": "fly"})
                await client.call_tool("read_note", {"name": "plan"})
        finally:
            simulator.close()
            reality.close()
        messages = chat_messages(fault)
    with TraceStore(tmp_path / "traces.db", writable=False) as kept:
        [exchange], _ = kept.get([1])
    assert (exchange.tool, exchange.arguments, exchange.observation, exchange.source) == (
        "read_note",
        {"name": "plan"},
        "ship it",
        "routed",
    )
    turns = tabs(folder)[0]["turns"]
    assert "grounding" not in turns[0]  # reality answered it: nothing to ground
    assert turns[1]["grounding"]["examples"] == []
    assert turns[2]["grounding"]["examples"] == [1]
    assert (
        'Example 1, arguments:\n```json\n{"name": "plan"}\n```\nReal result:\n```\nship it\n```'
        in (messages[1][-1]["content"])
    )


# -- the session file -----------------------------------------------------------------------
def test_the_file_s_routes_are_routing_s() -> None:
    assert tuple(r.value for r in Route) == ROUTES


def test_a_damaged_route_or_grounding_record_is_refused_with_its_place(tmp_path: Path) -> None:
    from agentworld_tui.domains.tool_call import tool_call_action
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import Workspace, WorkspaceError

    session, _ = new_session(get_domain("mcp"), Scenario("notes", "Notes"))
    turn = session.begin_turn(tool_call_action("mcp", {"name": "read_note", "arguments": {}}))
    turn.route = default_rules_router().decide("read_note", turn=1).to_dict()
    turn.grounding = Grounding(text="**Real Examples:**", examples=(4,), budget=2000).to_dict()
    session.finish_turn(turn, observation="ship it", reasoning="", status="complete")
    path = tmp_path / "s.json"
    good = Workspace(tabs=[session]).to_dict()
    path.write_text(json.dumps(good))
    reopened = load_workspace(path).tabs[0].turns[0]
    assert reopened.route == turn.route and reopened.grounding == turn.grounding
    damages = {
        "tabs[0].turns[0].route.route: 'live' is not one of real, sim, shadow": (
            lambda t: t["route"].update(route="live")
        ),
        "tabs[0].turns[0].route.answered: 'maybe' is not one of real, sim, both": (
            lambda t: t["route"].update(answered="maybe")
        ),
        "tabs[0].turns[0].route.forced_by.turn: -1 is below 0": (
            lambda t: t["route"].update(forced_by={"tool": "w", "turn": -1})
        ),
        "tabs[0].turns[0].grounding.examples[0]: expected a whole number, got text": (
            lambda t: t["grounding"].update(examples=["4"])
        ),
        "tabs[0].turns[0].grounding.text: expected text, got nothing": (
            lambda t: t["grounding"].pop("text")
        ),
        "tabs[0].turns[0].stats.real.status: 'fine' is not one of ok, error, timeout, crashed": (
            lambda t: t["stats"].update(real={"status": "fine"})
        ),
    }
    for message, damage in damages.items():
        data = json.loads(json.dumps(good))
        damage(data["tabs"][0]["turns"][0])
        path.write_text(json.dumps(data))
        with pytest.raises(WorkspaceError) as caught:
            load_workspace(path)
        assert message in str(caught.value)


def default_rules_router() -> Router:
    return Router(default_rules(), toolsets.tool_infos(toolsets.from_definitions(TOOLS, "t")))


# -- steering and cancelling ----------------------------------------------------------------
async def test_a_held_shadowed_call_shows_reality_s_answer_and_an_edit_is_what_goes_on(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook))
    with FaultServer() as fault:
        fault.default = reply_with("the model's plan")
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                await client.list_tools()
                [connection] = server.connections()
                server.hold(connection.id, None)
                shown: list[str] = []
                for release in (None, "an edited plan"):
                    call = asyncio.ensure_future(client.call_tool("read_note", {"name": "plan"}))
                    await until(lambda: server.held(connection.id) is not None)
                    held = server.held(connection.id)
                    assert held is not None
                    shown.append(held.predicted)
                    assert server.release(connection.id, release)
                    shown.append(received_text(await call))
                server.hold(connection.id, 0)
                await client.call_tool("read_note", {"name": "plan"})
        finally:
            simulator.close()
            reality.close()
        messages = chat_messages(fault)
    # The person saw what the agent would get (reality's), and the agent got it, or the edit.
    assert shown == ["ship it", "ship it", "ship it", "an edited plan"]
    first, edited, _third = tabs(folder)[0]["turns"]
    assert first["reality"]["delivered"] == "real" and first["observation"] == "the model's plan"
    assert edited["reality"]["delivered"] == "sim"  # reality's answer did not reach the agent
    assert edited["reality"]["real"]["text"] == "ship it"
    assert edited["observation"] == "an edited plan"
    assert edited["stats"]["agent"]["predicted"] == "the model's plan"
    assert [m["content"] for m in messages[2] if m["role"] == "assistant"] == [
        "ship it",
        "an edited plan",
    ]


SLOW_IS_REAL = """
[[rule]]
tool = "slow"
route = "real"

[[rule]]
readOnlyHint = true
route = "real"
"""


async def test_a_client_that_cancels_a_real_call_gets_nothing_and_the_turn_is_kept(
    tmp_path: Path, notebook: Path, notes: toolsets.Toolset
) -> None:
    folder = tmp_path / "sessions"
    events: list[AgentEvent] = []
    reality = real_twin(notes, stdio_twin(notebook), parse_rules(SLOW_IS_REAL, "rules"))
    with FaultServer() as fault:
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        server.subscribe(events.append)
        try:
            async with serving(server) as url, Client(url) as client:
                call = asyncio.ensure_future(client.call_tool("slow", {"seconds": 1.5}))
                await until(lambda: bool(calls_received(notebook)))  # reality is at it
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
                await until(lambda: any(isinstance(e, CallAnswered) for e in events))
                after = await client.call_tool("read_note", {"name": "plan"})
        finally:
            simulator.close()
            reality.close()
        asked = len(fault.chat_requests())
    assert received_text(after) == "ship it"
    assert asked == 0
    cancelled, read = tabs(folder)[0]["turns"]
    assert cancelled["status"] == "interrupted" and cancelled["observation"] == ""
    assert cancelled["stats"]["agent"]["received"] is None
    assert "cancelled the call" in cancelled["note"]
    assert cancelled["route"]["route"] == "real"
    assert read["observation"] == "ship it"


async def test_routed_calls_to_an_http_twin_beside_a_local_model(
    tmp_path: Path,
    notebook: Path,
    notes: toolsets.Toolset,
    http_twin: tuple[TwinSpec, subprocess.Popen[bytes]],
) -> None:
    spec, _process = http_twin
    folder = tmp_path / "sessions"
    simulator = llama_simulator(scripted_world(tmp_path / "world.gguf", "wrote 3 bytes to plan"))
    reality = real_twin(notes, spec, default_rules())
    server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
    try:
        async with serving(server) as url, Client(url) as client:
            read = await client.call_tool("read_note", {"name": "plan"})
            wrote = await client.call_tool("write_note", {"name": "plan", "text": "fly"})
            again = await client.call_tool("read_note", {"name": "plan"})
    finally:
        simulator.close()
        reality.close()
    assert received_text(read) == "ship it"
    assert received_text(wrote) == received_text(again) == "wrote 3 bytes to plan"
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]
    turns = tabs(folder)[0]["turns"]
    assert [t["route"]["answered"] for t in turns] == ["real", "sim", "sim"]
    assert tabs(folder)[0]["twin"]["kind"] == "mcp-url"


async def test_reality_s_answer_is_never_asked_for_again_even_when_it_breaks_the_schema(
    tmp_path: Path, notebook: Path
) -> None:
    stricter = [dict(t) for t in TOOLS]
    for tool in stricter:
        if tool["name"] == "list_notes":
            tool["outputSchema"] = {
                "type": "object",
                "properties": {"owner": {"type": "string"}},
                "required": ["owner"],
            }
    notes = toolsets.from_file(write_tools(tmp_path / "stricter.json", stricter))
    rules = parse_rules('[[rule]]\ntool = "list_notes"\nroute = "real"\n', "rules")
    folder = tmp_path / "sessions"
    reality = real_twin(notes, stdio_twin(notebook), rules)
    with FaultServer() as fault:
        simulator = remote_simulator(fault.url)
        server = AgentServer(simulator, notes, sessions=SessionFolder(folder), reality=reality)
        try:
            async with serving(server) as url, Client(url) as client:
                listed = await client.call_tool("list_notes", {})
        finally:
            simulator.close()
            reality.close()
        asked = len(fault.chat_requests())
    assert asked == 0  # the re-ask is for the world model's answers only
    assert listed.is_error and listed.structured_content is None
    assert [part.text for part in listed.content] == [  # type: ignore[union-attr]
        "The real server's result did not fit the tool's output schema: result.owner is required",
        '{"count": 1, "notes": ["plan"]}',
    ]
    [turn] = tabs(folder)[0]["turns"]
    assert turn["attempts"] == [] and turn["route"]["answered"] == "real"
    assert turn["observation"] == '{"count": 1, "notes": ["plan"]}'
    assert turn["note"].startswith("reality's result did not fit the tool's output schema")
