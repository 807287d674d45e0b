"""Adding a domain is one module, one prompts folder and its tests: a domain of the test's
own (tests/toy_domain.py) is registered from here and driven through ``predict``, the
app's generic pane, export, judging, the Python environment, and, installed as a plug-in
(an entry point, as a package declares it), ``mcp serve`` and OpenEnv's ``env serve``,
with nothing else changed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply, free_port
from ggufgen import write_scripted_model
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcpfixtures import received_text, session_turns
from openenv.core.generic_client import GenericEnvClient
from test_app import make_app, wait_for
from test_env_openenv import wait_until_up
from toy_domain import USAGE

from agentworld_tui.agents.env import ActionError, Environment, ToolCall
from agentworld_tui.cli import main
from agentworld_tui.domains import DOMAINS, PLUGIN_GROUP
from agentworld_tui.judging.prompts import project_prompts, strip_marker
from agentworld_tui.ui.panes.generic import GenericPane
from agentworld_tui.world.domain import Domain, DomainRegistry
from agentworld_tui.world.prompts import load_scenarios

TESTS = Path(__file__).resolve().parent
STORED = '{"ok": true, "a": "1"}'

ANSWER = (
    'The store has it.</think><predicted_observation>{"ok": true, "a": "1"}</predicted_observation>'
)


@pytest.fixture
def toy(isolated_dirs: dict[str, Path]) -> Iterator[Path]:
    prompts = isolated_dirs["config"] / "prompts" / "toy"
    prompts.mkdir(parents=True)
    (prompts / "system_prompt.txt").write_text(
        "You simulate a key-value store. It holds: {{store}}\n", "utf-8"
    )
    (prompts / "scenarios.toml").write_text(
        '[[scenario]]\nname = "empty"\ntitle = "An empty store"\nstate = "{}"\n', "utf-8"
    )
    (prompts / "judge_system_prompt.txt").write_text("Judge the store's answers.\n", "utf-8")
    DOMAINS.register("toy", "toy_domain:ToyDomain", "Toy")
    yield prompts
    DOMAINS.unregister("toy")


@pytest.fixture
def installed(toy: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of a program in which the toy is installed: a package's metadata
    declaring the domain's entry point, the way pip leaves it."""
    site = tmp_path / "site"
    metadata = site / "agentworld_toy-1.0.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agentworld-toy\nVersion: 1.0\n", "utf-8"
    )
    (metadata / "entry_points.txt").write_text(
        f"[{PLUGIN_GROUP}]\ntoy = toy_domain:ToyDomain\n", "utf-8"
    )
    path = [str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


@pytest.fixture
def world_model() -> Iterator[FaultServer]:
    reply = Reply(
        reasoning=["The store has it."],
        content=[f"<predicted_observation>{STORED}</predicted_observation>"],
    )
    with FaultServer(default=reply) as running:
        yield running


def test_the_registered_domain_is_a_whole_domain(toy: Path) -> None:
    domain = DOMAINS["toy"]
    assert isinstance(domain, Domain) and domain.pane is None
    assert [tool.name for tool in domain.tools(load_scenarios("toy")[0][0])] == ["act"]
    for name in DOMAINS:
        assert isinstance(DOMAINS[name], Domain), name


def test_predict_runs_a_registered_domain(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_scripted_model(tmp_path / "toy.gguf", ANSWER, n_ctx_train=8192)
    session = tmp_path / "toy-session.json"
    argv = ["predict", "--model", str(model), "--threads", "1", "--domain", "toy"]
    assert main([*argv, "--session", str(session), "set a 1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "a": "1"}
    assert main([*argv, "--json", "get b"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == {"op": "get", "key": "b"}
    assert main([*argv, "del a"]) == 2
    assert "write get KEY or set KEY VALUE" in capsys.readouterr().err

    out = tmp_path / "toy.md"
    assert main(["export", str(session), "--format", "markdown", "-o", str(out)]) == 0
    text = out.read_text("utf-8")
    assert "Toy" in text and '"op": "set"' in text and '"a": "1"' in text
    lines = tmp_path / "toy.jsonl"
    assert main(["export", str(session), "--format", "agentworldbench", "-o", str(lines)]) == 0
    record = json.loads(lines.read_text("utf-8").splitlines()[0])
    assert record["task"] == "toy" and "set" in record["current_prompt"]


async def test_the_app_gives_a_registered_domain_a_generic_tab(toy: Path, tmp_path: Path) -> None:
    model = write_scripted_model(tmp_path / "toy.gguf", ANSWER, n_ctx_train=32768)
    app = make_app(model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)

        def shown() -> bool:
            app.show_tab("toy")
            return isinstance(app.active_pane, GenericPane)

        await wait_for(pilot, shown)
        pane = app.active_pane
        assert isinstance(pane, GenericPane) and pane.session.scenario.title == "An empty store"
        pane.focus_editor()
        pane.editor.text = "set a 1"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(pane.session.turns) and not pane.busy)
        assert '"a": "1"' in pane.screen_view.text
        assert "› set a 1" in pane.screen_view.text


def test_judging_reads_the_domain_s_own_prompt(toy: Path) -> None:
    assert project_prompts().system("toy")[0] == "Judge the store's answers.\n"
    marked = "**Environment Observation:** {}"
    assert strip_marker(marked, "toy") == "{}"
    DOMAINS.unregister("toy")
    assert strip_marker(marked, "toy") == marked


def test_the_python_environment_steps_a_registered_domain(
    toy: Path, world_model: FaultServer
) -> None:
    with Environment("toy", engine=world_model.url) as env:
        assert env.reset().text == "{}"
        assert [tool.name for tool in env.tools] == ["act"]
        typed = env.step("set a 1")
        value = env.step({"op": "get", "key": "a"})
        called = env.step(ToolCall("act", {"action": "get b"}))
        with pytest.raises(ActionError, match=USAGE):
            env.step({"op": "del", "key": "a"})
    assert typed.observation.text == STORED and typed.action.label == "set a 1"
    assert value.action.payload == {"op": "get", "key": "a"}
    assert called.action.payload == {"op": "get", "key": "b"} and called.turn == 3


async def test_mcp_serve_serves_an_installed_domain(
    installed: dict[str, str], world_model: FaultServer, tmp_path: Path
) -> None:
    folder = tmp_path / "sessions"
    words = ["mcp", "serve", "--domain", "toy", "--server", world_model.url]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentworld_tui", *words, "--sessions", str(folder)],
        env=installed,
        cwd=str(TESTS.parent),
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        stored = await client.call_tool("act", {"action": "set a 1"})
        refused = await client.call_tool("act", {"action": "del a"})
    assert [tool.name for tool in listed.tools] == ["act"]
    assert received_text(stored) == STORED
    assert refused.is_error and USAGE in received_text(refused)
    [turns] = session_turns(folder).values()
    assert [t["action"]["payload"] for t in turns] == [{"op": "set", "key": "a", "value": "1"}]


def test_openenv_serves_an_installed_domain(
    installed: dict[str, str], world_model: FaultServer
) -> None:
    port = free_port()
    words = ["env", "serve", "--domain", "toy", "--server", world_model.url, "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", *words],
        env=installed,
        cwd=TESTS.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    async def episode() -> list[object]:
        async with GenericEnvClient(base_url=url) as env:
            first = await env.reset()
            typed = await env.step({"action": "set a 1"})
            value = await env.step({"action": {"op": "get", "key": "a"}})
            tool = await env.step({"tool": "act", "arguments": {"action": "get a"}})
            refused = await env.step({"action": "del a"})
            return [first, typed, value, tool, refused]

    try:
        wait_until_up(url, process)
        first, typed, value, tool, refused = asyncio.run(episode())
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert first.observation["text"] == "{}"
    assert first.observation["tools"][0]["function"]["name"] == "act"
    assert typed.observation["text"] == STORED and typed.observation["turn"] == 1
    assert value.observation["turn"] == 2 and tool.observation["turn"] == 3
    assert refused.observation["status"] == "refused" and USAGE in refused.observation["error"]


def test_installed_domains_are_looked_up_once_when_first_asked_for() -> None:
    registry = DomainRegistry()
    asked: list[int] = []

    def installed() -> list[tuple[str, str]]:
        asked.append(1)
        return [("toy", "toy_domain:ToyDomain"), ("terminal", "elsewhere:Other")]

    registry.register("terminal", ".terminal:TerminalDomain", "Terminal")
    registry.discover(installed)
    assert asked == []  # nothing is looked up before the registry is read
    assert list(registry) == ["terminal", "toy"] and asked == [1]
    assert "toy" in registry and asked == [1]
    assert registry.title("toy") == "Toy"  # from the class, imported for it
    assert type(registry["terminal"]).__name__ == "TerminalDomain"  # registered first, kept
