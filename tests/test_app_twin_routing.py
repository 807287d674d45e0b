"""The app's MCP tab routed by rules and grounded in a trace store, in the real app driven
with Pilot: a real MCP server written with the SDK (``twinserver.py``, which logs every call
it receives and really changes files) beside a scripted GGUF world model in llama.cpp.

Rules and store are chosen in the twin dialog (Shift+F9) or on the command line, with the
same flags and rule file format as ``mcp serve``; a call the rules keep simulated never
reaches the real server; each turn shows where it was answered, why, and the real examples
it was shown; a rule file with an error is refused where the person is looking."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pane_driver import agent_done, make_app, open_tab, scripted, serve_to_agent, wait_for

from agentworld_tui.reality.routing import RuleSet, default_rules
from agentworld_tui.reality.spec import TwinSpec
from agentworld_tui.reality.traces import Exchange, TraceStore
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.mcp import McpPane
from agentworld_tui.ui.screens.twin import TwinDialog
from agentworld_tui.ui.twinning import TwinRouting
from agentworld_tui.ui.widgets.field import Field

HERE = Path(__file__).resolve().parent
PREDICTED = "wrote 7 bytes to plan"
HOSTILE = "\x1b]0;pwned\x07[bold red]markup[/] \u202e rtl"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "mcp.gguf", PREDICTED)


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    folder = tmp_path / "notebook"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "plan").write_text("ship it")
    return folder


def server_command(notebook: Path) -> str:
    return f"{sys.executable} {HERE / 'twinserver.py'} stdio {notebook}"


def calls(notebook: Path) -> list[dict[str, Any]]:
    log = notebook / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def seeded_store(path: Path) -> int:
    """A trace store holding one earlier real answer of write_note; its id."""
    with TraceStore(path, create=True) as store:
        found = store.add(
            Exchange("write_note", {"name": "todo", "text": "buy milk"}, "wrote 8 bytes to todo")
        )
    assert found is not None
    return found


def stored(path: Path) -> int:
    with TraceStore(path, writable=False) as store:
        return store.count()


async def call(pilot: Any, pane: McpPane, tool: str, arguments: dict[str, Any]) -> None:
    """The person calls ``tool`` (once the turn before, maybe an agent's, is recorded)."""
    await wait_for(pilot, lambda: not pane.busy, 60)
    turns = len(pane.session.turns)
    pane.pick(tool)
    pane.arguments.text = json.dumps(arguments)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: len(pane.session.turns) > turns and not pane.busy, 60)
    await pilot.pause()


async def twin_in_dialog(app: AgentWorldApp, pilot: Any, fields: dict[str, str]) -> TwinDialog:
    await pilot.press("shift+f9")
    await wait_for(pilot, lambda: isinstance(app.screen, TwinDialog))
    dialog = app.screen
    assert isinstance(dialog, TwinDialog)
    for name, value in fields.items():
        dialog.query_one(f"#{name}", Field).value = value
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: not dialog.starting, timeout=60)
    await pilot.pause()
    return dialog


def twinned_app(model: Path, notebook: Path, rules: RuleSet | None = None) -> AgentWorldApp:
    """The app with its MCP tab twinned with the notebook server, as the command line
    does it, routed by ``rules`` (None: every call shadowed)."""
    from agentworld_tui.simulator.shadow import Shadow

    spec = TwinSpec(
        "mcp", command=(sys.executable, str(HERE / "twinserver.py"), "stdio", str(notebook))
    )
    runner, first = spec.start()
    return AgentWorldApp(
        make_app(model).settings,
        offer_models=False,
        twin=("mcp", Shadow(runner, "real", spec, first=first)),
        twin_routing=TwinRouting(rules) if rules is not None else None,
    )


async def twinned_pane(app: AgentWorldApp, pilot: Any) -> McpPane:
    """The MCP tab, once the model is loaded and the twin is beside it."""
    await asyncio.wait_for(app.model_ready.wait(), 30)
    await wait_for(pilot, lambda: isinstance(app.active_pane, McpPane))
    pane = app.active_pane
    assert isinstance(pane, McpPane)
    await wait_for(pilot, lambda: pane.reality.twin is not None)
    return pane


