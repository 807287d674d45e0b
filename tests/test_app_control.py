"""Perturbations, worlds and judging from inside the app, on a real scripted model."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ggufgen import write_scripted_model
from test_app import make_app, pane, turn_done, wait_for
from textual.screen import Screen
from textual.widgets import Input, RadioButton

from agentworld_tui.simulator.queue import CallJob, EngineQueue

VERDICT = {
    "strengths": ["echoes the command"],
    "weaknesses": ["no file sizes"],
    "scores": {"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4},
}
# One script serves as world model (the observation block) and as judge (the evaluation,
# written inside its reasoning, where a judge's verdict is also looked for).
SCRIPT = [
    "looking",
    "<final_evaluation>",
    json.dumps(VERDICT),
    "</final_evaluation>",
    "</think>",
    "<predicted_observation>",
    "user@devbox:~/project$ ls\nREADME.md\nuser@devbox:~/project$",
    "</predicted_observation>",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(tmp_path_factory.mktemp("m") / "both.gguf", SCRIPT)


async def test_a_preset_perturbation_reaches_the_next_turn_and_shows_a_badge(model: Path) -> None:
    app = make_app(model)
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press("f9")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "PerturbationPicker")
        await pilot.pause(0.1)
        await pilot.press("enter")  # the highlighted preset fills the instruction
        await pilot.pause(0.1)
        text = app.screen.query_one("#instruction").text
        assert text.strip()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: pane(app).session.control is not None)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        turn = pane(app).session.turns[0]
        assert turn.control == text.strip() or text.strip() in turn.control
        assert turn.control in turn.user_message
        assert "⚑ control:" in pane(app).screen_view.text
        assert pane(app).session.control is None  # next turn only, by default


async def judge_the_turn(
    model: Path,
    pick: Callable[[Screen[object]], None] | None = None,
    reference: str = "user@devbox:~/project$ ls\nREADME.md  src\n",
) -> Any:
    """A turn typed into the terminal, then judged with F11 (``pick`` chooses the judge on
    the setup screen; the loaded model by default): the turn's judgement and the terminal's
    text once the verdict shows."""
    app = make_app(model)
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        await pilot.press("f11")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeSetup")
        app.screen.query_one("#reference").text = reference
        if pick is not None:
            pick(app.screen)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeView", 60)
        return pane(app).session.turns[0].judgement, pane(app).screen_view.text


async def test_judging_the_last_turn_with_the_loaded_model(model: Path) -> None:
    judged, shown = await judge_the_turn(model)
    assert judged is not None, judged
    assert judged["judgement"], judged["error"]
    assert judged["judgement"]["total"] == pytest.approx(4.0)
    assert "★ judged 4.00/5 (75.00/100)" in shown


async def test_f11_judges_without_a_reference(model: Path) -> None:
    """No real observation at hand: the prediction is judged on its own, as rollout's
    judge does, and the judgement says so."""
    judged, shown = await judge_the_turn(model, reference="")
    assert judged["judgement"]["total"] == pytest.approx(4.0)
    assert "No real observation" in judged["reference"]
    assert "★ judged 4.00/5" in shown


async def test_max_tokens_caps_the_world_model_not_the_judge(model: Path) -> None:
    """--max-tokens is for the world model's turns; the judge has its own limit
    (``[generation] judge_max_tokens``), which F11's dialog shows and takes."""
    app = make_app(model, max_tokens=200, judge_max_tokens=3000)
    # The progress screen shows only while the judge writes: a quick judge can come and
    # go between two looks at the screen, so every screen shown is kept.
    shown: list[Screen[object]] = []
    async with app.run_test(size=(130, 40)) as pilot:
        app.screen_change_signal.subscribe(app, shown.append, immediate=True)
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        await pilot.press("f11")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeSetup")
        field = app.screen.query_one("#judge-max-tokens", Input)
        assert field.value == "3000"
        field.value = "2500"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeView", 120)
    [progress] = [s for s in shown if s.__class__.__name__ == "JudgeProgress"]
    assert progress.run.params.max_tokens == 2500  # type: ignore[attr-defined]


