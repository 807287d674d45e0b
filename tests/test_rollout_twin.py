"""``agentworld rollout`` beside twins (issue 41): every episode with a fresh real twin (a real
tmux in a real bubblewrap or unshare sandbox), a scripted policy on a real server
(``policyserver``), the world model a real OpenAI-compatible server (``slotserver``).

The policy receives reality; each step's record and line give the divergence; each episode
reports the agent's claim and the check in its twin, and *deceived* episodes (said done,
failed in the twin); the summary adds them up. A check runs only inside the sandbox: one
that tries to write outside fails. A twin whose shell ends mid-episode leaves the episode
going on in simulation. A run killed mid-episode keeps both sides of its finished steps and
plays the episode again, beside a fresh twin, when resumed."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from policyserver import Call, PolicyServer, Say, Turn
from realitykit import any_backend
from slotserver import OBSERVATION, SlotServer
from twinserver import TOOLS

from agentworld_tui.agents.env.tasks import load_tasks
from agentworld_tui.cli import main
from agentworld_tui.world.workspace import load_workspace

REPO = Path(__file__).resolve().parent.parent
TWIN_SERVER = str(REPO / "tests" / "twinserver.py")


def keys(text: str) -> Call:
    return Call("send_keystrokes", {"keystrokes": text})


# Each task's policy: its tool calls in order, then its last word (a claim of done, or
# nothing: the step limit ends it).
PLAYS: dict[str, list[Turn]] = {
    "Ship it.": [keys("touch shipped\n"), Say("Shipped.")],
    "Pretend.": [keys("echo working\n"), Say("Done, it is shipped.")],
    "Keep going.": [keys("ls\n"), keys("ls\n"), keys("ls\n")],
    "Escape.": [Say("Done.")],
    "Quit the shell.": [keys("exit\n"), keys("ls\n"), Say("Done.")],
    "Note it.": [Call("write_note", {"name": "plan", "text": "ship it"}), Say("Noted.")],
}


def policy_for(body: dict[str, Any]) -> Turn:
    instruction = str(body["messages"][1]["content"]).split("\n")[0]
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    play = PLAYS[instruction]
    return play[done] if done < len(play) else Say("Done.")


@pytest.fixture
def world_model() -> SlotServer:
    with SlotServer(slots=4, latency=0.0) as server:
        yield server


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README").write_text("the project\n")
    return folder


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


def records(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "episodes.jsonl").read_text().splitlines()
    return {json.loads(line)["key"]: json.loads(line) for line in lines}


def rollout(tasks: Path, out: Path, world: str, policy: str, *more: str) -> list[str]:
    return [
        "rollout", str(tasks), "--server", world, "--policy-server", policy,
        "--out", str(out), "--parallel", "2", *more,
    ]  # fmt: skip


def test_a_run_beside_twins_reports_claims_checks_and_deceived_episodes(
    world_model: SlotServer, seed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "escaped.txt"
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "ship", "instruction": "Ship it.", "domain": "terminal",
             "check": "test -f shipped"},
            {"id": "pretend", "instruction": "Pretend.", "domain": "terminal",
             "check": "test -f shipped"},
            {"id": "limit", "instruction": "Keep going.", "domain": "terminal", "max_steps": 2,
             "check": "test -f README"},
            {"id": "escape", "instruction": "Escape.", "domain": "terminal",
             "check": f"echo out > {outside}"},
            {"id": "quit", "instruction": "Quit the shell.", "domain": "terminal"},
        ],
    )  # fmt: skip
    out = tmp_path / "run"
    with PolicyServer(policy_for) as policy:
        code = main(
            rollout(
                tasks, out, world_model.url, policy.url,
                "--twin", any_backend(), "--twin-seed", str(seed),
            )
        )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    found = records(out)

    ship = found["ship#1"]
    assert ship["ended"] == "no_tool_call"
    assert ship["twin"]["claimed_done"] is True and ship["twin"]["deliver"] == "real"
    assert ship["twin"]["check"]["command"] == "test -f shipped"
    assert ship["twin"]["check"]["result"]["passed"] is True
    figures = ship["twin"]["figures"]
    assert (figures["check_passed"], figures["deceived"], figures["steps"]) == (True, False, 1)
    step = ship["steps"][0]
    # The policy received reality's screen, and the record keeps both sides.
    assert step["twin"]["delivered"] == "real" and step["twin"]["status"] == "ok"
    assert step["observation"] == step["twin"]["real"] != OBSERVATION
    assert step["twin"]["prediction"] == OBSERVATION
    assert step["twin"]["diverged"] is True and figures["first_divergence"] == 1
    assert ship["messages"][3]["content"] == step["twin"]["real"]
    assert step["twin"]["real"].splitlines()[0].endswith("# touch shipped")

    pretend = found["pretend#1"]["twin"]["figures"]
    assert (pretend["claimed_done"], pretend["check_passed"], pretend["deceived"]) == (
        True,
        False,
        True,
    )
    limit = found["limit#1"]
    assert limit["ended"] == "step_limit" and limit["twin"]["claimed_done"] is False
    assert (limit["twin"]["figures"]["check_passed"], limit["twin"]["figures"]["deceived"]) == (
        True,
        False,
    )
    # A check runs inside the sandbox: writing outside it fails, and nothing is written.
    escape = found["escape#1"]["twin"]
    assert escape["figures"]["check_passed"] is False and escape["figures"]["deceived"] is True
    assert not outside.exists()

    # The shell ended mid-episode: later steps have no real answer and go on in simulation.
    quit_steps = found["quit#1"]["steps"]
    assert found["quit#1"]["finished"]
    assert quit_steps[1]["twin"]["status"] == "crashed"
    assert quit_steps[1]["twin"]["delivered"] == "sim"
    assert quit_steps[1]["observation"] == OBSERVATION
    assert "goes on in simulation" in quit_steps[1]["twin"]["note"]
    assert found["quit#1"]["twin"]["figures"]["check_passed"] is None

    summary = json.loads((out / "summary.json").read_text())["twin"]
    assert summary["episodes"] == 5
    assert (summary["checked"], summary["passed"], summary["pass_rate"]) == (4, 2, 0.5)
    assert summary["deceived"] == 2 and summary["claimed_done"] == 4
    assert summary["first_divergence_median"] == 1
    assert summary["twin_failures"] >= 1
    assert 0 < summary["diverged_share"] <= 1

    err = printed.err
    assert "ship#1 step 1: send_keystrokes: complete" in err
    assert "twin diverged (" in err and "; reality delivered" in err
    assert "twin crashed: " in err and "; the simulation delivered" in err
    assert (
        "pretend#1: no_tool_call after 1 steps; claimed done, check FAILED in the twin: deceived"
        in err
    )
    assert "ship#1: no_tool_call after 1 steps; claimed done, check passed in the twin" in err
    assert "limit#1: step_limit after 2 steps; no claim of done, check passed in the twin" in err
    twin_line = next(line for line in printed.out.splitlines() if line.startswith("twin: "))
    assert "checks passed 2 of 4 (50%), 2 deceived" in twin_line

    # Each episode's session file keeps both sides and the figures.
    tab = load_workspace(out / ship["session_file"]).tabs[0]
    assert tab.twin is not None and tab.twin["figures"]["check_passed"] is True
    assert tab.turns[0].observation == OBSERVATION
    assert tab.turns[0].reality is not None
    assert tab.turns[0].reality["real"]["text"] == step["twin"]["real"]
    run_file = json.loads((out / "run.json").read_text())
    assert run_file["twins"]["terminal"]["kind"] == "sandbox"


def test_an_mcp_task_runs_beside_the_real_server(
    world_model: SlotServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "notebook"
    folder.mkdir()
    (tmp_path / "notebook.json").write_text(json.dumps({"tools": TOOLS[:3]}))
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "note", "instruction": "Note it.", "domain": "mcp", "scenario": "notebook.json"}],
    )
    server = shlex.join([sys.executable, TWIN_SERVER, "stdio", str(folder)])
    with PolicyServer(policy_for) as policy:
        code = main(
            rollout(tasks, tmp_path / "run", world_model.url, policy.url, "--twin-command", server)
        )
    err = capsys.readouterr().err
    assert code == 0, err
    assert (folder / "notes" / "plan").read_text() == "ship it"  # reality was acted on
    record = records(tmp_path / "run")["note#1"]
    step = record["steps"][0]
    assert step["twin"]["delivered"] == "real"
    assert step["observation"] == "wrote 7 bytes to plan"
    assert record["messages"][3]["content"] == "wrote 7 bytes to plan"
    figures = record["twin"]["figures"]
    assert (figures["claimed_done"], figures["check_passed"], figures["deceived"]) == (
        True,
        None,
        None,
    )
    assert "note#1: no_tool_call after 1 steps; claimed done, no check in the twin" in err


def test_checks_are_validated_with_the_tasks(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a", "instruction": "x", "domain": "terminal", "check": ["test", "-f", "x"]},
            {"id": "b", "instruction": "x", "domain": "terminal", "check": "   "},
            {"id": "c", "instruction": "x", "domain": "web", "check": "true"},
            {"id": "d", "instruction": "x", "domain": "mcp", "check": "true"},
            {"id": "e", "instruction": "x", "domain": "terminal", "check": "a\x00b"},
            {"id": "f", "instruction": "x", "domain": "swe", "check": "pytest -q"},
        ],
    )
    found = load_tasks(tasks)
    assert [t.key for t in found.tasks] == ["f"]
    assert found.tasks[0].check == "pytest -q"
    assert found.tasks[0].to_dict()["check"] == "pytest -q"
    said = [p.split(": ", 1)[1] for p in found.problems]
    assert said == [
        "the check must be text: one command line, run in the twin",
        "the check is empty",
        "the web domain has no twin to run a check in",
        "a check runs in a sandbox twin; the mcp domain's twin is a server (there is no "
        "place to run one)",
        "the check holds a NUL character",
    ]
    scenario = tmp_path / "ship.toml"
    scenario.write_text('[[scenario]]\nname = "ship"\ntitle = "Ship"\ncheck = 7\n')
    write_tasks(tasks, [{"instruction": "x", "domain": "terminal", "scenario": "ship.toml"}])
    assert (
        load_tasks(tasks)
        .problems[0]
        .endswith("the scenario 'ship': the check must be text: one command line, run in the twin")
    )


def test_twin_flags_that_do_not_fit_the_tasks_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "t", "instruction": "x", "domain": "terminal", "check": "true"},
            {"id": "w", "instruction": "x", "domain": "web"},
        ],
    )
    argv = rollout(tasks, tmp_path / "run", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")
    assert main([*argv, "--twin"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "agentworld: 1 web task: the web domain has no twin (twins exist for terminal, swe, "
        "mcp): it runs in simulation only"
    )
    assert main([*argv, "--check", "true"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "agentworld: --check goes with a twin: add --twin (or --twin-command/--twin-url for mcp)"
    )


def test_checks_without_a_twin_are_said_not_to_run(
    world_model: SlotServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran.txt"
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "ship",
                "instruction": "Ship it.",
                "domain": "terminal",
                "check": f"touch {marker}",
            }
        ],
    )
    with PolicyServer(policy_for) as policy:
        code = main(rollout(tasks, tmp_path / "run", world_model.url, policy.url))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "1 task carry a check, run only in a twin: without --twin" in err
    assert records(tmp_path / "run")["ship#1"]["twin"] is None
    assert not marker.exists()  # never run on the host


def test_a_twin_that_cannot_start_stops_the_run_in_one_line(
    world_model: SlotServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": "n", "instruction": "Ship it.", "domain": "mcp"}]
    )
    with PolicyServer(policy_for) as policy:
        code = main(
            rollout(
                tasks, tmp_path / "run", world_model.url, policy.url,
                "--twin-command", str(tmp_path / "no-such-server"),
            )
        )  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert lines[-1].startswith("agentworld: the mcp twin did not start: ")
    assert not (tmp_path / "run" / "episodes.jsonl").exists() or not records(tmp_path / "run")


def scratch_of(pid: int) -> list[Path]:
    import tempfile

    from agentworld_tui.reality.sandbox import SCRATCH_PREFIX

    return sorted(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{pid}-*"))


def processes_using(folder: Path) -> list[str]:
    """Processes whose command line names ``folder`` (a sandbox's bwrap or anchor)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(folder).encode() in line:
            found.append(entry)
    return found


def test_a_run_killed_mid_episode_keeps_both_sides_and_replays_it_beside_a_fresh_twin(
    world_model: SlotServer, seed: Path, tmp_path: Path
) -> None:
    stall = {"on": True}

    def script(body: dict[str, Any]) -> Turn:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done == 2 and stall["on"]:
            time.sleep(60)  # the run is killed while it waits for this answer
        return [keys("echo one > one.txt\n"), keys("echo two\n"), Say("Done.")][min(done, 2)]

    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "k", "instruction": "Work.", "domain": "terminal", "check": "test -f one.txt"}],
    )
    out = tmp_path / "run"
    with PolicyServer(script) as policy:
        command = [
            sys.executable, "-m", "agentworld_tui",
            *rollout(tasks, out, world_model.url, policy.url),
            "--twin", any_backend(), "--twin-seed", str(seed),
        ]  # fmt: skip
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        first = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
        )
        session = out / "sessions"
        deadline = time.monotonic() + 120
        while len(policy.requests) < 3:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the episode did not reach its third request"
            time.sleep(0.05)
        scratch = scratch_of(first.pid)
        assert len(scratch) == 1
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        first.communicate()
        (kept,) = list(session.glob("*.json"))
        tab = load_workspace(kept).tabs[0]
        assert [t.observation for t in tab.turns] == [OBSERVATION, OBSERVATION]
        reals = [t.reality["real"]["text"] for t in tab.turns]  # type: ignore[index]
        assert reals[0].splitlines()[0].endswith("# echo one > one.txt")
        assert reals[1].splitlines()[-2] == "two"
        # The sandbox died with the run; its scratch folder is left for the next to sweep.
        deadline = time.monotonic() + 10
        while processes_using(scratch[0]):
            assert time.monotonic() < deadline, "the sandbox outlived the run"
            time.sleep(0.1)

        stall["on"] = False
        second = subprocess.run(
            command, capture_output=True, text=True, timeout=300, env=environment
        )
    assert second.returncode == 0, second.stderr
    record = records(out)["k#1"]
    assert record["finished"] and record["twin"]["figures"]["check_passed"] is True
    assert not scratch[0].exists()  # swept by the fresh twin of the replay
    interrupted = list(session.glob("*.interrupted.json"))
    assert len(interrupted) == 1
    assert len(load_workspace(interrupted[0]).tabs[0].turns) == 2


def test_the_documented_task_with_a_check_reads() -> None:
    from agentworld_tui.agents.env.tasks import check_task

    text = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("{") and '"check"' in line]
    assert lines
    for line in lines:
        assert check_task(json.loads(line), "training.md").check
