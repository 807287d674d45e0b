"""A tab twinned with reality, in the real app driven with Pilot: a real tmux in a real
sandbox (bubblewrap or unshare) or a real MCP server written with the SDK beside a scripted
GGUF world model in llama.cpp.

Every turn goes to both; the tab shows the prediction beside reality or as a diff, the
figures under each turn and in a summary with the task's check; a twin that cannot start
says so in the dialog and changes nothing; reality is never undone (a branch reality did
not follow runs in simulation); the twin goes with the tab's session and with the app; a
twinned session opened from its file shows the same; hostile real text is shown
harmlessly."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pane_driver import agent_done, make_app, open_tab, serve_to_agent, wait_for
from realitykit import any_backend, living_in
from textual.widgets import Select

from agentworld_tui.domains import get_domain
from agentworld_tui.reality.spec import TwinSpec
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.panes.mcp import McpPane
from agentworld_tui.ui.panes.terminal import TerminalPane
from agentworld_tui.ui.panes.web import WebPane
from agentworld_tui.ui.screens.twin import TwinDialog
from agentworld_tui.ui.screens.twin_summary import TwinSummary
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.ui.widgets.reality.twin_view import TwinView
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import new_session
from agentworld_tui.world.workspace import Workspace, load_workspace

HERE = Path(__file__).resolve().parent
SCREEN = "root@twin:/app# echo hi\nhi\nroot@twin:/app#"
HOSTILE = "\x1b]0;pwned\x07[bold red]markup[/] \x1b[31mred\x1b[0m \u202e rtl"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def terminal_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Predicts the screen ``echo hi`` really leaves in a fresh twin, whatever was typed."""
    from ggufgen import write_scripted_model

    path = tmp_path_factory.mktemp("m") / "terminal.gguf"
    answer = f"The agent echoes.</think><predicted_observation>{SCREEN}</predicted_observation>"
    return write_scripted_model(path, answer, n_ctx_train=8192)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    (folder / "evil.txt").write_text(HOSTILE + "\n")
    return folder


def pane_of(app: AgentWorldApp) -> DomainPane:
    pane = app.active_pane
    assert pane is not None
    return pane


def view_of(pane: DomainPane) -> TwinView:
    view = pane.reality.view
    assert view is not None and view.display
    return view


def text_of(view: TwinView, part: str) -> str:
    return view.query_one(f"#twin-{part}", LineView).text


def head_of(view: TwinView) -> str:
    return str(view.query_one("#twin-head").render())


async def twin_in_dialog(
    app: AgentWorldApp, pilot: Any, fields: dict[str, str], *, backend: str = ""
) -> TwinDialog:
    """Open the dialog (Shift+F9), fill it, press Ctrl+S; the dialog, once it answered."""
    await pilot.press("shift+f9")
    await wait_for(pilot, lambda: isinstance(app.screen, TwinDialog))
    dialog = app.screen
    assert isinstance(dialog, TwinDialog)
    for name, value in fields.items():
        dialog.query_one(f"#{name}", Field).value = value
    if backend:
        dialog.query_one("#backend", Select).value = backend
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: not dialog.starting, timeout=60)
    await pilot.pause()
    return dialog


async def send_line(pilot: Any, pane: DomainPane, line: str) -> None:
    turns = len(pane.session.turns)
    await pilot.press(*line, "enter")
    await wait_for(pilot, lambda: len(pane.session.turns) > turns and not pane.busy, 60)
    await pilot.pause()


def sandbox_namespace(pane: DomainPane) -> tuple[str, Path]:
    twin = pane.reality.twin
    assert twin is not None
    box = twin.shadow.runner.twin.sandbox  # type: ignore[attr-defined]
    return box.namespace(), box.scratch


async def gone(pilot: Any, namespace: str, scratch: Path) -> None:
    await wait_for(pilot, lambda: not living_in(namespace) and not scratch.exists(), 30)


