"""``env serve`` and ``rollout`` routed by rules and grounded in a trace store (issue 42): the
real commands (env serve in a subprocess, driven by openenv-core's own client; rollout with
a scripted policy on a real server, ``policyserver``), the world model a real
OpenAI-compatible server (``slotserver``), each episode's MCP twin a real server written
with the SDK (tests/twinserver.py) that logs every call it receives.

The routing flags are ``mcp serve``'s (``cli/routing_flags.py``). A step the rules keep
simulated never reaches the real server; each step's observation (env serve) or record
(rollout) says where it was answered and why, and which real examples the world model was
shown; a real server that dies mid-episode falls back or fails as the rules say; flags
that cannot be are one line before anything starts."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from faultserver import free_port
from openenv.core.generic_client import GenericEnvClient
from policyserver import Call, PolicyServer, Say
from slotserver import OBSERVATION, SlotServer
from test_env_openenv import serve, wait_until_up
from twinserver import TOOLS

from agentworld_tui.cli import main
from agentworld_tui.reality.traces import TraceStore
from agentworld_tui.world.workspace import load_workspace

TESTS = Path(__file__).resolve().parent
SERVER = str(TESTS / "twinserver.py")
SHIPPED = "shipped:mcp/routing.toml"


def calls_received(folder: Path) -> list[dict[str, Any]]:
    log = folder / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    made = tmp_path / "notebook"
    (made / "notes").mkdir(parents=True)
    (made / "notes" / "plan").write_text("ship it")
    return made


@pytest.fixture
def world_model() -> Any:
    with SlotServer(slots=4, latency=0.0) as server:
        yield server


def tools_file(tmp_path: Path, tools: list[dict[str, Any]]) -> Path:
    """The real server's tools as ``agentworld mcp tools`` saves them, annotations kept."""
    path = tmp_path / "notebook.json"
    path.write_text(json.dumps({"tools": tools}))
    return path


def twin_command(folder: Path) -> str:
    return shlex.join([sys.executable, SERVER, "stdio", str(folder)])