async def test_the_dialog_s_rules_keep_a_simulated_call_from_reality_and_each_turn_says_where(
    model: Path, notebook: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "traces.db"
    example = seeded_store(store_path)
    app = make_app(model)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)  # the model loaded
        fields = {
            "command": server_command(notebook),
            "routes": "default",
            "traces": str(store_path),
            "grounding-budget": "1000",
        }
        dialog = await twin_in_dialog(app, pilot, fields)
        assert not dialog.is_attached
        twin = pane.reality.twin
        assert twin is not None and twin.routed is not None
        session = pane.session
        assert session.twin is not None and session.twin["routes"] == default_rules().source

        # read_note says readOnlyHint: reality answers alone; the world model is not asked.
        await call(pilot, pane, "read_note", {"name": "plan"})
        read = session.turns[0]
        assert read.route is not None and read.route["answered"] == "real"
        assert read.observation == "ship it" and read.grounding is None
        assert [c["name"] for c in calls(notebook)] == ["read_note"]
        await wait_for(pilot, lambda: stored(store_path) == 2)  # reality's answer kept

        # write_note is destructive: simulated, grounded, and never sent to the server.
        await call(pilot, pane, "write_note", {"name": "plan", "text": "changed"})
        write = session.turns[1]
        assert write.route is not None and write.route["answered"] == "sim"
        assert write.observation == PREDICTED
        assert write.grounding is not None and write.grounding["examples"] == [example]
        assert write.grounding["budget"] == 1000
        assert [c["name"] for c in calls(notebook)] == ["read_note"]
        assert (notebook / "notes" / "plan").read_text() == "ship it"

        # One consistent world: a read after the simulated write is simulated too.
        await call(pilot, pane, "read_note", {"name": "plan"})
        again = session.turns[2]
        assert again.route is not None and again.route["answered"] == "sim"
        assert again.route["forced_by"]["tool"] == "write_note"
        assert [c["name"] for c in calls(notebook)] == ["read_note"]

        transcript = pane.screen_view.text
        assert "answered by reality only · delivered: real · answered: real (rule 2 (reads)" in (
            transcript
        )
        assert "· answered: sim (rule 3 (may write or act)" in transcript
        assert f"grounded on 1 real example: #{example}" in transcript
        assert "answered: sim (sim: write_note was simulated at turn 2" in transcript
        view = pane.reality.view
        assert view is not None and view.display
        head = str(view.query_one("#twin-head").render())
        assert "Turn 3" in head and "answered: sim" in head and "why: sim: write_note" in head

    # Reality's answer to the routed read was kept, so later calls are grounded in it.
    with TraceStore(store_path, writable=False) as store:
        kept = store.similar("mcp", "read_note", {"name": "plan"}, limit=3).matches
        assert [(m.exchange.observation, m.exchange.source) for m in kept] == [
            ("ship it", "routed")
        ]


async def test_a_retry_of_a_routed_turn_asks_where_its_rules_sent_it(
    model: Path, notebook: Path, tmp_path: Path
) -> None:
    """Ctrl+R on a turn reality answered alone is refused where the person looks (a
    prediction would contradict its record; the server is not called again); on a
    simulated turn it asks the world model again, with the same real examples."""
    store_path = tmp_path / "traces.db"
    example = seeded_store(store_path)
    app = make_app(model)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)  # the model loaded
        fields = {"command": server_command(notebook), "routes": "default"}
        await twin_in_dialog(app, pilot, fields | {"traces": str(store_path)})
        session = pane.session

        await call(pilot, pane, "read_note", {"name": "plan"})
        await pilot.press("ctrl+r")
        await pilot.pause()
        read = session.turns[0]
        assert not pane.busy and read.observation == "ship it" and read.attempts == []
        assert [c["name"] for c in calls(notebook)] == ["read_note"]
        error = str(pane.query_one("#action-error").render())
        assert "the rules send read_note there" in error
        assert "send the call again" in error
        assert not any("Nothing to retry" in n.message for n in app._notifications)

        await call(pilot, pane, "write_note", {"name": "plan", "text": "changed"})
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not pane.busy and session.turns[1].attempts != [], 60)
        write = session.turns[1]
        assert write.status == "complete" and write.observation == PREDICTED
        assert len(write.attempts) == 1
        assert write.route is not None and write.route["answered"] == "sim"
        assert write.grounding is not None and write.grounding["examples"] == [example]
        assert [c["name"] for c in calls(notebook)] == ["read_note"]