# -- a terminal twin ----------------------------------------------------------------------------
async def test_a_twinned_tab_shows_prediction_beside_reality_and_the_figures(
    terminal_model: Path, seed: Path
) -> None:
    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        backend = any_backend()
        dialog = await twin_in_dialog(app, pilot, {"seed": str(seed)}, backend=backend)
        assert not dialog.is_attached
        pane = pane_of(app)
        assert isinstance(pane, TerminalPane)
        twin = pane.reality.twin
        assert twin is not None
        session = pane.session
        assert session.scenario.state.rstrip() == "root@twin:/app#"  # the twin's first screen
        assert session.twin is not None
        assert (session.twin["kind"], session.twin["backend"]) == ("sandbox", backend)
        assert session.twin["seed"] == str(seed) and session.twin["deliver"] == "real"
        assert "No twinned turn yet" in head_of(view_of(pane))

        await send_line(pilot, pane, "echo hi")
        first = session.turns[0]
        assert first.reality is not None and first.reality["delivered"] == "real"
        assert first.reality["real"]["text"].splitlines()[-2:] == ["hi", "root@twin:/app#"]
        assert first.reality["divergence"]["diverged"] is False
        view = view_of(pane)
        assert text_of(view, "predicted") == SCREEN
        assert text_of(view, "real") == first.reality["real"]["text"]
        assert "Turn 1 · echo hi" in head_of(view) and "delivered: real" in head_of(view)
        transcript = pane.screen_view.text
        assert "⇄ divergence 0.00 (matches) · delivered: real" in transcript

        await send_line(pilot, pane, "cat notes.txt")  # reality: alpha, beta; predicted: hi
        second = session.turns[1]
        assert second.reality is not None and second.reality["divergence"]["diverged"] is True
        score = second.reality["divergence"]["score"]
        assert f"⇄ divergence {score:.2f} (diverged) · delivered: real" in pane.screen_view.text
        assert "alpha" in text_of(view, "real") and "alpha" not in text_of(view, "predicted")

        await pilot.press("shift+f10")  # the diff
        diff = text_of(view, "diff").splitlines()
        assert view.mode == "diff" and diff[:2] == ["--- predicted", "+++ reality"]
        # The real screen keeps the first command above the second; the prediction stops.
        assert diff[3:] == [
            " root@twin:/app# echo hi",
            " hi",
            "+root@twin:/app# cat notes.txt",
            "+alpha",
            "+beta",
            " root@twin:/app#",
        ]
        await pilot.press("shift+f10")
        assert view.mode == "sides"

        await pilot.press("shift+f11")
        await wait_for(pilot, lambda: isinstance(app.screen, TwinSummary))
        figures = str(app.screen.query_one("#summary-figures").render())
        assert "First diverged step         turn 2" in figures
        assert "Share diverged              50%" in figures
        assert "Check in the twin           none given" in figures
        await pilot.press("escape")

        saved = load_workspace(app.files.workspace.path).tabs[0]  # type: ignore[arg-type]
        assert [t.reality for t in saved.turns] == [first.reality, second.reality]
        assert saved.twin == session.twin

        namespace, scratch = sandbox_namespace(pane)
        assert living_in(namespace)
        await pilot.press("shift+f9")  # the dialog again: take the twin away
        await wait_for(pilot, lambda: isinstance(app.screen, TwinDialog))
        assert "Now twinned with a " + backend in str(
            app.screen.query_one("#twin-current").render()
        )
        await pilot.click("#untwin")
        await wait_for(pilot, lambda: pane.reality.twin is None)
        await gone(pilot, namespace, scratch)
        assert pane.session is session and len(session.turns) == 2  # the records stay


