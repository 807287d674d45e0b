"""The editors and path fields a new user types into: select-all and clear in every
editor, and a path completed as it is typed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_app import make_app, wait_for

from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.ui.widgets.path_suggester import PathSuggester


async def test_every_json_editor_selects_all_and_clears() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        app.show_tab("mcp")
        await wait_for(
            pilot, lambda: app.active_pane is not None and app.active_pane.domain.name == "mcp"
        )
        editor = app.active_pane.arguments  # type: ignore[union-attr]
        assert isinstance(editor, Editor)
        editor.focus()
        editor.text = '{"path": "/notes"}'
        await pilot.press("ctrl+a")
        assert editor.selected_text == '{"path": "/notes"}'
        await pilot.press("ctrl+l")
        assert editor.text == ""
        await pilot.press("ctrl+z")  # undone like any edit
        assert editor.text == '{"path": "/notes"}'


async def test_a_path_is_completed_folders_and_wanted_files_first(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "models" / "m.txt").write_text("no")
    (tmp_path / "mine").mkdir()
    suggest = PathSuggester(".gguf")
    assert await suggest.get_suggestion(str(tmp_path / "mo")) == str(tmp_path / "models") + "/"
    assert await suggest.get_suggestion(str(tmp_path / "models" / "m")) == str(
        tmp_path / "models" / "m.gguf"
    )
    assert await suggest.get_suggestion(str(tmp_path / "nothing")) is None
    assert await suggest.get_suggestion(str(tmp_path / "no-such" / "x")) is None


async def test_the_model_picker_completes_the_path_it_is_given(tmp_path: Path) -> None:
    from textual.widgets import Input

    from agentworld_tui.ui.screens.model_picker import ModelPicker

    (tmp_path / "tiny-model.gguf").write_bytes(b"GGUF")
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker))
        field = app.screen.query_one("#file", Input)
        field.focus()
        field.value = str(tmp_path / "tiny")
        await pilot.pause(0.2)
        await pilot.press("right")  # accepts the suggestion
        assert field.value == str(tmp_path / "tiny-model.gguf")


async def test_a_multi_line_paste_into_the_terminal_keeps_every_line() -> None:
    from textual import events

    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        terminal = app.active_pane
        line = terminal.line  # type: ignore[union-attr]
        line.focus()
        line.post_message(events.Paste("cd /app\nls -la\ngit st"))
        await pilot.pause()
        assert [e["keystrokes"] for e in terminal.queued] == ["cd /app\n", "ls -la\n"]  # type: ignore[union-attr]
        assert line.value == "git st"  # the last line stays to be edited and sent
        shown = str(terminal.query_one("#queued").render())  # type: ignore[union-attr]
        assert "cd /app · ls -la" in shown
