"""First run as a user meets it: no model set, the picker proposes one, it downloads from a
Hub-shaped server on 127.0.0.1, loads, and the simulator answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from hubserver import HubServer

from agentworld_tui.config import Settings, load_settings
from agentworld_tui.ui.app import AgentWorldApp

SCRIPT = (
    "listing</think><predicted_observation>user@devbox:~/project$ ls\n"
    "notes.txt\nuser@devbox:~/project$</predicted_observation>"
)
REPO = "tester/Tiny-AgentWorld-GGUF"


@pytest.fixture
def hub(online_hub: HubServer) -> HubServer:
    return online_hub


async def test_first_run_picks_downloads_and_uses_a_model(hub: HubServer, tmp_path: Path) -> None:
    model = write_scripted_model(tmp_path / "tiny.gguf", SCRIPT)
    hub.add_repo(REPO, {"tiny-Q4_K_M.gguf": model.read_bytes(), "README.md": b"# tiny\n"})
    config = tmp_path / "config"
    config.mkdir()
    (config / "models.toml").write_text(
        'default = "tiny-world"\n\n[[model]]\nname = "tiny-world"\n'
        f'repo = "{REPO}"\nquant = "Q4_K_M"\nsize_gb = 0.001\n'
        'description = "a scripted test model"\n',
        encoding="utf-8",
    )
    settings = Settings()
    settings.model.threads = 2
    app = AgentWorldApp(settings, offer_resume=False)
    async with app.run_test(size=(130, 40)) as pilot:
        for _ in range(200):
            if app.screen.__class__.__name__ == "ModelPicker":
                break
            await pilot.pause(0.02)
        picker = app.screen
        assert picker.__class__.__name__ == "ModelPicker"
        await pilot.pause(0.2)
        detail = str(picker.query_one("#detail").render())
        assert REPO in detail  # the recommended entry is the one selected
        await pilot.press("enter")
        await asyncio.wait_for(app.model_ready.wait(), 60)
        pane = app.active_pane
        assert pane is not None
        await pilot.press(*"ls", "enter")
        for _ in range(500):
            if pane.session.turns and not pane.busy:
                break
            await pilot.pause(0.02)
        assert pane.session.turns[0].observation.splitlines()[1] == "notes.txt"
    saved = load_settings().settings
    assert saved.model.path.endswith("tiny-Q4_K_M.gguf")
    assert Path(saved.model.path).read_bytes() == model.read_bytes()