async def test_the_check_runs_in_the_twin_and_a_false_claim_is_deceived(
    terminal_model: Path, seed: Path
) -> None:
    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        fields = {"seed": str(seed), "check": "test -f done.txt"}
        await twin_in_dialog(app, pilot, fields, backend=any_backend())
        pane = pane_of(app)
        await send_line(pilot, pane, "echo hi")  # the agent did not make done.txt
        await pilot.press("shift+f11")
        await wait_for(pilot, lambda: isinstance(app.screen, TwinSummary))
        summary = app.screen
        assert isinstance(summary, TwinSummary)
        await pilot.click("#check")  # "the agent says the task is done" is ticked
        await wait_for(pilot, lambda: not summary.checking and "check" in (pane.session.twin or {}))
        await pilot.pause()
        figures = str(summary.query_one("#summary-figures").render())
        assert "Check in the twin           failed (test -f done.txt)" in figures
        assert "Deceived                    yes" in figures
        twin = pane.session.twin or {}
        assert twin["check"]["command"] == "test -f done.txt"
        assert twin["check"]["result"]["passed"] is False
        assert twin["figures"]["deceived"] is True
        saved = load_workspace(app.files.workspace.path).tabs[0]  # type: ignore[arg-type]
        assert saved.twin is not None and saved.twin["figures"]["deceived"] is True


async def test_reality_is_not_undone_a_branch_it_did_not_follow_runs_in_simulation(
    terminal_model: Path, seed: Path
) -> None:
    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await twin_in_dialog(app, pilot, {"seed": str(seed)}, backend=any_backend())
        pane = pane_of(app)
        await send_line(pilot, pane, "echo made > made.txt")
        assert pane.reality.following

        await pilot.press("f6")  # undo: the file stays made in reality
        await pilot.pause()
        assert not pane.reality.following
        said = [n.message for n in app._notifications]
        assert any("Reality cannot be undone" in m and "turn 1" in m for m in said)
        await pilot.press("shift+f6")  # redo: back on the turns the twin followed
        await pilot.pause()
        assert pane.reality.following
        await send_line(pilot, pane, "ls")
        assert pane.session.turns[1].reality is not None
        assert "made.txt" in pane.session.turns[1].reality["real"]["text"]

        await pilot.press("f6")
        await pilot.pause()
        await send_line(pilot, pane, "ls")  # on the undo's branch: simulation only
        assert pane.session.turns[-1].reality is None
        assert "simulation only: not sent to reality" in head_of(view_of(pane))
        assert len(pane.reality.twin.acted) == 2  # type: ignore[union-attr]


async def test_an_agent_served_a_twinned_terminal_acts_in_the_sandbox_as_the_person(
    terminal_model: Path, seed: Path
) -> None:
    """The agent's keystrokes (Ctrl+B) are shadowed like the person's: the twin carries
    them out, and the twin goes on following, so the person's next line sees their effect."""
    from mcp import Client

    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await twin_in_dialog(app, pilot, {"seed": str(seed)}, backend=any_backend())
        pane = pane_of(app)
        async with Client(await serve_to_agent(app, pilot)) as agent:
            await agent.call_tool("send_keystrokes", {"keystrokes": "echo agent > by.txt\n"})
        await wait_for(pilot, lambda: not pane.busy)
        [turn] = pane.session.turns
        assert turn.reality is not None and turn.reality["real"]["status"] == "ok"
        await agent_done(app, pilot)
        assert pane.reality.following

        await send_line(pilot, pane, "ls")
        listed = pane.session.turns[1].reality
        assert listed is not None and "by.txt" in listed["real"]["text"]


async def test_a_fresh_start_and_quitting_close_the_twin(terminal_model: Path, seed: Path) -> None:
    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        backend = any_backend()
        await twin_in_dialog(app, pilot, {"seed": str(seed)}, backend=backend)
        pane = pane_of(app)
        await send_line(pilot, pane, "echo hi")
        namespace, scratch = sandbox_namespace(pane)
        await pilot.press("ctrl+n")  # the tab starts afresh: the twin goes
        await wait_for(pilot, lambda: pane.reality.twin is None)
        await gone(pilot, namespace, scratch)
        assert pane.session.twin is None and not pane.session.turns

        await twin_in_dialog(app, pilot, {"seed": str(seed)}, backend=backend)
        namespace, scratch = sandbox_namespace(pane)
        assert living_in(namespace)
    assert not living_in(namespace) and not scratch.exists()  # gone with the app


