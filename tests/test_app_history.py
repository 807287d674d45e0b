"""Editing history and replaying trajectories through the app's screens (Pilot), on
scripted tiny models in the real llama.cpp.

A scripted model always writes the same answer, so a second version of a turn comes from
a second model: the tests switch the app's engine between two scripts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from pane_driver import open_tab
from test_app import pane, wait_for
from textual.widgets import DataTable, Input, Label, TextArea

from agentworld_tui.config import Settings
from agentworld_tui.domains import DOMAINS
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.os import OsPane
from agentworld_tui.ui.screens.branches import BranchesScreen, editable_text
from agentworld_tui.ui.screens.replay import ReplayScreen, TrajectoryPicker
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.trajectories import load_benchmark
from agentworld_tui.world.workspace import load_workspace

FIRST = "one</think><predicted_observation>alpha output\n$</predicted_observation>"
SECOND = "two</think><predicted_observation>beta output\n$</predicted_observation>"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("models")
    # Byte-level tokens make the longer system prompts (OS, MCP) count high: give room.
    return (
        write_scripted_model(folder / "alpha.gguf", FIRST, n_ctx_train=16384),
        write_scripted_model(folder / "beta.gguf", SECOND, n_ctx_train=16384),
    )


def make_app(model: Path) -> AgentWorldApp:
    settings = Settings()
    settings.model.path, settings.model.threads = str(model), 2
    return AgentWorldApp(settings, offer_resume=False)


def idle(app: AgentWorldApp, turns: int) -> Callable[[], bool]:
    def check() -> bool:
        p = pane(app)
        return len(p.session.turns) == turns and not p.busy and p.session.turns[-1].shown

    return check


async def switch_model(app: AgentWorldApp, path: Path) -> None:
    """Swap the engine as the model picker does (the running app keeps its panes)."""
    loaded = asyncio.Event()
    app.loading.switch(LlamaEngine(path, threads=2), lambda _error: loaded.set())
    await asyncio.wait_for(loaded.wait(), 60)


def screen_text(app: AgentWorldApp) -> str:
    return pane(app).screen_view.text


async def test_edit_switch_regenerate_and_restore_through_the_branches_screen(
    models: tuple[Path, Path],
) -> None:
    alpha, beta = models
    app = make_app(alpha)
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, idle(app, 1))
        await pilot.press(*"pwd", "enter")
        await wait_for(pilot, idle(app, 2))
        session = pane(app).session

        # Edit turn 1's action: the editor holds the JSON the terminal reads back.
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("up", "e")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ActionEditScreen")
        editor = app.screen.query_one(TextArea)
        assert json.loads(editor.text) == [{"keystrokes": "ls\n", "duration": 1.0}]
        editor.text = '[{"keystrokes": "whoami\\n"'
        await pilot.press("ctrl+s")
        await pilot.pause()
        error = str(app.screen.query_one("#edit-error").render())
        assert "invalid JSON keystrokes" in error  # a bad action never leaves the editor
        assert len(session.branches) == 1
        editor.text = '[{"keystrokes": "whoami\\n", "duration": 1}]'
        await pilot.press("ctrl+s")
        await wait_for(pilot, idle(app, 1))
        assert session.branch_id == 2
        assert session.turns[0].action.payload == [{"keystrokes": "whoami\n", "duration": 1.0}]
        assert session.turns[0].observation == "alpha output\n$"
        old = next(b for b in session.branches if b.id == 1)
        assert [t.action.label for t in old.turns] == ["ls ⏎", "pwd ⏎"]

        # Turn 1 now has two versions; ◀ goes back to the first, with both its turns.
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        table = app.screen.query_one("#turns", DataTable)
        assert table.get_row_at(0)[3] == "◀ 2/2 ▶"
        await pilot.press("left")
        await pilot.pause()
        assert session.branch_id == 1 and len(session.turns) == 2
        assert table.get_row_at(0)[3] == "◀ 1/2 ▶"
        await pilot.press("escape")
        await pilot.pause()
        assert screen_text(app).count("alpha output") == 2

        # Regenerate the last turn with another model: the earlier answer stays an attempt.
        await switch_model(app, beta)
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("g")
        await wait_for(pilot, idle(app, 2))
        last = session.turns[1]
        assert last.observation == "beta output\n$"
        assert [a["observation"] for a in last.attempts] == ["alpha output\n$"]
        assert "beta output" in screen_text(app)

        # ...and comes back with "a"; the newer one becomes the attempt.
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("a")
        await pilot.pause()
        assert last.observation == "alpha output\n$"
        assert [a["observation"] for a in last.attempts] == ["beta output\n$"]
        await pilot.press("escape")
        await pilot.pause()
        assert "beta output" not in screen_text(app)

        # Regenerating an earlier turn starts a branch; the two turns stay on branch 1.
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("up", "g")
        await wait_for(pilot, idle(app, 1))
        assert session.branch_id == 3
        assert session.turns[0].observation == "beta output\n$"
        assert [len(v.turns) for v in session.alternatives(1)] == [2, 1, 1]

        saved = app.workspace.path
        assert saved is not None
        # The file is there since the first turn; the app saves again once it has the
        # turn's end, which can come after the pane is idle.
        await wait_for(
            pilot, lambda: saved.exists() and load_workspace(saved).tabs[0].branch_id == 3
        )
    reopened = load_workspace(saved).tabs[0]
    assert reopened.branch_id == 3 and len(reopened.branches) == 3
    first = next(b for b in reopened.branches if b.id == 1)
    assert first.turns[1].attempts[0]["observation"] == "beta output\n$"


async def test_a_whole_state_tab_redraws_each_branch_from_its_own_states(
    models: tuple[Path, Path],
) -> None:
    """In a tab whose observation is the whole next state (OS), an edited action runs on
    a new branch and the screen holds that branch's state only, never the old one too."""
    alpha, beta = models
    app = make_app(alpha)
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        desktop = await open_tab(app, pilot, "os", OsPane)
        assert desktop.replaces_view
        action = desktop.domain.parse_action("pyautogui.click(1, 2)", desktop.session.scenario)
        assert desktop.send(action)
        await wait_for(pilot, idle(app, 1))
        assert screen_text(app).splitlines() == ["alpha output", "$"]
        await switch_model(app, beta)
        assert isinstance(app.focused, TextArea)  # F7 must reach the app past the editor
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("e")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ActionEditScreen")
        editor = app.screen.query_one(TextArea)
        assert editor.text == "pyautogui.click(1, 2)"
        editor.text = "pyautogui.click(3, 4)"
        await pilot.press("ctrl+s")
        await wait_for(pilot, idle(app, 1))
        session = desktop.session
        assert session.branch_id == 2
        assert session.turns[0].action.payload["code"] == "pyautogui.click(3, 4)"
        assert screen_text(app).splitlines() == ["beta output", "$"]
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        await pilot.press("right", "escape")
        await pilot.pause()
        assert session.branch_id == 1
        assert screen_text(app).splitlines() == ["alpha output", "$"]


