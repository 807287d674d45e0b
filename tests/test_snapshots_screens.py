"""A snapshot of every screen and dialog of the real app, and of every tab at 80x24
(update with `pytest --snapshot-update`). Everything on screen is what the app drew from
fixed inputs: the test's own session files (times fixed, in UTC), the shipped scenarios,
presets and worlds, a machine's memory given as figures."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from snapshotkit import folder_held, settled
from test_app import wait_for
from test_app_history import write_benchmark

from agentworld_tui.config import Settings
from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.judging.turn import JudgeRun
from agentworld_tui.models.hardware import MachineMemory
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.world.judgement import Judgement, Verdict
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.store import write_atomic
from agentworld_tui.world.workspace import Workspace

MOMENT = 1_780_000_000.0  # a fixed time for every saved session
GiB = 1 << 30


DATA = Path("/tmp/agentworld-snapshots/screens-data")
"""A fixed data dir: a damaged file's problem names its path on screen."""


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with folder_held(DATA):
        shutil.rmtree(DATA, ignore_errors=True)
        monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", "/tmp/agentworld-snapshots/config")
        monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(DATA))
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()
        yield


def app_for() -> AgentWorldApp:
    settings = Settings()
    settings.model.threads = 2
    return AgentWorldApp(settings, offer_models=False, offer_resume=False)


def played(domain: str, *pairs: tuple[str, str]) -> Session:
    """A session of ``domain`` on its first scenario with ``pairs`` of (action, observation)."""
    dom = get_domain(domain)
    session, _ = new_session(dom, load_scenarios(domain)[0][0])
    session.created = MOMENT
    for action, observation in pairs:
        turn = session.begin_turn(dom.parse_action(action, session.scenario))
        session.finish_turn(
            turn,
            observation=observation,
            reasoning="The agent looks around.",
            status="complete",
            raw=f"The agent looks around.</think><predicted_observation>{observation}"
            "</predicted_observation>",
        )
    for branch in session.branches:
        branch.created = MOMENT
    return session


def saved(folder: Path, name: str, *sessions: Session) -> Path:
    workspace = Workspace(list(sessions), name=name, created=MOMENT, updated=MOMENT)
    path = folder / f"{name.lower().replace(' ', '-')}.json"
    write_atomic(path, workspace.to_json())
    return path


async def ready(app: AgentWorldApp, pilot: Any) -> None:
    await asyncio.wait_for(app.tabs_ready.wait(), 120)
    await settled(app, pilot)


Setup = Callable[[AgentWorldApp, Any], Awaitable[None]]


