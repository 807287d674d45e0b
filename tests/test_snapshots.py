"""Snapshots of the real app's screens (update with `pytest --snapshot-update`).

Timing figures in the status bar differ run to run, so they are fixed before each
snapshot; everything else on screen is what the app drew.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from snapshotkit import settled
from test_app import wait_for

from agentworld_tui.config import Settings
from agentworld_tui.ui.app import AgentWorldApp

SCRIPT = (
    "The user lists the project.</think><predicted_observation>user@devbox:~/project$ ls -la\n"
    "total 16\ndrwxr-xr-x 4 user user 4096 Jun 24 10:02 .\n"
    "-rw-r--r-- 1 user user  812 Jun 24 10:02 README.md\n"
    "drwxr-xr-x 3 user user 4096 Jun 24 10:02 src\nuser@devbox:~/project$"
    "</predicted_observation>"
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fixed names: the config path is on screen when no model is set.
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", "/tmp/agentworld-snapshots/config")
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path_factory.mktemp("data")))


def app_for(model: Path | None) -> AgentWorldApp:
    settings = Settings()
    settings.model.threads = 2
    if model is not None:
        settings.model.path = str(model)
    return AgentWorldApp(settings, offer_models=False)


async def freeze_status(app: AgentWorldApp) -> None:
    pane = app.active_pane
    assert pane is not None
    pane.status.tokens_per_second = 42.0
    pane.status.elapsed = 1.5
    app.show_status()


def test_main_screen_after_a_turn(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = write_scripted_model(tmp_path / "snap.gguf", SCRIPT)
    app = app_for(model)

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await asyncio.wait_for(app.model_ready.wait(), 120)
        await pilot.press(*"ls -la", "enter")
        pane = app.active_pane
        assert pane is not None
        tab = app.tabs().get_tab("tab-terminal")
        # Done when the turn is recorded and the app has handled its end (tab mark cleared).
        await wait_for(
            pilot, lambda: bool(pane.session.turns) and not pane.busy and "●" not in str(tab.label)
        )
        await settled(app, pilot)
        await freeze_status(app)
        await settled(app, pilot)

    assert snap_compare(app, run_before=run, terminal_size=(110, 30))


def test_first_start_without_a_model(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = app_for(None)

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await asyncio.wait_for(app.tabs_ready.wait(), 120)
        await settled(app, pilot)

    assert snap_compare(app, run_before=run, terminal_size=(110, 30))


def test_help_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = app_for(None)

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await asyncio.wait_for(app.tabs_ready.wait(), 120)
        await settled(app, pilot)

    assert snap_compare(app, press=["f1"], run_before=run, terminal_size=(110, 40))