async def test_a_rule_file_with_an_error_is_refused_in_the_dialog_with_its_line(
    notebook: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "routes.toml"
    rules.write_text('[[rule]]\ntool = "read_*"\nroute = "live"\n')
    app = make_app(None)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        session = pane.session
        dialog = await twin_in_dialog(
            app, pilot, {"command": server_command(notebook), "routes": str(rules)}
        )
        assert dialog.is_attached and app.screen is dialog
        said = str(dialog.query_one("#twin-error").render())
        assert said.startswith(f"the routing rules: {rules}:3: rule 1: route must be one of")
        dialog.query_one("#routes", Field).value = ""
        dialog.query_one("#grounding-budget", Field).value = "500"
        await pilot.press("ctrl+s")
        said = str(dialog.query_one("#twin-error").render())
        assert said == "the grounding budget goes with a trace store"
        await pilot.press("escape")
        await pilot.pause()
        assert pane.reality.twin is None and pane.session is session
        assert not (notebook / "calls.log").exists()


async def test_rules_given_on_the_command_line_route_the_mcp_tab_s_twin(
    model: Path, notebook: Path
) -> None:
    app = twinned_app(model, notebook, default_rules())
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await twinned_pane(app, pilot)
        await call(pilot, pane, "write_note", {"name": "plan", "text": "changed"})
        turn = pane.session.turns[0]
        assert turn.route is not None and turn.route["answered"] == "sim"
        assert calls(notebook) == []
        assert (notebook / "notes" / "plan").read_text() == "ship it"


async def test_an_agent_served_the_tab_is_routed_by_the_same_rules_as_the_person(
    model: Path, notebook: Path
) -> None:
    """Ctrl+B serves the routed tab: the agent's read goes to reality, its write is
    simulated and never reaches the server, the read after it is simulated (one world),
    and the twin still follows, so the person's next call is routed as well."""
    from mcp import Client

    app = twinned_app(model, notebook, default_rules())
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await twinned_pane(app, pilot)
        async with Client(await serve_to_agent(app, pilot)) as agent:
            read = await agent.call_tool("read_note", {"name": "plan"})
            wrote = await agent.call_tool("write_note", {"name": "plan", "text": "changed"})
            again = await agent.call_tool("read_note", {"name": "plan"})
        texts = ["".join(getattr(p, "text", "") for p in r.content) for r in (read, wrote, again)]
        assert texts == ["ship it", PREDICTED, PREDICTED]
        turns = pane.session.turns
        assert [t.route["answered"] if t.route else None for t in turns] == ["real", "sim", "sim"]
        assert turns[2].route is not None and turns[2].route["forced_by"]["tool"] == "write_note"
        assert [c["name"] for c in calls(notebook)] == ["read_note"]
        assert (notebook / "notes" / "plan").read_text() == "ship it"

        await agent_done(app, pilot)
        assert pane.reality.following
        await call(pilot, pane, "read_note", {"name": "plan"})
        person = pane.session.turns[3]
        assert person.route is not None and person.route["answered"] == "sim"
        assert [c["name"] for c in calls(notebook)] == ["read_note"]


async def test_an_agent_served_a_twinned_tab_without_rules_is_shadowed_as_the_person(
    model: Path, notebook: Path
) -> None:
    """Without rules every call in a twinned tab is shadowed, an agent's (Ctrl+B) as the
    person's: the twin carries it out, the agent gets reality's answer, and the turn
    records both sides."""
    from mcp import Client

    app = twinned_app(model, notebook)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await twinned_pane(app, pilot)
        async with Client(await serve_to_agent(app, pilot)) as agent:
            read = await agent.call_tool("read_note", {"name": "plan"})
        assert "".join(getattr(p, "text", "") for p in read.content) == "ship it"
        await wait_for(pilot, lambda: not pane.busy)
        [turn] = pane.session.turns
        assert turn.route is None and turn.reality is not None
        assert turn.reality["delivered"] == "real" and turn.observation == PREDICTED
        assert [c["name"] for c in calls(notebook)] == ["read_note"]

        await agent_done(app, pilot)
        assert pane.reality.following
        await call(pilot, pane, "list_notes", {})
        person = pane.session.turns[1]
        assert person.reality is not None and person.reality["delivered"] == "real"
        assert [c["name"] for c in calls(notebook)] == ["read_note", "list_notes"]


def test_the_app_s_command_line_takes_the_routing_flags_for_the_mcp_tab(tmp_path: Path) -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.launch import UserError, merge_leading
    from agentworld_tui.cli.routing_flags import app_routing_from_args

    def parsed(*words: str) -> Any:
        args = build_parser(commands=False).parse_args(list(words))
        assert merge_leading(args) is None
        return args

    assert app_routing_from_args(parsed()).rules is None
    with pytest.raises(UserError, match="--routes goes with the MCP tab's twin in the app"):
        app_routing_from_args(parsed("--routes", "default"))
    with pytest.raises(UserError, match="--traces is for the MCP tab in the app"):
        app_routing_from_args(parsed("--twin", "--traces", str(tmp_path / "t.db")))
    with pytest.raises(SystemExit):  # argparse: out of bounds
        build_parser(commands=False).parse_args(["--grounding-budget", "5"])
    bad = tmp_path / "routes.toml"
    bad.write_text('[[rule]]\nreadOnlyHint = "yes"\nroute = "real"\n')
    with pytest.raises(UserError, match=rf"--routes: {bad}:2: rule 1: readOnlyHint must be"):
        app_routing_from_args(parsed("--twin-command", "x", "--routes", str(bad)))
    found = app_routing_from_args(
        parsed(
            "--twin-url",
            "http://127.0.0.1:9/mcp",
            "--routes",
            "default",
            "--traces",
            str(tmp_path / "t.db"),
            "--grounding-budget",
            "300",
        )
    )
    try:
        assert found.rules is not None and found.rules.source == default_rules().source
        assert found.traces is not None and found.grounding_budget == 300
    finally:
        assert found.traces is not None
        found.traces.close()


def test_a_routed_turn_without_a_twin_s_record_says_where_and_why_cleanly() -> None:
    """A turn reality answered alone, one the world model answered, and one whose rule
    failed it: the record reads ``turn.route``; reasons from a server are shown clean."""
    from agentworld_tui.domains import get_domain
    from agentworld_tui.reality.routing import Decision, Route
    from agentworld_tui.ui.widgets.reality.record import RealityRecord
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session

    mcp = get_domain("mcp")
    session, _ = new_session(mcp, Scenario("s", "S"))
    turn = session.begin_turn(
        mcp.parse_action('{"name": "pay", "arguments": {}}', session.scenario)
    )
    assert RealityRecord.of(turn) is None
    decision = Decision("pay", 1, Route.REAL, Route.REAL, 1, f"rule 1 (pay{HOSTILE})")
    turn.route = decision.to_dict()
    turn.observation = "paid"
    turn.stats = {"real": {"status": "ok", "elapsed": 0.25}}
    record = RealityRecord.of(turn)
    assert record is not None
    line = record.line().plain
    assert line.startswith("⇄ answered by reality only · delivered: real · answered: real (")
    assert "[bold red]markup[/]" in line and not any(c in line for c in "\x1b\x07\u202e")
    assert record.real_text == "paid" and record.real_label() == "0.25 s"

    turn.route = {**decision.to_dict(), "failed": f"the server went away{HOSTILE}"}
    turn.stats = {"real": {"status": "crashed", "error": "gone"}}
    line = RealityRecord.of(turn).line().plain  # type: ignore[union-attr]
    assert "answered: none (reality failed: the server went away" in line
    assert not any(c in line for c in "\x1b\x07\u202e")