async def sessions(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.sessions import SessionBrowser

    folder = app.library.folder
    folder.mkdir(parents=True, exist_ok=True)
    saved(folder, "Morning debugging", played("terminal", ("ls", "a b"), ("pwd", "/app")))
    saved(folder, "Inbox triage", played("android", ('{"action": "back"}', "<hierarchy/>")))
    damaged = folder / "damaged.json"
    damaged.write_text('{"format": "agentworld-session", "tabs": [', "utf-8")
    os.utime(damaged, (MOMENT, MOMENT))
    app.push_screen(SessionBrowser(app.library))


async def branches(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.branches import BranchesScreen

    session = played("terminal", ("ls", "a b"), ("cat a", "hello"))
    session.fork(2, get_domain("terminal").parse_action("cat b", session.scenario))
    turn = session.turns[-1]
    session.finish_turn(turn, observation="world", reasoning="", status="complete")
    for branch in session.branches:
        branch.created = MOMENT
    app.push_screen(BranchesScreen(session, lambda: None))


async def action_edit(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.branches import ActionEditScreen

    session = played("os", ("import pyautogui\npyautogui.click(10, 20)", "<desktop-frame/>"))
    app.push_screen(ActionEditScreen(session, session.turns[0]))


async def trajectories(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.replay import TrajectoryPicker

    path, _, _ = write_benchmark(Path(app.library.folder).parent / "bench")
    picker = TrajectoryPicker(str(path))
    app.push_screen(picker)
    await pilot.pause()
    picker.open(str(path))
    await wait_for(pilot, lambda: picker.loaded is not None)
    picker.query_one("#loaded").update(  # type: ignore[attr-defined]
        "1 trajectories (2 samples) in terminal"  # the file's path differs run to run
    )


async def replay(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.replay import ReplayScreen
    from agentworld_tui.world.trajectories import load_benchmark

    path, _, _ = write_benchmark(Path(app.library.folder).parent / "bench")
    trajectory = load_benchmark(path).trajectories[0]
    app.push_screen(ReplayScreen(trajectory, app.simulator))


async def models(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.model_picker import ModelPicker

    machine = MachineMemory(ram_total=32 * GiB, ram_available=28 * GiB)
    app.push_screen(ModelPicker(machine=machine))


async def judge_setup(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.judge_view import JudgeSetup

    app.push_screen(JudgeSetup("a.txt  b.txt\nroot@box:/app#", loaded_model="model.gguf"))


def a_verdict() -> Verdict:
    scores = {"format": 5.0, "factuality": 4.0, "consistency": 4.0, "realism": 3.0, "quality": 4.0}
    judgement = Judgement(
        scores, strengths=("The listing is well formed.",), weaknesses=("A file is missing.",)
    )
    return Verdict(judgement, judge="judge.gguf", reference="a.txt  b.txt")


async def judge_view(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.judge_view import JudgeView

    app.push_screen(JudgeView(a_verdict(), title="Turn 2"))


async def judge_progress(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.engines.base import ReasoningDelta
    from agentworld_tui.ui.judging import JudgeProgress

    session = played("terminal", ("ls", "a b"))
    run = JudgeRun(session, session.turns[0], GenerationParams(max_tokens=32768))
    run.sink(ReasoningDelta("Comparing the listing with the real one. ", 9, 9))
    app.push_screen(JudgeProgress(run, "Judging turn 1", local=True))


async def perturbations(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.perturbation_picker import PerturbationPicker

    app.push_screen(PerturbationPicker("mcp"))


async def worlds(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.world_editor import WorldEditor

    app.push_screen(WorldEditor())


async def state(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.state_editor import StateEditor

    scenario = load_scenarios("terminal")[0][0]
    app.push_screen(StateEditor("terminal", scenario, True))


async def raw(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.raw_output import RawOutputScreen

    session = played("mcp", ('{"name": "list_directory", "arguments": {"path": "/"}}', "{}"))
    turn = session.turns[0]
    turn.raw = (
        "Listing.</think><predicted_observation>```json\n<predicted_observation>\n"
        '{"entries": []}\n```</predicted_observation>'
    )
    turn.extraction = "a repeated <predicted_observation> tag kept as text"
    app.push_screen(RawOutputScreen(turn))


async def resume(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.sessions import ConfirmScreen

    question = "Resume “Morning debugging” (7 turns in 2 tabs)?"
    app.push_screen(ConfirmScreen(question, yes="Resume", no="Start fresh", default=True))


async def rename(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.ui.screens.sessions import RenameScreen

    app.push_screen(RenameScreen("Morning debugging"))


async def help_over_os(app: AgentWorldApp, pilot: Any) -> None:
    """The OS tab's starting state has tabs in it: columns line up and nothing of the
    screen below shows through the dialog above."""
    app.show_tab("os")
    await settled(app, pilot)
    await pilot.press("f1")


async def agent(app: AgentWorldApp, pilot: Any) -> None:
    """The tab served to an agent (a real server on a free port; the address shown is
    fixed, since the port differs run to run)."""
    from agentworld_tui.ui.agent_serving import TabServing
    from agentworld_tui.ui.screens.agent import AgentScreen

    pane = app.pane_for("terminal")
    assert pane is not None
    serving = TabServing(app, pane)
    await serving.begin()
    app.serving["terminal"] = serving
    serving.url = "http://127.0.0.1:8765/mcp"
    serving.show()
    app.push_screen(AgentScreen(serving))


async def agent_held(app: AgentWorldApp, pilot: Any) -> None:
    from agentworld_tui.agents.mcp.sessions import OpenSession
    from agentworld_tui.agents.mcp.steering import AgentCall, AgentConnection, HeldObservation
    from agentworld_tui.simulator import TurnRun
    from agentworld_tui.ui.agent_serving import TabServing
    from agentworld_tui.ui.screens.agent import HeldScreen

    pane = app.pane_for("terminal")
    assert pane is not None
    session = played("terminal", ("ls", "README.md  src"))
    opened = OpenSession(session, lambda: None, lambda: None)
    connection = AgentConnection("agent-1", "http", "claude-code 2.1.0", opened)
    run = TurnRun(session, session.turns[0], GenerationParams())
    call = AgentCall(connection, "send_keystrokes", 1, 1, run)
    answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    held = HeldObservation(call, "README.md  src\nuser@devbox:~/project$", answer)
    app.push_screen(HeldScreen(TabServing(app, pane), held))


SCREENS: dict[str, tuple[Setup, tuple[int, int]]] = {
    "agent": (agent, (110, 34)),
    "agent-held": (agent_held, (110, 30)),
    "sessions": (sessions, (110, 30)),
    "branches": (branches, (110, 30)),
    "action-edit": (action_edit, (110, 30)),
    "trajectory-picker": (trajectories, (110, 30)),
    "replay": (replay, (110, 30)),
    "model-picker": (models, (120, 34)),
    "judge-setup": (judge_setup, (110, 30)),
    "judge-view": (judge_view, (110, 30)),
    "judge-progress": (judge_progress, (110, 30)),
    "perturbation-picker": (perturbations, (110, 34)),
    "world-editor": (worlds, (110, 34)),
    "state-editor": (state, (110, 34)),
    "raw-output": (raw, (110, 30)),
    "resume": (resume, (110, 30)),
    "rename": (rename, (110, 30)),
    "help-over-os-80x24": (help_over_os, (80, 24)),
}


@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(snap_compare: Any, name: str) -> None:
    setup, size = SCREENS[name]
    app = app_for()

    async def run(pilot: Any) -> None:
        await ready(app, pilot)
        await setup(app, pilot)
        await settled(app, pilot)

    assert snap_compare(app, run_before=run, terminal_size=size)


@pytest.mark.parametrize("domain", list(DOMAINS)[:7])
def test_every_tab_at_80x24(snap_compare: Any, domain: str) -> None:
    """A new user's first look at each tab in the smallest common terminal: the screen,
    the editor and the keys all fit."""
    app = app_for()

    async def run(pilot: Any) -> None:
        await ready(app, pilot)
        app.show_tab(domain)
        await settled(app, pilot)
        app.focus_editor()
        await settled(app, pilot)

    assert snap_compare(app, run_before=run, terminal_size=(80, 24))


def test_the_session_files_the_snapshots_use_are_valid(tmp_path: Path) -> None:
    """The fixed sessions above are real session files the app opens."""
    from agentworld_tui.world.workspace import load_workspace

    path = saved(tmp_path, "Check", played("terminal", ("ls", "a b")))
    loaded = load_workspace(path)
    assert loaded.updated == MOMENT and loaded.tabs[0].turns[0].observation == "a b"
    assert json.loads(path.read_text("utf-8"))["name"] == "Check"
