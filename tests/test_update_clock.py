"""The main screen's updates run on the event loop's own timer (UpdateClock), in the real
app under run_test()."""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path

import pytest
from rich.text import Text
from textual._context import active_app

from agentworld_tui.config import Settings
from agentworld_tui.simulator import TurnUpdate
from agentworld_tui.ui.app import AgentWorldApp, MainScreen
from agentworld_tui.ui.textual_private import UpdateClock
from agentworld_tui.ui.widgets.status_bar import StatusBar


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path / "data"))


def make_app() -> AgentWorldApp:
    return AgentWorldApp(Settings(), offer_models=False, offer_resume=False)


async def test_a_screen_update_leaves_nothing_to_wake_for() -> None:
    """A change is drawn, and afterwards the loop has nothing of the screen's pending: no
    timer task of Textual's for the screen, no handle of the clock's (Textual's timer
    slept to its next tick after every update and woke the main thread once more)."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MainScreen)
        clock = screen._update_timer
        assert isinstance(clock, UpdateClock)
        assert not [timer for timer in screen._timers if timer.name == "screen_update"]
        view = app.active_pane.screen_view  # type: ignore[union-attr]
        view.append_lines([Text("drawn by the clock")])
        await pilot.pause()
        assert clock._handle is None
        assert "drawn by the clock" in drawn_text(app)


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
        update = screen._on_timer_update

        def counted() -> None:
            updates.append(set(screen._dirty_widgets))
            update()

        screen._on_timer_update = counted  # type: ignore[method-assign]
        assert pane.reasoning.display and view.size.height > 1
        pane.draw(
            TurnUpdate("thinking aloud", generated=4321, reasoning_tokens=4321, phase="reasoning")
        )
        for node in (view, status, screen):
            assert node._message_queue.empty(), node
        assert {view, status} <= screen._dirty_widgets
        await pilot.pause()  # which runs an update of its own, with nothing to draw
        drawing = [drawn for drawn in updates if view in drawn or status in drawn]
        assert len(drawing) == 1 and {view, status} <= drawing[0]  # (a cursor blink may join)
        drawn = drawn_text(app)
        assert "thinking aloud" in drawn and "4,321 tok" in drawn


async def test_an_update_asked_for_outside_the_app_s_context_draws() -> None:
    """A frame woken by the engine thread runs in that thread's context, where no app is
    active; the update it asks for still runs with the app and the screen active, as in
    Textual's timer task (a scrollbar's render looks the app up)."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        active: list[object] = []
        update = screen._on_timer_update

        def watched() -> None:
            active.append(active_app.get(None))
            update()

        screen._on_timer_update = watched  # type: ignore[method-assign]
        view = app.active_pane.screen_view  # type: ignore[union-attr]
        lines = [Text("asked for elsewhere " + "x" * 300)]  # a horizontal scrollbar too
        contextvars.Context().run(view.append_lines, lines)
        await pilot.pause()
        assert active and all(found is app for found in active)
        assert "asked for elsewhere" in drawn_text(app)
        assert app.return_code is None


async def test_updates_come_at_most_once_a_period() -> None:
    """An update asked for right after one waits for the rest of the period (Textual's
    pace, 1 / TEXTUAL_FPS); one asked for later runs at once; a pause drops it."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        clock = app.screen._update_timer
        assert isinstance(clock, UpdateClock)
        loop = asyncio.get_running_loop()
        clock._last = loop.time()  # an update just ran
        clock.resume()
        handle = clock._handle
        assert isinstance(handle, asyncio.TimerHandle)
        assert handle.when() >= clock._last + clock._period - 1e-6
        clock.resume()  # asked again: still the one update
        assert clock._handle is handle
        clock.pause()
        assert clock._handle is None and handle.cancelled()
        clock._last = loop.time() - 1.0  # long ago: at once
        clock.resume()
        assert clock._handle is not None
        assert not isinstance(clock._handle, asyncio.TimerHandle)
        await pilot.pause()
        assert clock._handle is None and clock._last > loop.time() - 1.0


async def test_an_error_in_a_screen_update_ends_the_app() -> None:
    """An update runs in the loop's own callback; its error still reaches Textual, which
    ends the app and raises it."""
    app = make_app()

    def broken() -> None:
        raise RuntimeError("an update failed")

    with pytest.raises(RuntimeError, match="an update failed"):
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            app.screen._on_timer_update = broken  # type: ignore[method-assign]
            app.active_pane.screen_view.append_lines([Text("x")])  # type: ignore[union-attr]
            for _ in range(200):
                if app.return_code is not None:
                    break
                await asyncio.sleep(0.02)
    assert app.return_code == 1