# -- a twin that cannot start, a tab without one -------------------------------------------------
async def test_a_twin_that_cannot_start_says_why_in_the_dialog_and_nothing_changes(
    tmp_path: Path,
) -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        session = pane.session
        junk = f"{sys.executable} -c \"print('hello, no protocol here')\""
        dialog = await twin_in_dialog(app, pilot, {"command": junk})
        assert dialog.is_attached and app.screen is dialog
        error = str(dialog.query_one("#twin-error").render())
        assert error.startswith("the twin did not start:")
        assert not dialog.query_one("#start").disabled

        dialog.query_one("#command", Field).value = ""
        await pilot.press("ctrl+s")
        assert "give its command or its URL" in str(dialog.query_one("#twin-error").render())
        await pilot.press("escape")
        await pilot.pause()
        assert pane.reality.twin is None and pane.session is session and session.twin is None

        terminal = await open_tab(app, pilot, "terminal", TerminalPane)
        dialog = await twin_in_dialog(app, pilot, {"seed": str(tmp_path / "nowhere")})
        said = str(dialog.query_one("#twin-error").render())
        assert said == f"the folder to seed the twin from is not a folder: {tmp_path / 'nowhere'}"
        await pilot.press("escape")
        assert terminal.reality.twin is None


async def test_tabs_without_a_twin_say_so(tmp_path: Path) -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_tab(app, pilot, "web", WebPane)
        await pilot.press("shift+f9")
        await wait_for(pilot, lambda: isinstance(app.screen, TwinDialog))
        said = str(app.screen.query_one("#twin-none").render())
        assert "The Web tab has no twin" in said and "simulation only" in said
        assert not app.screen.query("#start")
        await pilot.press("escape")
        await pilot.press("shift+f10")
        await pilot.pause()
        assert any("shows no twinned turn" in n.message for n in app._notifications)


# -- an MCP twin --------------------------------------------------------------------------------
async def test_an_mcp_tab_twinned_with_a_real_server_calls_its_tools_for_real(
    tmp_path: Path,
) -> None:
    from pane_driver import scripted

    model = scripted(tmp_path / "mcp.gguf", "wrote 7 bytes to plan")
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    app = make_app(model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        command = f"{sys.executable} {HERE / 'twinserver.py'} stdio {notebook}"
        await twin_in_dialog(app, pilot, {"command": command})
        assert pane.reality.twin is not None
        names = [t.name for t in pane.tool_list.tools]  # the server's own list
        assert names[:3] == ["write_note", "read_note", "list_notes"]
        pane.pick("write_note")
        pane.arguments.text = '{"name": "plan", "text": "ship it"}'
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(pane.session.turns) and not pane.busy, 60)
        await pilot.pause()
        assert (notebook / "notes" / "plan").read_text() == "ship it"
        turn = pane.session.turns[0]
        assert turn.reality is not None and turn.reality["real"]["text"] == "wrote 7 bytes to plan"
        assert turn.reality["divergence"]["diverged"] is False
        assert text_of(view_of(pane), "real") == "wrote 7 bytes to plan"
        assert pane.session.twin is not None and pane.session.twin["kind"] == "mcp-command"