async def test_history_screen_refuses_while_a_turn_runs_and_on_an_empty_tab(
    models: tuple[Path, Path],
) -> None:
    app = make_app(models[0])
    async with app.run_test(size=(130, 40)) as pilot:
        # Before the model is ready the start may still replace the tab: F7 would find
        # another tab, or none, and say nothing about turns.
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press("f7")
        await wait_for(pilot, lambda: any("No turns" in n.message for n in app._notifications))
        assert not isinstance(app.screen, BranchesScreen)


EDIT_SAMPLES = {
    "terminal": '[{"keystrokes": "ls -la\\n", "duration": 1}, {"keystrokes": "C-c", "duration": 0.5}]',
    "mcp": '{"name": "read_text_file", "arguments": {"path": "/notes/todo.md", "head": 3}}',
    "web": '{"name": "fill", "arguments": {"bid": "b12", "value": "héllo \\"x\\""}}',
    "android": '{"action": "home"}',
    "search": '{"name": "web_search", "arguments": {"query": ["tide tables", "moon"]}}',
    "swe": '{"name": "execute_bash", "arguments": {"command": "pytest -q"}}',
    "os": "import pyautogui\npyautogui.click(10, 20)\npyautogui.write('done')",
}


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_edited_action_text_reads_back_in_every_domain(domain: str) -> None:
    """The text prefilled for editing is accepted by the domain and means the same."""
    handler = DOMAINS[domain]
    scenario = load_scenarios(domain)[0][0]
    action = handler.parse_action(EDIT_SAMPLES[domain], scenario)
    text = editable_text(action)
    again = handler.parse_action(text, scenario)
    assert again.payload == action.payload
    assert handler.render_turn(2, again, None) == handler.render_turn(2, action, None)


