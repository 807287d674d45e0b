"""The main screen's updates run on the event loop's own timer (UpdateClock), in the real
app under run_test()."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.text import Text

from agentworld_tui.config import Settings
from agentworld_tui.ui.app import AgentWorldApp, MainScreen
from agentworld_tui.ui.update_clock import UpdateClock


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
        drawn = "".join(strip.text for strip in screen._compositor.render_strips())
        assert "drawn by the clock" in drawn


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
