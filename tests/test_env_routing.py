"""The Python environment routed by rules and grounded in recorded reality (issue 42): its
episodes' MCP twin is a real server written with the SDK (tests/twinserver.py, which really
writes files and logs every call it receives), the world model a real OpenAI-compatible
server on 127.0.0.1 or a scripted GGUF in the real llama.cpp.

Each step goes real, sim or shadow as the rules say, and says so (``step.route``, the
session file's ``turn.route``); a step the rules keep simulated never reaches the real
server; after a simulated write, what could observe it is simulated; a real server that
goes away mid-episode falls back to the world model or fails the step, as its rule says;
a trace store grounds the world model (the prompt is checked exactly) and keeps the twin's
answers. ``env serve`` and ``rollout`` are in test_env_routing_cli.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer
from mcpfixtures import GROUNDED, NOTE_EXCHANGES, reply_with, scripted_world
from realitykit import notes_twin_over_http
from twinserver import TOOLS

from agentworld_tui.agents.env import (
    EnvError,
    Environment,
    EnvironmentPool,
    ToolCall,
    TraceStore,
    TwinSpec,
)
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.workspace import load_workspace

TESTS = Path(__file__).resolve().parent
SERVER = str(TESTS / "twinserver.py")
NOTEBOOK = Scenario("notebook", "Notebook", extras={"tools": TOOLS[:3]})
SHIPPED = "shipped:mcp/routing.toml"


def calls_received(folder: Path) -> list[dict[str, Any]]:
    """What reached the real server, in order (its own log)."""
    log = folder / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def chat_messages(fault: FaultServer) -> list[list[dict[str, str]]]:
    return [r.body["messages"] for r in fault.chat_requests()]


def stdio_twin(folder: Path) -> TwinSpec:
    return TwinSpec("mcp", command=(sys.executable, SERVER, "stdio", str(folder)))


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    made = tmp_path / "notebook"
    (made / "notes").mkdir(parents=True)
    (made / "notes" / "plan").write_text("ship it")
    return made


@pytest.fixture
def http_twin(notebook: Path, tmp_path: Path) -> Iterator[tuple[TwinSpec, subprocess.Popen[bytes]]]:
    with notes_twin_over_http(notebook, tmp_path / "port") as made:
        yield made


def test_default_rules_keep_writes_from_the_twin_and_one_world_after_a_simulated_write(
    tmp_path: Path, notebook: Path
) -> None:
    path = tmp_path / "episode.json"
    with FaultServer() as fault:
        fault.queue(
            reply_with("wrote 3 bytes to plan"),
            reply_with("fly"),
            reply_with('{"count": 1, "notes": ["plan"]}'),
        )
        with Environment(
            "mcp",
            engine=fault.url,
            scenario=NOTEBOOK,
            twin=stdio_twin(notebook),
            routes="default",
            session_file=path,
        ) as env:
            env.reset()
            before = env.call_tool("read_note", {"name": "plan"})
            wrote = env.call_tool("write_note", {"name": "plan", "text": "fly"})
            after = env.call_tool("read_note", {"name": "plan"})
            listed = env.call_tool("list_notes", {})
        messages = chat_messages(fault)
    # Only the first read reached the real server: the write and all after it did not.
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]
    assert (notebook / "notes" / "plan").read_text() == "ship it"
    assert [s.observation.text for s in (before, wrote, after)] == [
        "ship it",
        "wrote 3 bytes to plan",
        "fly",  # the world model's, consistent with the write the agent was told of
    ]
    assert json.loads(listed.observation.text) == {"count": 1, "notes": ["plan"]}
    routes = [s.route for s in (before, wrote, after, listed)]
    assert all(r is not None for r in routes)
    assert [(r["route"], r["ruled"], r["rule"], r["answered"]) for r in routes] == [  # type: ignore[index]
        ("real", "real", 2, "real"),
        ("sim", "sim", 3, "sim"),
        ("sim", "real", 2, "sim"),
        ("sim", "sim", 1, "sim"),
    ]
    assert before.route["reason"] == "rule 2 (reads): readOnlyHint=true"  # type: ignore[index]
    assert after.route["forced_by"]["tool"] == "write_note"  # type: ignore[index]
    assert after.route["reason"].startswith("sim: write_note was simulated at turn 2")  # type: ignore[index]
    # Reality answered the first step alone: the world model was not asked; later prompts
    # show reality's answer as history.
    assert before.twin is not None
    assert (before.twin.delivered, before.twin.status, before.twin.real) == (
        "real",
        "ok",
        "ship it",
    )
    assert before.twin.score is None and before.twin.prediction == ""
    assert wrote.twin is None and after.twin is None
    assert len(messages) == 3
    assert messages[0][-2] == {"role": "assistant", "content": "ship it"}
    assert before.to_dict()["route"]["answered"] == "real"
    kept = load_workspace(path).tabs[0]
    assert kept.twin is not None and kept.twin["routes"] == SHIPPED
    assert [t.route["answered"] for t in kept.turns if t.route] == ["real", "sim", "sim", "sim"]
    assert kept.turns[0].observation == "ship it" and kept.turns[0].stats["real"]["status"] == "ok"


RULES_WITH_FAILURE = """
[[rule]]
tool = "list_notes"
route = "real"
on_failure = "fail"

