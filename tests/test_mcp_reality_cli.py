"""``agentworld mcp serve`` with a real twin, spawned by the official SDK's client as any
MCP client spawns a server: shadow mode by default, routing by ``--routes``, grounding in
and recording to ``--traces``; every flag mistake one line before anything starts; and
``agentworld traces`` to fill, show and repair a store."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from faultserver import FaultServer
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcpfixtures import TESTS_DIR, received_text, reply_with, write_tools
from realitykit import any_backend
from twinserver import TOOLS

from agentworld_tui.cli import main
from agentworld_tui.reality.traces import TraceStore

SERVER = str(TESTS_DIR / "twinserver.py")


def served(*words: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentworld_tui", "mcp", "serve", *words],
        env=dict(os.environ),
        cwd=str(TESTS_DIR.parent),
    )


def twin_command(notebook: Path) -> str:
    return shlex.join([sys.executable, SERVER, "stdio", str(notebook)])


def calls_received(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return [json.loads(x)["name"] for x in log.read_text().splitlines()] if log.exists() else []


def saved_tab(folder: Path) -> dict[str, object]:
    [file] = folder.glob("*.json")
    tab: dict[str, object] = json.loads(file.read_text(encoding="utf-8"))["tabs"][0]
    return tab


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    made = tmp_path / "notebook"
    (made / "notes").mkdir(parents=True)
    (made / "notes" / "plan").write_text("ship it")
    return made


async def test_serve_with_a_twin_shadows_every_call_and_the_client_gets_reality(
    tmp_path: Path, notebook: Path
) -> None:
    tools = write_tools(tmp_path / "tools.json", TOOLS)
    folder = tmp_path / "sessions"
    with FaultServer() as fault:
        fault.default = reply_with("wrote 99 bytes to idea")
        params = served(
            str(tools),
            "--server",
            fault.url,
            "--sessions",
            str(folder),
            "--twin-command",
            twin_command(notebook),
        )
        async with Client(params) as client:
            wrote = await client.call_tool("write_note", {"name": "idea", "text": "a boat"})
    assert received_text(wrote) == "wrote 6 bytes to idea"
    assert (notebook / "notes" / "idea").read_text() == "a boat"
    tab = saved_tab(folder)
    [turn] = tab["turns"]  # type: ignore[misc]
    assert turn["observation"] == "wrote 99 bytes to idea"
    assert turn["reality"]["delivered"] == "real"
    assert tab["twin"] == {  # what acted for real, said without secrets
        "domain": "mcp",
        "kind": "mcp-command",
        "command": [sys.executable, SERVER, "stdio", str(notebook)],
        "deliver": "real",
    }


async def test_serve_with_the_default_routes_never_sends_a_write_to_reality_and_keeps_reads(
    tmp_path: Path, notebook: Path
) -> None:
    tools = write_tools(tmp_path / "tools.json", TOOLS)
    folder = tmp_path / "sessions"
    traces = tmp_path / "traces.db"
    with FaultServer() as fault:
        fault.default = reply_with("wrote 3 bytes to plan")
        params = served(
            str(tools),
            "--server",
            fault.url,
            "--sessions",
            str(folder),
            "--twin-command",
            twin_command(notebook),
            "--routes",
            "default",
            "--traces",
            str(traces),
        )
        async with Client(params) as client:
            read = await client.call_tool("read_note", {"name": "plan"})
            wrote = await client.call_tool("write_note", {"name": "plan", "text": "fly"})
        asked = len(fault.chat_requests())
    assert received_text(read) == "ship it" and received_text(wrote) == "wrote 3 bytes to plan"
    assert calls_received(notebook) == ["read_note"]
    assert (notebook / "notes" / "plan").read_text() == "ship it"
    assert asked == 1
    tab = saved_tab(folder)
    assert tab["twin"]["routes"] == "shipped:mcp/routing.toml"  # type: ignore[index]
    turns = tab["turns"]
    assert [t["route"]["answered"] for t in turns] == ["real", "sim"]  # type: ignore[attr-defined]
    assert turns[1]["grounding"]["examples"] == []  # type: ignore[index]
    with TraceStore(traces, writable=False) as store:
        [kept], _ = store.get([1])
    assert (kept.tool, kept.observation, kept.source) == ("read_note", "ship it", "routed")


def one_line(capsys: pytest.CaptureFixture[str], words: list[str]) -> str:
    code = main(words)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    return err.removeprefix("agentworld: ").rstrip("\n")


def test_routing_flags_that_do_not_fit_are_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], notebook: Path
) -> None:
    tools = str(write_tools(tmp_path / "tools.json", TOOLS))
    serve = ["mcp", "serve", tools, "--model", str(tmp_path / "never-loaded.gguf")]
    twin = ["--twin-command", twin_command(notebook)]
    assert one_line(capsys, [*serve, "--routes", "default"]).startswith(
        "--routes goes with a twin: the real server the calls may go to"
    )
    rules = tmp_path / "routes.toml"
    rules.write_text('[[rule]]\nroute = "live"\n', encoding="utf-8")
    assert one_line(capsys, [*serve, *twin, "--routes", str(rules)]) == (
        f"--routes: {rules}:2: rule 1: route must be one of real, sim, shadow (got 'live')"
    )
    assert one_line(capsys, [*serve, "--grounding-budget", "500"]) == (
        "--grounding-budget goes with --traces FILE"
    )
    not_a_store = tmp_path / "notes.db"
    not_a_store.write_text("hello", encoding="utf-8")
    assert one_line(capsys, [*serve, "--traces", str(not_a_store)]).startswith(
        f"--traces: {not_a_store}: not a trace store"
    )
    assert one_line(
        capsys, ["mcp", "serve", "--domain", "terminal", "--twin", "--check", "true"]
    ) == ("--check runs at an episode's end: mcp serve has none to run it at")
    assert one_line(
        capsys, [*serve, "--twin-command", str(tmp_path / "no-such-server")]
    ).startswith("the mcp twin did not start: ")
    assert calls_received(notebook) == []


def test_traces_import_show_and_repair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.domains.tool_call import tool_call_action
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import Workspace

    session, _ = new_session(get_domain("mcp"), Scenario("notes", "Notes"))
    for name, said, route in (("read_note", "ship it", "real"), ("write_note", "done", "sim")):
        turn = session.begin_turn(
            tool_call_action("mcp", {"name": name, "arguments": {"name": "plan"}})
        )
        turn.route = {"tool": name, "route": route, "answered": route, "reason": "rule"}
        session.finish_turn(turn, observation=said, reasoning="", status="complete")
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(Workspace(tabs=[session]).to_dict()), encoding="utf-8")
    bench = tmp_path / "mcp_test.jsonl"
    action = '**Action:**\n```json\n{"name": "list_notes", "arguments": {}}\n```'
    line = {
        "task": "mcp",
        "id": "1",
        "prompt": [f"### Turn 1\n\n{action}"],
        "response": ['**Environment Observation:**\n{"count": 1}'],
        "current_prompt": f"### Turn 2\n\n{action}",
        "system_str": "tools",
        "turn_idx": 2,
        "total_turns": 2,
    }
    bench.write_text(json.dumps(line) + "\n", encoding="utf-8")
    store = tmp_path / "traces.db"
    assert main(["traces", "import", str(store), str(recorded), str(bench)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{recorded}: 1 real exchanges read: 1 added, 1 simulated turns left out",
        f"{bench}: 1 real exchanges read: 1 added",
        f"{store}: 2 exchanges in all",
    ]
    assert main(["traces", "show", str(store)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "mcp\tlist_notes\t1",
        "mcp\tread_note\t1",
        f"{store}: 2 exchanges of 2 tools",
    ]
    assert main(["traces", "repair", str(store)]) == 0
    assert "2 exchanges kept" in capsys.readouterr().out
    with TraceStore(store, writable=False) as kept:
        found, _ = kept.get([1, 2])
    assert [e.observation for e in found] == ["ship it", '{"count": 1}']
    assert (tmp_path / "traces.db.damaged").exists()
    assert one_line(capsys, ["traces", "show", str(tmp_path / "none.db")]) == (
        f"{tmp_path / 'none.db'}: no such trace store"
    )


async def test_serve_a_terminal_with_a_sandbox_twin_starts_the_model_where_reality_is(
    tmp_path: Path,
) -> None:
    seed = tmp_path / "project"
    seed.mkdir()
    (seed / "hello.txt").write_text("hi there\n")
    folder = tmp_path / "sessions"
    with FaultServer() as fault:
        fault.default = reply_with("PREDICTED\nroot@box:/app#")
        params = served(
            "--domain",
            "terminal",
            "--server",
            fault.url,
            "--sessions",
            str(folder),
            "--twin",
            any_backend(),
            "--twin-seed",
            str(seed),
        )
        async with Client(params) as client:
            screen = await client.call_tool(
                "send_keystrokes", {"keystrokes": "cat hello.txt\n", "duration": 0.5}
            )
        [request] = fault.chat_requests()
    assert "hi there" in received_text(screen)  # the real shell's screen, in its sandbox
    tab = saved_tab(folder)
    [turn] = tab["turns"]  # type: ignore[misc]
    assert turn["observation"] == "PREDICTED\nroot@box:/app#"
    assert turn["reality"]["delivered"] == "real"
    assert tab["twin"]["kind"] == "sandbox"  # type: ignore[index]
    # The world model's first turn showed the twin's first screen as the state, not the
    # scenario's own ("user@devbox:~/project$ ").
    assert turn["state"] == "root@twin:/app#"
    assert turn["state"] in request.body["messages"][-1]["content"]


def test_a_captured_server_s_annotations_are_what_the_rules_read(notebook: Path) -> None:
    from agentworld_tui.agents.mcp import toolset as toolsets
    from agentworld_tui.agents.mcp.capture import capture_blocking
    from agentworld_tui.reality.routing import Router, ToolHints, default_rules

    captured = capture_blocking(command=[sys.executable, SERVER, "stdio", str(notebook)])
    toolset = toolsets.from_definitions(captured.tools, captured.source)
    infos = {t.name: t.hints for t in toolsets.tool_infos(toolset)}
    assert infos["read_note"] == ToolHints.of(read_only=True)
    assert infos["write_note"] == ToolHints.of(destructive=True)
    assert infos["list_notes"] == ToolHints()
    router = Router(default_rules(), toolsets.tool_infos(toolset))
    assert [router.decide(t, turn=1).route.value for t in ("read_note", "list_notes")] == [
        "real",
        "sim",
    ]
    assert calls_received(notebook) == []  # listing calls no tool