# -- a twinned session from its file ------------------------------------------------------------
def twinned_session_file(path: Path) -> None:
    """A terminal tab with two twinned turns, its twin and check recorded; reality's text
    carries escape sequences and markup."""
    terminal = get_domain("terminal")
    session, _ = new_session(terminal, Scenario("twin", "Twin", state="root@twin:/app#"))
    session.twin = TwinSpec("terminal", backend="bwrap").describe() | {
        "deliver": "real",
        "check": {
            "command": "test -f done.txt",
            "result": {"passed": False, "exit_code": 1, "output": "", "status": "ok"},
        },
        "figures": {"claimed_done": True},
    }
    for number, (typed, real, score) in enumerate(
        [
            ("echo hi", SCREEN, 0.0),
            ("cat evil.txt", f"root@twin:/app# cat evil.txt\n{HOSTILE}", 0.5),
        ],
        1,
    ):
        turn = session.begin_turn(terminal.parse_action(typed, session.scenario))
        session.finish_turn(
            turn,
            observation=SCREEN,
            reasoning="The agent looks.",
            status="complete",
            reality={
                "real": {"text": real, "status": "ok", "elapsed": 0.5},
                "divergence": {"score": score, "diverged": score > 0.05},
                "delivered": "real",
            },
        )
        assert turn.number == number
    Workspace([session], name="Twinned").save(path)


