"""The model picker says which engine runs the model (issue 43): the one loaded, or the one
the settings name when none is."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from agentworld_tui.config import Settings
from agentworld_tui.engines.base import EngineInfo
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.screens.model_picker import ModelPicker, engine_in_use


def test_the_engine_loaded_is_said_before_the_settings() -> None:
    assert engine_in_use(None, "", 0) == "llama-cpp-python"
    assert engine_in_use(None, "xllamacpp", 4) == "xllamacpp, 4 slots"
    loaded = EngineInfo("m.gguf", "CPU", 2048, engine="llama-cpp-python")
    assert engine_in_use(loaded, "xllamacpp", 4) == "llama-cpp-python"
    slots = EngineInfo("m.gguf", "CPU, 2 slots", 2048, parallel=2, engine="xllamacpp")
    assert engine_in_use(slots, "", 0) == "xllamacpp, 2 slots"
    remote = EngineInfo("m", "http://127.0.0.1:1/v1", 2048, remote=True)
    assert engine_in_use(remote, "xllamacpp", 0) == "xllamacpp"


@pytest.mark.parametrize(
    ("engine", "slots", "said"),
    [("llama-cpp-python", 0, "llama-cpp-python"), ("xllamacpp", 3, "xllamacpp, 3 slots")],
)
async def test_the_picker_at_first_start_says_the_engine(
    isolated_dirs: dict[str, Path], engine: str, slots: int, said: str
) -> None:
    settings = Settings()
    settings.model.engine, settings.model.slots = engine, slots
    app = AgentWorldApp(settings, offer_resume=False)
    async with app.run_test(size=(130, 40)) as pilot:
        for _ in range(200):
            if isinstance(app.screen, ModelPicker):
                break
            await pilot.pause(0.02)
        picker = app.screen
        assert isinstance(picker, ModelPicker)
        line = str(picker.query_one("#engine", Static).render())
        assert f"Engine: {said} " in line
