"""The app's first start with a models.toml whose numbers are absurd: the picker opens,
says what is wrong with the catalog, and offers the rest."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from agentworld_tui.config import Settings
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.screens.model_picker import ModelPicker


async def test_first_start_survives_absurd_catalog_numbers(
    isolated_dirs: dict[str, Path],
) -> None:
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(
        'default = "huge"\n'
        '[[model]]\nname = "huge"\nrepo = "a/b"\nquant = "Q4_K_M"\nsize_gb = 1e308\n'
        '[[model]]\nname = "agentworld-35b-q4_k_m"\nsize_gb = inf\n'
        '[[model]]\nname = "wide"\nrepo = "a/b"\nquant = "Q8_0"\n'
        "kv_bytes_per_token = 9223372036854775807\n",
        encoding="utf-8",
    )
    app = AgentWorldApp(Settings(), offer_resume=False)
    async with app.run_test(size=(130, 40)) as pilot:
        for _ in range(200):
            if isinstance(app.screen, ModelPicker):
                break
            await pilot.pause(0.02)
        picker = app.screen
        assert isinstance(picker, ModelPicker)
        await pilot.pause(0.1)
        problems = "\n".join(picker.catalog.problems)
        assert "model 'huge': size_gb = 1e+308 is not between 0 and 10000" in problems
        assert "model 'agentworld-35b-q4_k_m': size_gb = inf" in problems
        assert "model 'wide': kv_bytes_per_token = 9223372036854775807" in problems
        names = [e.name for e in picker.catalog.entries]
        assert "huge" not in names and "wide" not in names
        table = picker.query_one("#models", DataTable)
        assert table.row_count == len(names) > 0