[[rule]]
tool = "write_note"
route = "shadow"
on_failure = "fail"

[[rule]]
readOnlyHint = true
route = "real"
"""


def test_a_real_server_gone_mid_episode_falls_back_or_fails_the_step_as_its_rule_says(
    tmp_path: Path, notebook: Path, http_twin: tuple[TwinSpec, subprocess.Popen[bytes]]
) -> None:
    spec, process = http_twin
    rules = tmp_path / "routes.toml"
    rules.write_text(RULES_WITH_FAILURE)
    path = tmp_path / "episode.json"
    with FaultServer() as fault:
        fault.queue(reply_with("ship it, says the model"), reply_with("wrote 4 bytes to plan"))
        with Environment(
            "mcp",
            engine=fault.url,
            scenario=NOTEBOOK,
            twin=spec,
            routes=rules,
            session_file=path,
        ) as env:
            env.reset()
            real = env.call_tool("read_note", {"name": "plan"})
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            fallen = env.call_tool("read_note", {"name": "plan"})
            failed = env.call_tool("list_notes", {})
            shadowed = env.call_tool("write_note", {"name": "plan", "text": "rest"})
            going_on = env.observation()
        asked = len(fault.chat_requests())
    assert real.observation.text == "ship it" and real.status == "complete"
    # on_failure = "sim": the world model answers, and the step says reality failed.
    assert fallen.status == "complete" and fallen.observation.text == "ship it, says the model"
    assert fallen.route is not None and fallen.route["fallback"]
    assert (fallen.route["route"], fallen.route["ruled"]) == ("sim", "real")
    assert fallen.route["reason"].startswith("sim: reality failed (")
    assert fallen.twin is not None and fallen.twin.delivered == "sim"
    assert fallen.twin.status != "ok" and "goes on in simulation" in fallen.twin.note
    # on_failure = "fail": the step fails, nothing is delivered, the episode goes on.
    for step in (failed, shadowed):
        assert step.status == "error" and step.failed
        assert step.note.startswith("the twin could not answer: ")
        assert step.observation.text == ""
        assert step.route is not None and step.route["failed"]
        assert step.twin is not None and step.twin.delivered == "none"
    assert failed.route["route"] == "real"  # type: ignore[index]
    assert shadowed.route["route"] == "shadow"  # type: ignore[index]
    assert going_on.text == "ship it, says the model"
    assert asked == 2  # the fallback, and the shadowed write's world-model side
    turns = load_workspace(path).tabs[0].turns
    assert [t.status for t in turns] == ["complete", "complete", "error", "error"]
    assert turns[3].raw  # the prediction nobody received stays in the turn
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]


def filled_store(path: Path) -> Path:
    with TraceStore(path, create=True) as store:
        store.add_many(NOTE_EXCHANGES)
    return path


def test_a_grounded_step_sends_the_most_similar_real_answers_and_a_fork_shares_the_store(
    tmp_path: Path,
) -> None:
    traces = filled_store(tmp_path / "traces.db")
    path = tmp_path / "episode.json"
    with FaultServer() as fault:
        fault.queue(
            reply_with("buy a boat"), reply_with("wrote 4 bytes to todo"), reply_with("no boat")
        )
        env = Environment(
            "mcp", engine=fault.url, scenario=NOTEBOOK, traces=str(traces), session_file=path
        )
        try:
            env.reset()
            read = env.call_tool("read_note", {"name": "todo list"})
            branch = env.fork()
            wrote = env.call_tool("write_note", {"name": "todo", "text": "boat"})
            store = env.routing.store if env.routing is not None else None
            env.close()
            assert store is not None and store.count() == 3  # the fork still holds it
            again = branch.call_tool("read_note", {"name": "shopping"})
        finally:
            env.close()
            branch.close()
        messages = chat_messages(fault)
    with pytest.raises(sqlite3.ProgrammingError):  # opened from a path: closed with the last
        store.count()
    assert read.observation.text == "buy a boat"
    # The prompt the world model got, exactly: the examples, best first, before the action.
    assert messages[0][-1] == {"role": "user", "content": GROUNDED}
    assert read.grounding is not None and read.grounding["tokens"] > 0
    assert read.grounding == {
        "examples": [2, 1],
        "tokens": read.grounding["tokens"],
        "budget": 2000,
        "found": 2,
    }
    assert read.route is None and read.twin is None  # no twin: every step is simulated
    assert read.to_dict()["grounding"]["examples"] == [2, 1]
    assert wrote.grounding is not None and wrote.grounding["examples"] == [3]
    assert again.grounding is not None and again.grounding["examples"][0] == 1
    turn = load_workspace(path).tabs[0].turns[0]
    assert turn.grounding is not None and turn.grounding["examples"] == [2, 1]
    heading = "### Turn 1\n\n"
    assert turn.user_message.replace(heading, heading + turn.grounding["text"] + "\n\n") == GROUNDED
    # Later prompts show the turn as written, without its examples.
    assert messages[1][1] == {"role": "user", "content": turn.user_message}


async def test_the_twin_s_answers_ground_later_steps_with_a_local_world_model(
    tmp_path: Path, notebook: Path
) -> None:
    """asyncio, a scripted GGUF world model in llama.cpp: reality's answer to the first
    step goes into the store and grounds the simulated steps after it."""
    from agentworld_tui.engines.llama import LlamaEngine

    model = scripted_world(tmp_path / "world.gguf", "wrote 3 bytes to plan")
    store = TraceStore(tmp_path / "traces.db", create=True)
    env = Environment(
        "mcp",
        engine=LlamaEngine(model, n_ctx=8192, threads=1),
        scenario=NOTEBOOK,
        twin=stdio_twin(notebook),
        routes="default",
        traces=store,
        grounding_budget=500,
    )
    try:
        await env.areset()
        read = await env.astep(ToolCall("read_note", {"name": "plan"}))
        wrote = await env.astep(ToolCall("write_note", {"name": "plan", "text": "fly"}))
        again = await env.astep(ToolCall("read_note", {"name": "plan"}))
    finally:
        await env.aclose()
    assert store.count() == 1  # given as a store: its giver's to close
    [exchange], _ = store.get([1])
    store.close()
    assert (exchange.tool, exchange.arguments, exchange.observation, exchange.source) == (
        "read_note",
        {"name": "plan"},
        "ship it",
        "routed",
    )
    assert read.observation.text == "ship it" and read.grounding is None  # reality answered
    assert wrote.observation.text == again.observation.text == "wrote 3 bytes to plan"
    assert wrote.grounding is not None and wrote.grounding["examples"] == []
    assert again.grounding is not None
    assert again.grounding == {
        "examples": [1],
        "tokens": again.grounding["tokens"],
        "budget": 500,
        "found": 1,
    }
    assert [s.route["answered"] for s in (read, wrote, again)] == ["real", "sim", "sim"]  # type: ignore[index]
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]


def test_a_pool_shares_the_rules_and_one_store_each_environment_beside_its_own_twin(
    tmp_path: Path, notebook: Path
) -> None:
    traces = tmp_path / "traces.db"
    with FaultServer() as fault:
        fault.default = reply_with("wrote 1 bytes to x")
        pool = EnvironmentPool(
            "mcp",
            2,
            engine=fault.url,
            scenario=NOTEBOOK,
            twin=stdio_twin(notebook),
            routes="default",
            traces=traces,
        )
        try:
            pool.reset()
            first = pool.step(
                [ToolCall("read_note", {"name": "plan"}), ToolCall("read_note", {"name": "x"})]
            )
            second = pool.step([ToolCall("write_note", {"name": "x", "text": "y"}), None])
            stores = {id(env.routing.store) for env in pool if env.routing is not None}
        finally:
            pool.close()
    assert len(stores) == 1
    assert [s.observation.text for s in first] == ["ship it", "no note named x"]  # type: ignore[union-attr]
    assert second[0].route["answered"] == "sim" and second[1] is None  # type: ignore[union-attr]
    assert sorted(c["arguments"]["name"] for c in calls_received(notebook)) == ["plan", "x"]
    with TraceStore(traces, writable=False) as kept:
        assert kept.count() == 2  # both environments' real answers, a tool error included


def test_the_gym_adapter_carries_the_route_in_its_info(tmp_path: Path, notebook: Path) -> None:
    from agentworld_tui.agents.env.gym import SimulatedEnv

    with FaultServer() as fault:
        fault.default = reply_with("wrote 1 bytes to x")
        env = SimulatedEnv(
            "mcp",
            engine=fault.url,
            scenario=str(write_scenario(tmp_path)),
            twin=stdio_twin(notebook),
            routes="default",
            traces=tmp_path / "traces.db",
        )
        try:
            env.reset()
            shown, _r, _t, _tr, read = env.step(
                json.dumps({"name": "read_note", "arguments": {"name": "plan"}})
            )
            _s, _r, _t, _tr, wrote = env.step(
                json.dumps({"name": "write_note", "arguments": {"name": "x", "text": "y"}})
            )
        finally:
            env.close()
    assert shown == "ship it"
    assert read["route"]["answered"] == "real" and read["twin"]["delivered"] == "real"
    assert "grounding" not in read  # reality answered it: nothing to ground
    assert wrote["route"]["answered"] == "sim" and wrote["route"]["changes_state"] is True
    assert wrote["grounding"]["examples"] == []
    assert calls_received(notebook) == [{"name": "read_note", "arguments": {"name": "plan"}}]


def write_scenario(tmp_path: Path) -> Path:
    """The real server's tools as a tools file: the annotations the rules read are kept."""
    path = tmp_path / "notebook.json"
    path.write_text(json.dumps({"tools": TOOLS[:3]}))
    return path