class Loads(logging.Handler):
    """The engine's "loaded" records: which model file, on which thread."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("loaded "):
            self.seen.append((str(record.args[0]), record.threadName))  # type: ignore[index]


async def test_a_judge_model_of_its_own_decodes_on_the_engine_thread(
    model: Path, tmp_path: Path
) -> None:
    # A second decoding thread would give llama.cpp a second OpenMP pool: every pool
    # thread would then sleep at each barrier (simulator/queue.py).
    judge = write_scripted_model(tmp_path / "judge.gguf", SCRIPT)
    loads = Loads()
    engine_log = logging.getLogger("agentworld.engine")
    engine_log.addHandler(loads)
    level = engine_log.level
    engine_log.setLevel(logging.INFO)

    def local(setup: Screen[object]) -> None:
        setup.query_one("#local", RadioButton).value = True
        setup.query_one("#path", Input).value = str(judge)

    try:
        judged, _ = await judge_the_turn(model, local)
        assert judged is not None and judged["judgement"], judged
        assert judged["judgement"]["total"] == pytest.approx(4.0)
    finally:
        engine_log.removeHandler(loads)
        engine_log.setLevel(level)
    assert loads.seen == [(str(model), "engine"), (str(judge), "engine")]


def test_a_call_that_brings_its_own_model_runs_with_none_loaded() -> None:
    queue = EngineQueue(None)
    results: list[tuple[object, str | None]] = []
    finished = threading.Event()

    def note(result: object, error: str | None) -> None:
        results.append((result, error))
        if len(results) == 2:
            finished.set()

    queue.call(CallJob(lambda _engine: "needs one", note))
    queue.call(CallJob(lambda _engine: threading.current_thread().name, note, needs_model=False))
    try:
        assert finished.wait(10)
    finally:
        queue.close()
    assert results == [(None, "no model is loaded"), ("engine", None)]


async def test_the_judge_is_watched_as_it_streams_and_esc_stops_it(model: Path) -> None:
    """F11 shows the judge's answer as it comes, with its token limit (its own setting,
    ``judge_max_tokens``); Esc stops it and records nothing."""
    from faultserver import FaultServer, Reply

    app = make_app(model, judge_max_tokens=4096)
    async with app.run_test(size=(130, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        await pilot.press(*"ls", "enter")
        await wait_for(pilot, turn_done(app))
        with FaultServer(
            default=Reply(content=["Comparing", " the listings"], hang_after=2)
        ) as judge:
            await pilot.press("f11")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeSetup")
            setup = app.screen
            setup.query_one("#reference").text = "README.md  src"
            setup.query_one("#server", RadioButton).value = True
            setup.query_one("#url").value = judge.url
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "JudgeProgress")
            progress = app.screen
            await wait_for(
                pilot, lambda: "Comparing the listings" in progress.query_one("#judge-stream").text
            )
            assert "up to 4,096 tokens" in str(progress.query_one("Label").render())
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "MainScreen", 30)
        assert pane(app).session.turns[0].judgement is None  # stopped: nothing recorded
        await pilot.press(*"pwd", "enter")  # the app goes on as before
        await wait_for(pilot, lambda: len(pane(app).session.turns) == 2 and not pane(app).busy)


async def test_f11_judges_with_a_prompts_folder_the_user_points_to(
    model: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "official"
    (folder / "terminal").mkdir(parents=True)
    (folder / "terminal" / "judge_system_prompt.txt").write_text(
        "OFFICIAL terminal judge instructions.", "utf-8"
    )
    seen: list[list[dict[str, str]]] = []
    from agentworld_tui.judging import turn as judging_turn

    judge_turn = judging_turn.judge_turn

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[3])
        return judge_turn(*args, **kwargs)

    from agentworld_tui.ui import judging as ui_judging

    ui_judging.judge_turn = watched  # type: ignore[assignment]
    try:
        judged, _shown = await judge_the_turn(
            model, lambda screen: setattr(screen.query_one("#prompts"), "value", str(folder))
        )
    finally:
        ui_judging.judge_turn = judge_turn
    assert judged is not None and judged["judgement"]
    assert seen and seen[0][0] == {
        "role": "system",
        "content": "OFFICIAL terminal judge instructions.",
    }
