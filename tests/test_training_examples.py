"""The training examples of docs/training.md, run for real (issue 39 item 10).

Slow, and skipped where the trainer's packages are not installed (torch, transformers and
trl are not this project's dependencies): the example builds its own tiny policy and
world model, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_trl_grpo_drives_the_simulator_through_openenv() -> None:
    pytest.importorskip("trl")
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "trl_grpo_openenv.py"), "--demo"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()  # the trainer's own progress comes first
    logged = [json.loads(line) for line in lines if line.startswith('{"')]
    trained = [entry for entry in logged if "reward" in entry]
    assert [entry["step"] for entry in trained] == [1, 2]
    assert all(entry["tools/call_frequency"] == 2.0 for entry in trained)
    assert all(entry["rewards/SimulatedTerminal/mean"] == 1.0 for entry in trained)
    assert lines[-1].startswith("env serve saved 4 episodes, 8 simulated steps")


def test_verifiers_drives_the_simulator_through_openenv() -> None:
    """verifiers needs an environment of its own (it pins mcp 2.0.0 and openai<3, and
    its OpenEnv taskset openenv>=0.4.1): ``AGENTWORLD_VF_EVAL`` names its ``vf-eval``."""
    vf_eval = os.environ.get("AGENTWORLD_VF_EVAL", "")
    if not vf_eval or not Path(vf_eval).is_file():
        pytest.skip("AGENTWORLD_VF_EVAL does not name verifiers' vf-eval")
    pytest.importorskip("llama_cpp.server.app")
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "verifiers_openenv.py"), "--demo", vf_eval],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    rollouts = [json.loads(line) for line in lines if line.startswith('{"')]
    assert len(rollouts) == 2 and all(r["ok"] for r in rollouts)
    for rollout in rollouts:
        said = [text for who, text in rollout["turns"] if who == "env"]
        assert said[-1] == "root@box:/app# ls\nindex.html  notes.txt\nroot@box:/app#"
    assert lines[-1] == "env serve saved 2 episodes, 4 simulated steps"