def test_routing_arguments_that_cannot_be_are_one_line(tmp_path: Path, notebook: Path) -> None:
    broken = tmp_path / "routes.toml"
    broken.write_text('[[rule]]\ntool = "read_*"\nroute = "live"\n')
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("not a store")
    twin = stdio_twin(notebook)
    wrong: list[tuple[dict[str, Any], str]] = [
        ({"routes": "default"}, "routes go with a twin"),
        ({"twin": twin, "routes": broken}, f"routes: {broken}:3: rule 1: route must be one of"),
        ({"twin": twin, "routes": "  "}, "routes is empty"),
        ({"twin": twin, "routes": tmp_path / "none.toml"}, "cannot read"),
        ({"twin": twin, "routes": 7}, "routes is a rule file, 'default' or a RuleSet"),
        ({"grounding_budget": 500}, "grounding_budget goes with traces"),
        ({"traces": tmp_path / "t.db", "grounding_budget": 5}, "from 100 to 200,000 tokens"),
        ({"traces": not_a_store}, "traces: "),
        ({"traces": tmp_path / "no" / "t.db"}, "the folder does not exist"),
    ]
    with FaultServer() as fault:
        for kwargs, said in wrong:
            with pytest.raises(EnvError) as caught:
                Environment("mcp", engine=fault.url, scenario=NOTEBOOK, **kwargs)
            assert said in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "t.db").exists()


