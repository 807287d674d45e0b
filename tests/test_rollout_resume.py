"""``agentworld rollout`` (issue 30 item 4) as a command: killed with SIGKILL in the middle
of a run, it resumes where it was; finished episodes are not played again.

The world model is a real OpenAI-compatible server on 127.0.0.1, the policy a scripted one
of this test's own that issues tool calls (``policyserver``); the run is the real command
in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from policyserver import Call, PolicyServer, Say
from slotserver import SlotServer

from agentworld_tui.world.workspace import load_workspace

WAIT_LIMIT_S = 120.0
SCRIPT = [
    Call("send_keystrokes", {"keystrokes": "ls\n"}),
    Call("send_keystrokes", {"keystrokes": "cat index.html\n"}),
    Call("send_keystrokes", {"keystrokes": "pwd\n"}),
    Say("Done."),
]


def rollout(tasks: Path, out: Path, world: str, policy: str) -> list[str]:
    return [
        sys.executable, "-m", "agentworld_tui", "rollout", str(tasks),
        "--server", world, "--policy-server", policy, "--out", str(out),
        "--episodes", "2", "--parallel", "1", "--max-steps", "5",
    ]  # fmt: skip


def finished_lines(out: Path) -> list[dict]:
    path = out / "episodes.jsonl"
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]  # a torn last line is not a record
    return [json.loads(line) for line in lines]


def test_a_killed_run_resumes_without_playing_finished_episodes_again(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "\n".join(
            [
                json.dumps({"id": "one", "instruction": "Look around.", "domain": "terminal"}),
                '{"id": "broken", "instruction": ',
                json.dumps({"id": "two", "instruction": "Read the page.", "domain": "terminal"}),
                json.dumps({"id": "three", "instruction": "Where am I?", "domain": "terminal"}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "run"
    with SlotServer(slots=4, latency=0.05) as world, PolicyServer(SCRIPT, delay=0.15) as policy:
        command = rollout(tasks, out, world.url, policy.url)
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT_LIMIT_S
        while len(finished_lines(out)) < 2:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "no episode finished in time"
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        before = finished_lines(out)
        assert 2 <= len(before) < 6, "the run ended before it could be killed"
        second = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "tasks.jsonl:2: not valid JSON" in second.stderr and "(left out" in second.stderr
    after = finished_lines(out)
    counts = Counter(r["key"] for r in after)
    assert set(counts) == {f"{t}#{n}" for t in ("one", "two", "three") for n in (1, 2)}
    for record in before:  # what was finished before the kill is there once, unchanged
        assert counts[record["key"]] == 1 and record in after
    assert all(r["finished"] and r["ended"] == "no_tool_call" for r in after)
    assert all(len(r["steps"]) == 3 for r in after)
    summary = second.stdout.splitlines()
    assert summary[0] == (
        f"episodes: 6 of 6 finished, 0 failed ({6 - len(before)} played by this run; "
        "ends: no_tool_call 6)"
    )
    assert summary[1] == "steps: 18 (0 refused actions besides)"
    assert summary[2].startswith("simulator tokens per step: 64 generated")
    assert summary[3] == f"simulator tokens per policy token: {round(3 * 64 / (4 * 7), 2):g}"
    for record in after:  # every episode opens as a session, with its three turns
        tab = load_workspace(out / record["session_file"]).tabs[0]
        assert tab.id == record["session_id"] and len(tab.turns) == 3
