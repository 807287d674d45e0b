"""Adding a domain is one module, one prompts folder and its tests: a domain of the test's
own (tests/toy_domain.py) is registered from here and driven through ``predict``, the
app's generic pane and export, with nothing else changed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from test_app import make_app, wait_for

from agentworld_tui.cli import main
from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui.panes.generic import GenericPane

ANSWER = (
    'The store has it.</think><predicted_observation>{"ok": true, "a": "1"}</predicted_observation>'
)


@pytest.fixture
def toy(isolated_dirs: dict[str, Path]) -> Iterator[Path]:
    prompts = isolated_dirs["config"] / "prompts" / "toy"
    prompts.mkdir(parents=True)
    (prompts / "system_prompt.txt").write_text(
        "You simulate a key-value store. It holds: {{store}}\n", "utf-8"
    )
    (prompts / "scenarios.toml").write_text(
        '[[scenario]]\nname = "empty"\ntitle = "An empty store"\nstate = "{}"\n', "utf-8"
    )
    DOMAINS.register("toy", "toy_domain:ToyDomain", "Toy")
    yield prompts
    DOMAINS.unregister("toy")


def test_predict_runs_a_registered_domain(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_scripted_model(tmp_path / "toy.gguf", ANSWER, n_ctx_train=8192)
    session = tmp_path / "toy-session.json"
    argv = ["predict", "--model", str(model), "--threads", "1", "--domain", "toy"]
    assert main([*argv, "--session", str(session), "set a 1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "a": "1"}
    assert main([*argv, "--json", "get b"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == {"op": "get", "key": "b"}
    assert main([*argv, "del a"]) == 2
    assert "write get KEY or set KEY VALUE" in capsys.readouterr().err

    out = tmp_path / "toy.md"
    assert main(["export", str(session), "--format", "markdown", "-o", str(out)]) == 0
    text = out.read_text("utf-8")
    assert "Toy" in text and '"op": "set"' in text and '"a": "1"' in text
    lines = tmp_path / "toy.jsonl"
    assert main(["export", str(session), "--format", "agentworldbench", "-o", str(lines)]) == 0
    record = json.loads(lines.read_text("utf-8").splitlines()[0])
    assert record["task"] == "toy" and "set" in record["current_prompt"]


async def test_the_app_gives_a_registered_domain_a_generic_tab(toy: Path, tmp_path: Path) -> None:
    model = write_scripted_model(tmp_path / "toy.gguf", ANSWER, n_ctx_train=32768)
    app = make_app(model)
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)

        def shown() -> bool:
            app.show_tab("toy")
            return isinstance(app.active_pane, GenericPane)

        await wait_for(pilot, shown)
        pane = app.active_pane
        assert isinstance(pane, GenericPane) and pane.session.scenario.title == "An empty store"
        pane.focus_editor()
        pane.editor.text = "set a 1"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(pane.session.turns) and not pane.busy)
        assert '"a": "1"' in pane.screen_view.text
        assert "› set a 1" in pane.screen_view.text