# -- env serve --------------------------------------------------------------------------------
def test_env_serve_routes_each_step_and_its_observation_says_where_it_was_answered(
    tmp_path: Path, notebook: Path, world_model: SlotServer
) -> None:
    port = free_port()
    sessions = tmp_path / "sessions"
    traces = tmp_path / "traces.db"
    output = tmp_path / "served.txt"
    process = serve(
        "--server", world_model.url, "--domain", "mcp",
        "--scenario", str(tools_file(tmp_path, TOOLS[:3])), "--port", str(port),
        "--sessions", str(sessions), "--twin-command", twin_command(notebook),
        "--routes", "default", "--traces", str(traces),
        output=output,
        env={**os.environ, "AGENTWORLD_CONFIG_DIR": str(tmp_path / "config"),
             "AGENTWORLD_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)

        async def episode() -> list[Any]:
            async with GenericEnvClient(base_url=url) as env:
                first = await env.reset(episode_id="routed")
                read = await env.step({"tool": "read_note", "arguments": {"name": "plan"}})
                wrote = await env.step(
                    {"tool": "write_note", "arguments": {"name": "plan", "text": "fly"}}
                )
                again = await env.step({"tool": "read_note", "arguments": {"name": "plan"}})
                return [first, read, wrote, again]

        first, read, wrote, again = asyncio.run(episode())
    finally:
        process.terminate()
        process.wait(60)
    assert first.observation["twin"] == {
        "kind": "mcp-command",
        "deliver": "real",
        "routes": SHIPPED,
    }
    seen = read.observation
    assert seen["text"] == "ship it" and seen["status"] == "complete"
    assert seen["route"]["answered"] == "real"
    assert seen["route"]["reason"] == "rule 2 (reads): readOnlyHint=true"
    assert seen["twin"]["delivered"] == "real" and seen["grounding"] == {}
    assert wrote.observation["text"] == OBSERVATION and wrote.observation["twin"] == {}
    assert wrote.observation["route"]["answered"] == "sim"
    assert wrote.observation["route"]["changes_state"] is True
    assert wrote.observation["grounding"]["examples"] == []
    forced = again.observation["route"]
    assert (forced["route"], forced["ruled"], forced["forced_by"]["tool"]) == (
        "sim",
        "real",
        "write_note",
    )
    assert again.observation["grounding"]["examples"] == [1]  # the first step's real answer
    # The write and the read after it never reached the real server.
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]
    assert (notebook / "notes" / "plan").read_text() == "ship it"
    [file] = sessions.glob("routed*.json")
    tab = load_workspace(file).tabs[0]
    assert tab.twin is not None and tab.twin["routes"] == SHIPPED
    assert [t.route["answered"] for t in tab.turns if t.route] == ["real", "sim", "sim"]
    assert tab.turns[2].grounding is not None and "ship it" in tab.turns[2].grounding["text"]
    with TraceStore(traces, writable=False) as kept:
        [exchange], _ = kept.get([1])
    assert (exchange.tool, exchange.observation, exchange.source) == (
        "read_note",
        "ship it",
        "routed",
    )
    printed = output.read_text(encoding="utf-8")
    assert f"steps routed by {SHIPPED}; grounded in {traces}" in printed
    assert "Traceback" not in printed


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--routes", "default"), "agentworld: --routes goes with a twin: the real server"),
        (("--grounding-budget", "500"), "agentworld: --grounding-budget goes with --traces FILE"),
        (("--traces", "/no/such/folder/t.db"), "agentworld: --traces: /no/such/folder/t.db: the"),
        (
            ("--twin-command", "true", "--routes", "BROKEN"),
            "agentworld: --routes: BROKEN:3: rule 1",
        ),
    ],
)
def test_env_serve_refuses_routing_flags_that_cannot_be_in_one_line(
    tmp_path: Path, argv: tuple[str, ...], said: str
) -> None:
    broken = tmp_path / "routes.toml"
    broken.write_text('[[rule]]\ntool = "x"\nroute = "live"\n')
    argv = tuple(str(broken) if a == "BROKEN" else a for a in argv)
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", "--domain", "mcp", *argv,
         "--server", "http://127.0.0.1:9/v1", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said.replace("BROKEN", str(broken))), lines


# -- rollout ----------------------------------------------------------------------------------
def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


def records(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "episodes.jsonl").read_text().splitlines()
    return {json.loads(line)["key"]: json.loads(line) for line in lines}


def test_rollout_routes_every_step_and_grounds_the_world_model_in_what_the_twin_said(
    tmp_path: Path,
    notebook: Path,
    world_model: SlotServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools_file(tmp_path, TOOLS[:3])
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "note", "instruction": "Note it.", "domain": "mcp", "scenario": "notebook.json"}],
    )
    out = tmp_path / "run"
    traces = tmp_path / "traces.db"
    script = [
        Call("read_note", {"name": "plan"}),
        Call("write_note", {"name": "plan", "text": "fly"}),
        Call("read_note", {"name": "plan"}),
        Say("Done."),
    ]
    with PolicyServer(script) as policy:
        code = main(
            [
                "rollout", str(tasks), "--server", world_model.url,
                "--policy-server", policy.url, "--out", str(out),
                "--twin-command", twin_command(notebook), "--routes", "default",
                "--traces", str(traces), "--grounding-budget", "800",
            ]
        )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    record = records(out)["note#1"]
    steps = record["steps"]
    assert [s["route"]["answered"] for s in steps] == ["real", "sim", "sim"]
    assert steps[0]["observation"] == "ship it" and steps[0]["twin"]["delivered"] == "real"
    assert "grounding" not in steps[0]
    assert steps[2]["grounding"]["examples"] == [1] and steps[2]["grounding"]["budget"] == 800
    assert steps[2]["route"]["forced_by"]["tool"] == "write_note"
    # The policy received reality's answer, then the world model's.
    results = [m["content"] for m in record["messages"] if m["role"] == "tool"]
    assert results == ["ship it", OBSERVATION, OBSERVATION]
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]
    assert "note#1 step 1: read_note: complete" in printed.err
    assert "answered by the twin (rule 2 (reads): readOnlyHint=true)" in printed.err
    assert "answered by the world model (sim: write_note was simulated at turn 2" in printed.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["routes"] == {"real": 1, "sim": 2}
    assert "routes: 1 steps answered by the twin, 2 by the world model, 0 by both" in printed.out
    run = json.loads((out / "run.json").read_text())
    assert (run["routes"], run["traces"]) == (SHIPPED, str(traces))
    tab = load_workspace(out / record["session_file"]).tabs[0]
    assert [t.route["answered"] for t in tab.turns if t.route] == ["real", "sim", "sim"]
    with TraceStore(traces, writable=False) as kept:
        assert kept.count() == 1