def write_benchmark(folder: Path) -> tuple[Path, list[str], list[str]]:
    """A two-turn terminal trajectory in the benchmark's layout: one line per turn."""
    domain = DOMAINS["terminal"]
    prompts, responses = [], []
    for number, (command, shown) in enumerate(
        [("ls", "notes.txt  src\n$"), ("cat notes.txt", "buy milk\n$")], 1
    ):
        action = domain.parse_action(command, load_scenarios("terminal")[0][0])
        prompts.append(domain.render_turn(number, action, None))
        responses.append(shown)
    lines = [
        {
            "task": "agentworld/terminal",
            "id": "term-7",
            "prompt": prompts,
            "response": responses,
            "current_prompt": prompts[i],
            "system_str": "You simulate a Linux terminal.",
            "turn_idx": i + 1,
            "total_turns": 2,
        }
        for i in range(2)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "terminal_test.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path, prompts, responses


async def test_replay_shows_recorded_and_predicted_with_a_diff_then_carries_on(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    path, prompts, responses = write_benchmark(tmp_path / "bench")
    app = make_app(models[0])
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, TrajectoryPicker))
        app.screen.query_one("#path", Input).value = str(path.parent)  # a folder works too
        await pilot.press("enter")
        table = app.screen.query_one("#trajectories", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        assert table.get_row_at(0)[2] == "2"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen))
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        assert replay.view("recorded").text == "notes.txt  src\n$"

        await pilot.press("n")
        await wait_for(pilot, lambda: 1 in replay.latest and replay.run is None)
        step = replay.latest[1]
        assert step.turn.observation == "alpha output\n$"
        assert replay.view("predicted").text == "alpha output\n$"
        diff = replay.view("diff").text.splitlines()
        assert "-notes.txt  src" in diff and "+alpha output" in diff and " $" in diff
        view = replay.view("diff")
        lines = {view.line(i).plain: view.line(i) for i in range(view.line_count)}
        assert [str(s.style) for s in lines["-notes.txt  src"].spans] == ["red"]
        assert [str(s.style) for s in lines["+alpha output"].spans] == ["green"]
        # The model was asked exactly what the benchmark asks for this line.
        sample = load_benchmark(path).trajectories[0].samples[0]
        assert replay.replay.session.prompt(step.turn).messages == sample.conversation()

        await pilot.press("n")
        await wait_for(pilot, lambda: 2 in replay.latest and replay.run is None)
        assert replay.view("recorded").text == "buy milk\n$"
        second = replay.replay.session.prompt(replay.latest[2].turn).messages
        assert second[1:3] == [
            {"role": "user", "content": prompts[0]},
            {"role": "assistant", "content": responses[0]},  # the recorded one, not alpha
        ]
        await pilot.press("p")
        assert replay.number == 1
        assert replay.view("predicted").text == "alpha output\n$"

        # Carry on from turn 1: the recorded turn becomes the terminal tab's history.
        await pilot.press("c")
        await wait_for(pilot, lambda: len(pane(app).session.turns) == 1)
        terminal = pane(app)
        assert terminal.domain.name == "terminal"
        assert terminal.session.turns[0].user_message == prompts[0]
        assert terminal.session.turns[0].observation == responses[0]
        assert "notes.txt  src" in terminal.screen_view.text
        await pilot.press(*"whoami", "enter")
        await wait_for(pilot, idle(app, 2))
        sent = terminal.session.prompt(terminal.session.turns[1]).messages
        assert sent[0] == {"role": "system", "content": "You simulate a Linux terminal."}
        assert sent[1:3] == [
            {"role": "user", "content": prompts[0]},
            {"role": "assistant", "content": responses[0]},
        ]


async def test_picker_loads_history_upto_a_turn_and_reports_bad_paths(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    path, _, responses = write_benchmark(tmp_path / "bench")
    app = make_app(models[0])
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, idle(app, 1))
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, TrajectoryPicker))
        picker = app.screen
        picker.query_one("#path", Input).value = str(tmp_path / "missing.jsonl")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "no such file" in str(picker.query_one("#problem").render()))
        picker.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        table = picker.query_one("#trajectories", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        picker.query_one("#upto", Input).value = "5"
        await pilot.press("ctrl+l")
        assert "2 recorded turns" in str(picker.query_one("#problem").render())
        picker.query_one("#upto", Input).value = "1"
        await pilot.press("ctrl+l")
        # The tab already had a turn of its own: it is kept as a saved session, and said so.
        await wait_for(pilot, lambda: pane(app).session.turns[0].observation == responses[0])
        assert len(pane(app).session.turns) == 1
        assert pane(app).session.turns[0].note == "recorded"
        kept = [s for s in app.library.entries() if "replaced" in s.name]
        assert len(kept) == 1 and kept[0].turns == 1
        assert any("kept in the session browser" in n.message for n in app._notifications)


async def test_screenshot_key_saves_an_svg_and_says_where(
    models: tuple[Path, Path], isolated_dirs: dict[str, Path]
) -> None:
    app = make_app(models[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f12")
        await pilot.pause()
        shots = list((isolated_dirs["data"] / "screenshots").glob("*.svg"))
        assert len(shots) == 1
        assert shots[0].read_text("utf-8").lstrip().startswith("<svg")
        assert any(str(shots[0]) in n.message for n in app._notifications)
    chosen = isolated_dirs["data"].parent / "shots"
    app = make_app(models[0])
    app.settings.ui.screenshots_dir = str(chosen)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f12")
        await pilot.pause()
        assert len(list(chosen.glob("*.svg"))) == 1


@pytest.mark.parametrize("size", [(120, 36), (110, 30), (80, 24)])
async def test_the_f8_hint_is_shown_whole(size: tuple[int, int]) -> None:
    app = AgentWorldApp(Settings(), offer_models=False)
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, TrajectoryPicker))
        await pilot.pause()
        hint = app.screen.query_one("#hint", Label)
        assert hint.parent is not None
        assert hint.parent.content_region.contains_region(hint.region)  # nothing clipped
        drawn = " ".join(hint.render_line(y).text for y in range(hint.size.height))
        assert "Ctrl+L loads it as history into its tab" in " ".join(drawn.split())
