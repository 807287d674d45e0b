"""A frame's changes go to the main screen's next update directly (textual_private's
``repaint()``), in the real app under run_test()."""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path

import pytest
from rich.text import Text
from textual.widget import Widget

from agentworld_tui.config import Settings
from agentworld_tui.simulator import TurnUpdate
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.widgets.status_bar import StatusBar


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path / "data"))


def make_app() -> AgentWorldApp:
    return AgentWorldApp(Settings(), offer_models=False, offer_resume=False)


def drawn_text(app: AgentWorldApp) -> str:
    return "".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_a_frame_reaches_the_screen_without_messages() -> None:
    """A frame's new text and counters are handed to the screen's next update directly:
    no message waits on the view, the status line or the screen (Textual's refresh sends
    three, one after another), and a single update draws both."""
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.tabs_ready.wait(), 30)
        for _ in range(3):  # every tab built and drawn: nothing else to update
            await pilot.pause()
        screen = app.screen
        pane = app.active_pane
        assert pane is not None
        view, status = pane.reasoning.view, app.query_one(StatusBar)
        updates: list[set[object]] = []  # what each screen update draws
        compositor = screen._compositor
        update = compositor.update_widgets

        def counted(widgets: set[Widget]) -> None:
            updates.append(set(widgets))
            update(widgets)

        compositor.update_widgets = counted  # type: ignore[method-assign]
        assert pane.reasoning.display and view.size.height > 1
        pane.draw(
            TurnUpdate("thinking aloud", generated=4321, reasoning_tokens=4321, phase="reasoning")
        )
        for node in (view, status, screen):
            assert node._message_queue.empty(), node
        assert {view, status} <= screen._dirty_widgets
        await pilot.pause()
        drawing = [drawn for drawn in updates if view in drawn or status in drawn]
        assert len(drawing) == 1 and {view, status} <= drawing[0]  # (a cursor blink may join)
        drawn = drawn_text(app)
        assert "thinking aloud" in drawn and "4,321 tok" in drawn


async def test_an_update_asked_for_outside_the_app_s_context_draws() -> None:
    """A frame woken by the engine thread runs in that thread's context, where no app is
    active; what it hands the screen is still drawn (a scrollbar's render looks the app
    up), and the app goes on."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        view = app.active_pane.screen_view  # type: ignore[union-attr]
        lines = [Text("asked for elsewhere " + "x" * 300)]  # a horizontal scrollbar too
        contextvars.Context().run(view.append_lines, lines)
        await pilot.pause()
        assert "asked for elsewhere" in drawn_text(app)
        assert app.return_code is None