CRASH_IS_REAL = """
[[rule]]
tool = "crash"
route = "real"
affects = []  # its fallback does not keep later calls from reality

[[rule]]
tool = "list_notes"
route = "real"
on_failure = "fail"
"""


def test_rollout_a_twin_that_dies_mid_episode_falls_back_then_fails_as_the_rules_say(
    tmp_path: Path,
    notebook: Path,
    world_model: SlotServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools_file(tmp_path, TOOLS[:4])
    rules = tmp_path / "routes.toml"
    rules.write_text(CRASH_IS_REAL)
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "c", "instruction": "Crash.", "domain": "mcp", "scenario": "notebook.json"}],
    )
    out = tmp_path / "run"
    script = [Call("crash", {}), Call("list_notes", {}), Call("read_note", {"name": "plan"})]
    with PolicyServer(script) as policy:
        code = main(
            [
                "rollout", str(tasks), "--server", world_model.url,
                "--policy-server", policy.url, "--out", str(out),
                "--twin-command", twin_command(notebook), "--routes", str(rules),
            ]
        )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 1, printed.err  # the episode did not finish: reality failed it
    record = records(out)["c#1"]
    assert (record["ended"], record["finished"]) == ("twin_error", False)
    assert record["detail"].startswith("the twin could not answer: ")
    crashed, failed = record["steps"]
    # The server died under the call routed to it: the world model answered instead.
    assert crashed["route"]["fallback"] and crashed["route"]["route"] == "sim"
    assert crashed["status"] == "complete" and crashed["observation"] == OBSERVATION
    assert (
        crashed["twin"]["delivered"] == "sim" and "goes on in simulation" in crashed["twin"]["note"]
    )
    # Then a call whose rule says to fail: the episode ends there.
    assert failed["status"] == "error" and failed["route"]["failed"]
    assert failed["twin"]["delivered"] == "none"
    assert [c["name"] for c in calls_received(notebook)] == ["crash"]
    assert "routed to the twin, which failed: " in printed.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["routes"] == {"failed": 1, "fallback": 1, "sim": 1}
    assert summary["ends"] == {"twin_error": 1}


def test_rollout_refuses_routes_without_a_twin_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": "n", "instruction": "x", "domain": "mcp"}]
    )
    argv = ["rollout", str(tasks), "--server", "http://127.0.0.1:9/v1",
            "--policy-server", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main([*argv, "--routes", "default"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "agentworld: --routes goes with a twin: the twin the calls may go to (--twin, or "
        "--twin-command/--twin-url for mcp)"
    )
    assert main([*argv, "--grounding-budget", "300"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "agentworld: --grounding-budget goes with --traces FILE"
    )


def test_a_routed_step_s_line_is_safe_to_print_whatever_the_server_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentworld_tui.cli.rollout import _stepped

    hostile = "gone \x1b]0;owned\x07\x1b[2J\u202enote\x00"
    step = {
        "key": "k#1", "step": 2, "tool": "read_note", "status": "error", "note": hostile,
        "cost": {}, "route": {"answered": "real", "reason": hostile, "failed": hostile},
        "twin": {"delivered": "none", "status": "crashed", "error": hostile},
    }  # fmt: skip
    _stepped(step, set())
    _stepped({**step, "route": {"answered": "sim", "reason": hostile}}, set())
    err = capsys.readouterr().err
    assert "routed to the twin, which failed: gone" in err and "answered by the world model" in err
    assert "nothing delivered" in err
    assert not any(c in err for c in "\x1b\x07\x00\u202e")
