"""What shadow mode keeps: each turn's two sides and the divergence in the session file (a
damaged record refused like any damaged field, a kill -9 mid-episode losing no finished
turn), an MCP twin's real results, a judge of the prediction against reality, and an
export of the user's own traffic that ``agentworld bench`` scores end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply
from realitykit import any_backend, living_in
from shadowkit import ANSWER, keys, terminal_shadow, twinned_session

from agentworld_tui.cli import main
from agentworld_tui.domains import get_domain
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.reality import TwinSpec, TwinStatus
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.shadow import Shadow, end_episode
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.export import benchmark_records, markdown_transcript
from agentworld_tui.world.session import new_session
from agentworld_tui.world.session_file import TWIN_STATUSES
from agentworld_tui.world.workspace import Workspace, WorkspaceError, load_workspace

PARAMS = GenerationParams(temperature=0.0, max_tokens=256)
ROOT = Path(__file__).resolve().parents[1]
TWIN_SERVER = str(Path(__file__).resolve().parent / "twinserver.py")


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(default=Reply(content=[ANSWER])) as made:
        yield made


@pytest.fixture
def simulator(server: FaultServer) -> Iterator[Simulator]:
    made = Simulator(RemoteEngine(server.url), PARAMS)
    assert made.load_and_wait() is None
    yield made
    made.close()


def twinned_file(simulator: Simulator, seed: Path, path: Path, commands: list[str]) -> Workspace:
    """A session file of a terminal episode run in shadow mode, delivering reality."""
    shadow = terminal_shadow(seed, "real", check="test -f done.txt")
    try:
        session = twinned_session(shadow)
        workspace = Workspace([session], path=path)
        for command in commands:
            simulator.send(session, keys(command), shadow=shadow).wait()
        end_episode(session, shadow, claimed_done=True)
        workspace.save()
    finally:
        shadow.runner.close()
    return workspace


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    return folder


# -- the session file ------------------------------------------------------------------------
def test_the_file_s_twin_statuses_are_reality_s() -> None:
    assert tuple(s.value for s in TwinStatus) == TWIN_STATUSES


def test_a_damaged_reality_record_is_refused_like_any_damaged_field(
    simulator: Simulator, seed: Path, tmp_path: Path
) -> None:
    path = tmp_path / "s.json"
    twinned_file(simulator, seed, path, ["echo hi"])
    good = json.loads(path.read_text())
    assert load_workspace(path).tabs[0].turns[0].reality is not None
    damages = {
        "tabs[0].turns[0].reality.delivered: 'both' is not one of real, sim": (
            lambda tab: tab["turns"][0]["reality"].update(delivered="both")
        ),
        "tabs[0].turns[0].reality.real.status: 'fine' is not one of ok, error, timeout, "
        "crashed": lambda tab: tab["turns"][0]["reality"]["real"].update(status="fine"),
        "tabs[0].turns[0].reality.real.text: expected text, got a list": (
            lambda tab: tab["turns"][0]["reality"]["real"].update(text=["x"])
        ),
        "tabs[0].turns[0].reality.divergence.score: 3 is above 1": (
            lambda tab: tab["turns"][0]["reality"]["divergence"].update(score=3)
        ),
        "tabs[0].twin.figures.steps: -2 is below 0": (
            lambda tab: tab["twin"]["figures"].update(steps=-2)
        ),
        "tabs[0].twin.check.result.passed: expected true or false, got text": (
            lambda tab: tab["twin"]["check"]["result"].update(passed="yes")
        ),
    }
    for message, damage in damages.items():
        data = json.loads(json.dumps(good))
        damage(data["tabs"][0])
        path.write_text(json.dumps(data))
        with pytest.raises(WorkspaceError) as caught:
            load_workspace(path)
        assert message in str(caught.value)


CHILD = """
import sys, time
sys.path.insert(0, sys.argv[4])
from faultserver import FaultServer
from shadowkit import keys, terminal_shadow, twinned_session
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.workspace import Workspace

simulator = Simulator(RemoteEngine(sys.argv[1]), GenerationParams(temperature=0, max_tokens=64))
assert simulator.load_and_wait() is None
shadow = terminal_shadow(__import__("pathlib").Path(sys.argv[3]))
print(shadow.runner.twin.sandbox.namespace(), flush=True)
session = twinned_session(shadow)
workspace = Workspace([session], path=__import__("pathlib").Path(sys.argv[2]))
save = lambda _s: workspace.save() and None
for command, seconds in (("echo one", 0.3), ("echo two", 0.3), ("sleep 100", 60)):
    simulator.send(session, keys(command, seconds), shadow=shadow, save=save).wait()
