"""Nothing a user did is lost, and the keys a new user reaches for work: the real app under
Pilot, on a scripted model in the real llama.cpp."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from test_app import LS_SCRIPT, make_app, pane, wait_for

from agentworld_tui.config import Settings, sessions_dir
from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.workspace import load_workspace


@pytest.fixture(scope="module")
def ls_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(tmp_path_factory.mktemp("m") / "ls.gguf", LS_SCRIPT)


async def one_turn(app: AgentWorldApp, pilot: object, command: str = "ls") -> None:
    before = len(pane(app).session.turns)
    await pilot.press(*command, "enter")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: len(pane(app).session.turns) > before and not pane(app).busy)


def notified(app: AgentWorldApp, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


async def test_a_new_session_keeps_the_old_one_in_the_browser(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        await one_turn(app, pilot, "pwd")
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: not pane(app).session.turns)
        await wait_for(pilot, lambda: notified(app, "kept in the session browser"))
        kept = [s for s in SessionLibrary(sessions_dir()).entries() if "replaced" in s.name]
        assert len(kept) == 1 and kept[0].turns == 2
        assert load_workspace(kept[0].path).tabs[0].turns[1].user_message.count("pwd")


async def test_undo_keeps_the_turn_and_redo_brings_it_back(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        await one_turn(app, pilot, "pwd")
        session = pane(app).session
        await pilot.press("f6")
        await pilot.press("f6")
        await pilot.pause()
        assert session.turns == []
        await wait_for(pilot, lambda: notified(app, "Shift+F6 brings it back"))
        saved = load_workspace(app.workspace.path)  # type: ignore[arg-type]
        assert max(len(b.turns) for b in saved.tabs[0].branches) == 2  # on disk still
        await pilot.press("shift+f6")
        await pilot.pause()
        assert [t.number for t in session.turns] == [1]
        await pilot.press("shift+f6")
        await pilot.pause()
        assert [t.number for t in session.turns] == [1, 2]
        assert len(session.branches) == 1  # the undo branch went with the last redo
        assert "README.md" in pane(app).screen_view.text


async def test_enter_on_the_resume_question_resumes(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
    again = make_app(ls_model)
    async with again.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: again.screen.__class__.__name__ == "ConfirmScreen")
        assert "1 turn in 1 tab" in str(again.screen.query_one("Static").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(pane(again).session.turns))


async def test_a_session_named_with_markup_resumes_without_a_crash(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        path = app.workspace.path
        assert path is not None
        app.files.renamed(path, "[/b] [bold red]x")
        app.workspace.name = "[/b] [bold red]x"
        app.save_session()
    again = make_app(ls_model)
    async with again.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: again.screen.__class__.__name__ == "ConfirmScreen")
        assert "[/b] [bold red]x" in str(again.screen.query_one("Static").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(pane(again).session.turns))
        await wait_for(pilot, lambda: notified(again, "Opened “[/b] [bold red]x”"))


async def test_keys_switch_between_the_tabs() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        names = list(DOMAINS)
        await pilot.press("alt+2")
        await wait_for(pilot, lambda: pane(app).domain.name == names[1])
        await pilot.press("ctrl+pagedown")
        await wait_for(pilot, lambda: pane(app).domain.name == names[2])
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: pane(app).domain.name == names[1])
        await pilot.press("alt+7")
        await wait_for(pilot, lambda: pane(app).domain.name == names[6])


async def test_a_tab_key_pressed_as_the_app_starts_keeps_its_tab() -> None:
    """The command line takes the focus at start; the news of it, arriving after the key,
    does not switch back to its tab."""
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("alt+2")
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.pause(0.3)
        assert pane(app).domain.name == list(DOMAINS)[1]


async def test_a_tab_key_pressed_in_any_editor_keeps_the_tab_it_showed() -> None:
    """The focus of the tab left is not handed to a widget hidden with it (Textual's way),
    which would have the tabs follow it back."""
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        names = list(DOMAINS)
        for number in [2, 3, 4, 5, 6, 7, 1, 4, 3, 2]:
            await pilot.press(f"alt+{number}")
            await pilot.pause(0.3)
            assert pane(app).domain.name == names[number - 1]
            assert app.focused is not None and pane(app) in app.focused.ancestors
        for key, step in [("alt+right", 1), ("ctrl+pagedown", 1), ("alt+left", -1)] * 3:
            before = names.index(pane(app).domain.name)
            await pilot.press(key)
            await pilot.pause(0.3)
            assert pane(app).domain.name == names[(before + step) % len(names)]


async def test_ctrl_u_shows_the_output_as_the_model_wrote_it(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        await pilot.press("ctrl+u")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "RawOutputScreen")
        raw = app.screen.query_one("#raw").text  # type: ignore[attr-defined]
        assert "</think>" in raw and "<predicted_observation>" in raw


async def test_two_tabs_of_one_domain_in_a_file_both_stay(ls_model: Path, tmp_path: Path) -> None:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import Workspace

    terminal = get_domain("terminal")
    tabs = []
    for name in ("first", "second"):
        session, _ = new_session(terminal, Scenario(name, name.title()))
        turn = session.begin_turn(terminal.parse_action(f"echo {name}", session.scenario))
        session.finish_turn(turn, observation=name, reasoning="", status="complete")
        tabs.append(session)
    shared = tmp_path / "shared.json"
    Workspace(tabs, name="shared").save(shared)
    settings = Settings()
    settings.model.path, settings.model.threads = str(ls_model), 2
    app = AgentWorldApp(settings, session_file=shared, offer_models=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await wait_for(pilot, lambda: len(pane(app).session.turns) == 1)
        await wait_for(pilot, lambda: notified(app, "1 more tab of a domain already shown"))
        await one_turn(app, pilot)
    saved = load_workspace(shared)
    assert [len(t.turns) for t in saved.tabs] == [2, 1]
    assert saved.tabs[1].turns[0].observation == "second"


async def test_a_file_another_program_writes_is_refused_and_left_alone(
    ls_model: Path, tmp_path: Path
) -> None:
    """A second instance on one session file is told, and never overwrites the first."""
    shared = tmp_path / "shared.json"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from agentworld_tui.world.workspace import open_or_new\n"
            f"ws = open_or_new(Path({str(shared)!r}))\n"
            "ws.name = 'the first'\nws.save()\n"
            "print('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = shared.read_bytes()
        settings = Settings()
        settings.model.path, settings.model.threads = str(ls_model), 2
        app = AgentWorldApp(settings, session_file=shared, offer_models=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await asyncio.wait_for(app.model_ready.wait(), 30)
            await wait_for(pilot, lambda: notified(app, "is open in"))
            await one_turn(app, pilot)
        assert shared.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()


async def test_renaming_the_open_session_survives_the_next_turn(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionBrowser")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "RenameScreen")
        app.screen.query_one("Input").value = "Renamed here"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionBrowser")
        await pilot.press("escape")
        await one_turn(app, pilot, "pwd")
        path = app.workspace.path
    assert path is not None and load_workspace(path).name == "Renamed here"


async def test_the_turn_is_on_disk_before_its_answer_is_drawn(ls_model: Path) -> None:
    app = make_app(ls_model)
    seen_on_save: list[bool] = []
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        save = app.save_session

        def watched(session: object = None) -> str | None:
            error = save()
            path = app.workspace.path
            saved = load_workspace(path) if path is not None else None
            # The answer streams onto the screen as it comes; the turn is shown as done
            # (its observation drawn, the pane free) only once it is on disk.
            on_disk = bool(saved and saved.turn_count and saved.tabs[0].turns[-1].observation)
            seen_on_save.append(on_disk and pane(app).busy)
            return error

        app.save_session = watched  # type: ignore[method-assign]
        await one_turn(app, pilot)
    assert seen_on_save[:1] == [True]


async def test_a_file_that_is_not_a_model_is_never_saved_as_the_model(
    ls_model: Path, isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    config = isolated_dirs["config"] / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('# mine\n[model]\npath = "keep.gguf"\n', "utf-8")
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello", "utf-8")
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        app.loading.use(bogus)
        await pilot.pause()
        await wait_for(pilot, lambda: notified(app, "is not a GGUF model file"))
    assert config.read_text("utf-8") == '# mine\n[model]\npath = "keep.gguf"\n'


async def test_quitting_after_a_failed_save_asks_first(ls_model: Path, tmp_path: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await one_turn(app, pilot)
        app.files.save = lambda *a, **k: "cannot save: the disk is full"  # type: ignore[method-assign]
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        assert "Quit anyway" in str(app.screen.query_one("#yes").render())
        await pilot.press("escape")  # stay
        await pilot.pause()
        assert app.is_running


async def test_the_no_model_help_goes_once_a_model_is_loaded(ls_model: Path) -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        assert "No model is configured yet." in pane(app).screen_view.text
        app.loading.use(ls_model)
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.pause()
        for each in app.panes():
            assert "No model is configured" not in each.screen_view.text, each.domain.name
        await one_turn(app, pilot)
        assert json.loads(json.dumps(pane(app).session.turns[0].stats))["prompt_tokens"] > 0


async def test_a_session_file_of_another_domain_opens_on_its_tab(tmp_path: Path) -> None:
    """A session `mcp serve` saved (one MCP tab) opens on the MCP tab, not on the empty
    terminal the app starts with (no model yet, as when one looks at a served session)."""
    from agentworld_tui.domains import get_domain
    from agentworld_tui.world.prompts import load_scenarios
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import Workspace

    mcp = get_domain("mcp")
    session, _ = new_session(mcp, load_scenarios("mcp")[0][0])
    call = '{"name": "list_directory", "arguments": {"path": "/home/maya/notes"}}'
    turn = session.begin_turn(mcp.parse_action(call, session.scenario))
    session.finish_turn(turn, observation="[FILE] todo.md", reasoning="", status="complete")
    served = tmp_path / "served.json"
    Workspace([session], name="served").save(served)
    app = AgentWorldApp(Settings(), session_file=served, offer_models=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: notified(app, "Opened"))
        await pilot.pause(0.5)
        assert pane(app).domain.name == "mcp"
        assert "todo.md" in pane(app).screen_view.text