def test_no_rules_a_twin_still_shadows_every_step_and_the_session_keeps_it(
    tmp_path: Path, notebook: Path
) -> None:
    with FaultServer() as fault:
        fault.queue(reply_with("a boat"))
        with Environment(
            "mcp",
            engine=fault.url,
            scenario=NOTEBOOK,
            twin=stdio_twin(notebook),
            traces=tmp_path / "traces.db",
        ) as env:
            env.reset()
            read = env.call_tool("read_note", {"name": "plan"})
            assert env.session.twin is not None and "routes" not in env.session.twin
    assert read.observation.text == "ship it" and read.route is None
    assert read.twin is not None and read.twin.prediction == "a boat" and read.twin.diverged
    assert read.grounding is not None and read.grounding["examples"] == []
    with TraceStore(tmp_path / "traces.db", writable=False) as kept:
        [exchange], _ = kept.get([1])
    assert (exchange.observation, exchange.source) == ("ship it", "twin")


async def test_routed_steps_of_many_episodes_at_once_never_mix(
    tmp_path: Path, notebook: Path
) -> None:
    with FaultServer() as fault:
        fault.default = reply_with("wrote 1 bytes")
        envs = [
            Environment(
                "mcp",
                engine=fault.url,
                scenario=NOTEBOOK,
                twin=stdio_twin(notebook),
                routes="default",
            )
            for _ in range(3)
        ]
        try:
            await asyncio.gather(*(e.areset() for e in envs))
            await envs[0].acall_tool("write_note", {"name": "plan", "text": "x"})
            reads = await asyncio.gather(
                *(e.acall_tool("read_note", {"name": "plan"}) for e in envs)
            )
        finally:
            for e in envs:
                await e.aclose()
    # The simulated write forked only its own episode's world: the others read reality.
    assert [r.route["answered"] for r in reads] == ["sim", "real", "real"]  # type: ignore[index]
    assert [r.observation.text for r in reads[1:]] == ["ship it", "ship it"]
    assert len(calls_received(notebook)) == 2