async def test_a_twinned_session_file_shows_its_records_and_hostile_text_harmlessly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "twinned.json"
    twinned_session_file(path)
    app = AgentWorldApp(make_app(None).settings, session_file=path, offer_models=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        pane = pane_of(app)
        await wait_for(pilot, lambda: len(pane.session.turns) == 2)
        await pilot.pause()
        transcript = pane.screen_view.text
        assert "⇄ divergence 0.00 (matches) · delivered: real" in transcript
        assert "⇄ divergence 0.50 (diverged) · delivered: real" in transcript
        view = view_of(pane)
        real = text_of(view, "real")
        assert "[bold red]markup[/]" in real and "rtl" in real  # shown as text, not markup
        assert not any(c in real for c in "\x1b\x07\u202e")
        await pilot.press("shift+f10")
        assert not any(c in text_of(view, "diff") for c in "\x1b\x07\u202e")
        await pilot.press("shift+f11")
        await wait_for(pilot, lambda: isinstance(app.screen, TwinSummary))
        figures = str(app.screen.query_one("#summary-figures").render())
        assert "Check in the twin           failed (test -f done.txt)" in figures
        assert "Deceived                    yes" in figures
        assert "First diverged step         turn 2" in figures
        assert not app.screen.query("#check")  # no twin runs: nothing to check in
        await pilot.press("enter")  # the highlighted turn (the first) in the twin view
        await pilot.pause()
        assert "Turn 1 · echo hi" in head_of(view)


def test_the_app_s_command_line_gives_a_tab_its_twin(seed: Path) -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.launch import UserError, merge_leading
    from agentworld_tui.cli.twin_flags import app_twin_from_args

    def parsed(*words: str) -> Any:
        args = build_parser(commands=False).parse_args(list(words))
        assert merge_leading(args) is None
        return args

    assert app_twin_from_args(parsed()) is None
    with pytest.raises(UserError, match="--tab names the tab a twin is for"):
        app_twin_from_args(parsed("--tab", "swe"))
    with pytest.raises(UserError, match="--check goes with a twin"):
        app_twin_from_args(parsed("--check", "true"))
    with pytest.raises(UserError, match="--twin-command is for mcp twins"):
        app_twin_from_args(parsed("--tab", "swe", "--twin", "--twin-command", "x"))
    with pytest.raises(SystemExit):  # argparse: web is no choice
        build_parser(commands=False).parse_args(["--tab", "web", "--twin"])
    backend = any_backend()
    started = app_twin_from_args(
        parsed("--tab", "swe", "--twin", backend, "--twin-seed", str(seed), "--deliver", "sim")
    )
    assert started is not None
    domain, shadow = started
    try:
        assert (domain, shadow.deliver, shadow.runner.domain) == ("swe", "sim", "swe")
    finally:
        shadow.runner.close()


async def test_a_twin_asked_for_on_the_command_line_is_beside_its_tab(
    terminal_model: Path, seed: Path
) -> None:
    spec = TwinSpec("terminal", seed=str(seed), backend=any_backend())  # type: ignore[arg-type]
    from agentworld_tui.simulator.shadow import Shadow

    runner, first = spec.start()
    shadow = Shadow(runner, "sim", spec, first=first)
    settings = make_app(terminal_model).settings
    app = AgentWorldApp(settings, offer_models=False, twin=("terminal", shadow))
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        pane = pane_of(app)
        await wait_for(pilot, lambda: pane.reality.twin is not None)
        await send_line(pilot, pane, "cat notes.txt")
        turn = pane.session.turns[0]
        assert turn.reality is not None and turn.reality["delivered"] == "sim"
        assert turn.shown_text == SCREEN  # the agent got the prediction


def test_a_routed_turn_s_line_says_where_it_was_answered_and_which_examples_it_was_shown() -> None:
    """A turn whose record holds a routing decision and its grounding (as
    ``Decision.to_dict`` and ``Grounding.to_dict`` write them) says both; a tool name from a
    server, in the reason, is shown clean."""
    from agentworld_tui.reality.grounding import Grounding
    from agentworld_tui.reality.routing import Decision, Route
    from agentworld_tui.ui.widgets.reality.record import RealityRecord

    mcp = get_domain("mcp")
    session, _ = new_session(mcp, Scenario("s", "S"))
    turn = session.begin_turn(
        mcp.parse_action('{"name": "read_note", "arguments": {}}', session.scenario)
    )
    decision = Decision(
        "read_note", 1, Route.SHADOW, Route.SHADOW, 2, f"rule 2 (reads{HOSTILE}): readOnlyHint=true"
    )
    grounding = Grounding(text="…", examples=(12, 40), cut=(40,), tokens=300, budget=2000)
    turn.observation = "predicted"
    turn.reality = {
        "real": {"text": "real", "status": "ok", "elapsed": 0.1},
        "divergence": {"score": 0.5, "diverged": True},
        "delivered": "real",
        "route": decision.to_dict(),
        "grounding": grounding.to_dict(),
    }
    record = RealityRecord.of(turn)
    assert record is not None
    line = record.line().plain
    assert line.startswith("⇄ divergence 0.50 (diverged) · delivered: real · answered: both (")
    assert "grounded on 2 real examples: #12, #40 (cut)" in line
    assert "\x1b" not in line and "\u202e" not in line and "[bold red]markup[/]" in line
    turn.reality = {
        **turn.reality,
        "grounding": Grounding(problem="the index is damaged").to_dict(),
    }
    assert "grounding failed: the index is damaged" in RealityRecord.of(turn).line().plain  # type: ignore[union-attr]


async def test_a_dialog_closed_while_its_twin_starts_closes_the_twin(
    terminal_model: Path, seed: Path
) -> None:
    def scratch() -> set[Path]:
        return set(Path(tempfile.gettempdir()).glob(f"agentworld-twin-{os.getpid()}-*"))

    # A seed of 40,000 files takes the sandbox seconds to copy, so Esc comes while the
    # twin is still starting, however fast the machine.
    many = seed / "many"
    many.mkdir()
    for i in range(40_000):
        (many / f"f{i}").write_bytes(b"")
    before = scratch()
    app = make_app(terminal_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        pane = pane_of(app)
        session = pane.session
        await pilot.press("shift+f9")
        await wait_for(pilot, lambda: isinstance(app.screen, TwinDialog))
        dialog = app.screen
        assert isinstance(dialog, TwinDialog)
        dialog.query_one("#seed", Field).value = str(seed)
        dialog.query_one("#backend", Select).value = any_backend()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(scratch() - before))  # the sandbox is being made
        await pilot.press("escape")
        await wait_for(pilot, lambda: not dialog.is_attached)
        await wait_for(pilot, lambda: not (scratch() - before), timeout=60)
        assert pane.reality.twin is None and pane.session is session