"""


def test_kill_9_mid_episode_keeps_both_sides_of_every_finished_turn(
    server: FaultServer, seed: Path, tmp_path: Path
) -> None:
    path = tmp_path / "episode.json"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            server.url,
            str(path),
            str(seed),
            str(ROOT / "tests"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        namespace = child.stdout.readline().strip()
        assert namespace, "the child did not start its twin"
        deadline = time.monotonic() + 60
        while len(server.chat_requests()) < 3 or not _turns_on_disk(path, 2):
            assert child.poll() is None, "the child ended"
            assert time.monotonic() < deadline, "the episode did not get to its third turn"
            time.sleep(0.05)
        time.sleep(0.3)  # the third action is being carried out in the sandbox
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    tab = load_workspace(path).tabs[0]
    assert [t.number for t in tab.turns] == [1, 2]
    for turn, said in zip(tab.turns, ("one", "two"), strict=True):
        assert turn.status == "complete" and turn.observation.startswith("PREDICTED")
        assert turn.reality is not None
        assert turn.reality["real"]["status"] == "ok"
        assert turn.reality["real"]["text"].splitlines()[-2] == said
        assert turn.reality["divergence"]["diverged"] is True
    deadline = time.monotonic() + 10
    while living_in(namespace) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert living_in(namespace) == []  # the sandbox died with its program


def _turns_on_disk(path: Path, count: int) -> bool:
    try:
        tabs = json.loads(path.read_text())["tabs"]
    except (OSError, ValueError, KeyError):
        return False
    return len(tabs[0].get("turns", [])) >= count


# -- an MCP twin: a real server writing real files -------------------------------------------
def test_an_mcp_twin_s_real_results_are_delivered_and_recorded(
    server: FaultServer, simulator: Simulator, tmp_path: Path
) -> None:
    folder = tmp_path / "notebook"
    folder.mkdir()
    spec = TwinSpec("mcp", command=(sys.executable, TWIN_SERVER, "stdio", str(folder)))
    runner, _first = spec.start()
    shadow = Shadow(runner, "real", spec)
    mcp = get_domain("mcp")
    session, _ = new_session(mcp, Scenario("notes", "Notes"))
    server.queue(
        Reply(content=["<predicted_observation>wrote 7 bytes to plan</predicted_observation>"]),
        Reply(content=['<predicted_observation>{"count": 3}</predicted_observation>']),
    )
    try:
        wrote = simulator.send(
            session,
            mcp.parse_action(
                json.dumps(
                    {"name": "write_note", "arguments": {"name": "plan", "text": "ship it"}}
                ),
                session.scenario,
            ),
            shadow=shadow,
        )
        wrote.wait()
        listed = simulator.send(
            session,
            mcp.parse_action(json.dumps({"name": "list_notes", "arguments": {}}), session.scenario),
            shadow=shadow,
        )
        listed.wait()
    finally:
        runner.close()
    assert (folder / "notes" / "plan").read_text() == "ship it"
    assert wrote.delivered == "wrote 7 bytes to plan"
    assert wrote.turn.reality["divergence"]["score"] == 0.0  # type: ignore[index]
    real = json.loads(listed.delivered)
    assert real["count"] == 1
    assert listed.turn.reality["divergence"]["kind"] == "json"  # type: ignore[index]
    assert listed.turn.reality["divergence"]["diverged"] is True  # type: ignore[index]
    assert session.twin == {
        "domain": "mcp",
        "kind": "mcp-command",
        "command": [sys.executable, TWIN_SERVER, "stdio", str(folder)],
        "deliver": "real",
    }


def test_an_swe_twin_edits_a_copy_of_the_repository_beside_the_world_model(
    server: FaultServer, simulator: Simulator, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    spec = TwinSpec("swe", seed=str(repo), backend=any_backend())  # type: ignore[arg-type]
    runner, _first = spec.start()
    shadow = Shadow(runner, "sim", spec, check="grep -q 'a + b' pkg/calc.py")
    swe = get_domain("swe")
    session, _ = new_session(swe, Scenario("fix", "Fix"))
    edit = {
        "name": "str_replace_editor",
        "arguments": {
            "command": "str_replace",
            "path": "/testbed/pkg/calc.py",
            "old_str": "a - b",
            "new_str": "a + b",
        },
    }
    try:
        run = simulator.send(
            session, swe.parse_action(json.dumps(edit), session.scenario), shadow=shadow
        )
        run.wait()
        figures = end_episode(session, shadow, claimed_done=True)
    finally:
        runner.close()
    assert run.delivered == run.turn.observation  # the simulation was delivered
    assert run.turn.reality["real"]["status"] == "ok"  # type: ignore[index]
    assert "a + b" in run.turn.reality["real"]["text"]  # type: ignore[index]
    assert (figures.check_passed, figures.deceived) == (True, False)
    assert (repo / "pkg" / "calc.py").read_text().endswith("a - b\n")  # the copy was edited


# -- export, and bench on the user's own traffic ---------------------------------------------
def verdict(total: int) -> Reply:
    scores = dict.fromkeys(("format", "factuality", "consistency", "realism", "quality"), total)
    body = json.dumps({"strengths": [], "weaknesses": [], "scores": scores})
    return Reply(content=[f"<final_evaluation>{body}</final_evaluation>"])


def test_an_exported_twinned_session_is_a_benchmark_that_bench_scores_against_reality(
    simulator: Simulator, seed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.json"
    workspace = twinned_file(simulator, seed, path, ["echo alpha", "echo beta", "touch done.txt"])
    session = workspace.tabs[0]
    reals = [t.reality["real"]["text"] for t in session.turns]  # type: ignore[index]

    data = tmp_path / "mine"
    data.mkdir()
    out_file = data / "terminal_test.jsonl"
    assert main(["export", str(path), "--format", "agentworldbench", "-o", str(out_file)]) == 0
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert [line["turn_idx"] for line in lines] == [1, 2, 3]
    assert all(line["response"] == reals for line in lines)  # the real side, never the prediction
    assert [line["current_prompt"] for line in lines] == [t.user_message for t in session.turns]

    markdown = markdown_transcript([session])
    assert "**Reality** (delivered to the agent)" in markdown
    assert "the check passed" in markdown

    with FaultServer(default=Reply(content=[ANSWER])) as world, FaultServer() as judge:
        judge.queue(verdict(5), verdict(3), verdict(1))
        code = main(
            [
                "bench",
                str(data),
                "--server",
                world.url,
                "--server-model",
                "world-model",
                "--concurrency",
                "1",
                "--out",
                str(tmp_path / "run"),
                "--judge-server",
                judge.url,
                "--judge-model",
                "world-model",
                "--judge-concurrency",
                "1",
                "--json",
            ]
        )
        judged = [r.body["messages"][-1]["content"] for r in judge.chat_requests()]
        asked = [r.body["messages"] for r in world.chat_requests()]
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(asked) == 3
    # The world model is sent reality's history, as the agent received it.
    assert [m["content"] for m in asked[2] if m["role"] == "assistant"] == reals[:2]
    # Each prediction is judged against the real screen of its turn.
    for real, message in zip(reals, judged, strict=True):
        assert real.splitlines()[-2] in message
    (scores,) = json.loads(captured.out)
    terminal = scores["domains"]["terminal"]
    assert terminal["valid"] == 3
    assert terminal["score"]["total"] == 50.0  # means 5, 3, 1 -> 3 -> (3 - 1) / 4


def test_an_untwinned_session_exports_as_before() -> None:
    terminal = get_domain("terminal")
    session, _ = new_session(terminal, Scenario("t", "t"))
    turn = session.begin_turn(keys("ls"))
    session.finish_turn(turn, observation="a.txt", reasoning="", status="complete")
    (record,) = benchmark_records(session)
    assert record["response"] == ["a.txt"]
    assert "reality" not in turn.to_dict() and "twin" not in session.to_dict()


# -- the judge, with reality as the reference -------------------------------------------------
def test_a_judge_scores_the_prediction_against_reality_and_the_verdict_is_kept(
    simulator: Simulator, seed: Path, tmp_path: Path
) -> None:
    from agentworld_tui.engines.factory import EngineSpec
    from agentworld_tui.judging.reality import judge_against_reality

    path = tmp_path / "s.json"
    workspace = twinned_file(simulator, seed, path, ["echo judged"])
    session = workspace.tabs[0]
    turn = session.turns[0]
    with FaultServer() as judge:
        judge.queue(verdict(2))
        run, problems = judge_against_reality(
            simulator,
            session,
            turn,
            spec=EngineSpec(server=judge.url, model="world-model"),
            save=lambda _s: workspace.save() and None,
        )
        found = run.wait()
        sent = judge.chat_requests()[0].body["messages"][-1]["content"]
    assert problems == []
    assert found.judgement is not None and found.judgement.total == 2
    assert turn.reality["real"]["text"] in sent  # type: ignore[index]
    assert turn.reality["judgement"]["judgement"]["total"] == 2  # type: ignore[index]
    assert turn.judgement is None  # the F11 judgement (a reference the user gave) is apart
    assert load_workspace(path).tabs[0].turns[0].reality == turn.reality


def test_a_turn_without_a_real_answer_cannot_be_judged_against_reality(
    simulator: Simulator,
) -> None:
    from agentworld_tui.judging.reality import judge_against_reality

    terminal = get_domain("terminal")
    session, _ = new_session(terminal, Scenario("t", "t"))
    turn = session.begin_turn(keys("ls"))
    session.finish_turn(turn, observation="x", reasoning="", status="complete")
    with pytest.raises(ValueError, match="no real observation"):
        judge_against_reality(simulator, session, turn)
