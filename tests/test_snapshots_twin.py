"""Snapshots of a twinned tab and its dialogs (update with `pytest --snapshot-update`): a
twinned session opened from its file (the records are all it needs), its turns side by side
and as a diff, the summary, and the twin dialog of a tab with a twin and of one without.
Reality's answers are fixed in the file, so every figure on screen is the same each run."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from test_app_twin import twinned_session_file

from agentworld_tui.config import Settings
from agentworld_tui.ui.app import AgentWorldApp

DATA = Path("/tmp/agentworld-snapshots/twin-data")
SIZE = (120, 36)


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True)
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", "/tmp/agentworld-snapshots/config")
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(DATA))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def app_for(session_file: Path | None = None) -> AgentWorldApp:
    settings = Settings()
    settings.model.threads = 2
    app = AgentWorldApp(settings, session_file=session_file, offer_models=False)
    app.animation_level = "none"
    return app


async def settled(app: AgentWorldApp, pilot: Any) -> None:
    await asyncio.wait_for(app.tabs_ready.wait(), 30)
    await pilot.pause()
    app.clear_notifications()
    for widget in app.query("Input"):
        widget.cursor_blink = False  # type: ignore[attr-defined]
    await pilot.pause()


def opened(*keys: str) -> Any:
    async def run(pilot: Any) -> None:
        app = pilot.app
        await settled(app, pilot)
        pane = app.active_pane
        while pane is None or len(pane.session.turns) < 2:
            await pilot.pause(0.02)
            pane = app.active_pane
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await settled(app, pilot)
        for widget in app.screen.query("Input"):
            widget.cursor_blink = False
        await pilot.pause()

    return run


@pytest.mark.parametrize(
    "keys",
    [(), ("shift+f10",), ("shift+f11",)],
    ids=["side-by-side", "diff", "summary"],
)
def test_a_twinned_tab_from_its_file(snap_compare, keys: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    # A file of its own: a session file stays locked in the program that opened it.
    path = DATA / f"twinned-{len(keys)}{''.join(keys)}.json"
    twinned_session_file(path)
    assert snap_compare(app_for(path), run_before=opened(*keys), terminal_size=SIZE)


@pytest.mark.parametrize("tab", ["terminal", "mcp", "web"])
def test_the_twin_dialog(snap_compare, tab: str) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot: Any) -> None:
        app = pilot.app
        await settled(app, pilot)
        app.show_tab(tab)
        await pilot.pause()
        await pilot.press("shift+f9")
        await pilot.pause()
        for widget in app.screen.query("Input"):
            widget.cursor_blink = False
        await pilot.pause()

    assert snap_compare(app_for(), run_before=run, terminal_size=SIZE)