def test_a_tools_file_as_scenario_keeps_the_annotations_for_the_rules_not_for_the_prompt(
    tmp_path: Path,
) -> None:
    from agentworld_tui.agents.env.routing import scenario_tool_infos
    from agentworld_tui.domains import get_domain
    from agentworld_tui.domains.scenario_file import load_scenario_file
    from agentworld_tui.world.session import new_session

    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps({"result": {"tools": TOOLS[:3]}}))
    table = tmp_path / "notes.toml"
    table.write_text(
        '[[scenario]]\nname = "notes"\n\n[[scenario.tools]]\nname = "read_note"\n'
        "[scenario.tools.annotations]\nreadOnlyHint = true\n"
    )
    for path in (write_scenario(tmp_path), listed, table):
        scenario = load_scenario_file(path)
        hints = {t.name: t.hints.to_dict() for t in scenario_tool_infos(scenario)}
        assert hints["read_note"] == {"readOnlyHint": True}, path
        session, _ = new_session(get_domain("mcp"), scenario)
        assert "read_note" in session.system_prompt and "Hint" not in session.system_prompt
    assert hints == {"read_note": {"readOnlyHint": True}}
    infos = scenario_tool_infos(load_scenario_file(write_scenario(tmp_path)))
    assert [(t.name, t.hints.to_dict()) for t in infos] == [
        ("write_note", {"destructiveHint": True}),
        ("read_note", {"readOnlyHint": True}),
        ("list_notes", {}),
    ]
