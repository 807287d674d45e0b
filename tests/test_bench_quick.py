"""Every benchmark's quick mode runs and prints its figures.

The figures themselves are not checked here (machines are noisy; BENCHMARKS.md records
them): a benchmark that no longer runs, or no longer prints a number where it should, is
what these tests catch. Each runs as its own process, as a person would run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # `python -m pytest -m bench`

BENCH = Path(__file__).resolve().parents[1] / "bench"
NUMBER = r"-?\d+(?:\.\d+)?"
MEDIAN = rf"median {NUMBER}"

# For each benchmark, lines its output must hold, each with a number where one belongs.
EXPECTED: dict[str, list[str]] = {
    "streaming --control": [
        rf"app tok/s +{MEDIAN}",
        rf"loop tok/s +{MEDIAN}",
        rf"app ÷ bare loop +{MEDIAN}  \[{NUMBER} \.\. {NUMBER}\]",
        r"each \d+ tokens at a time",
        rf"app's main thread, % of a core, in the app's blocks +{MEDIAN}",
        rf"in the bare loop's blocks +{MEDIAN}",
        rf"all blocks pooled: app ÷ bare loop {NUMBER}",
        r"reasoning panel",
        r"terminal view",
        rf"threads woken \(voluntary context switches\) a second +{NUMBER}$",
        r"alternating with the bare loop's \((\d+) blocks a turn\)",
        r"control: the bare loop ÷ a second bare loop · prompt \d+ tokens",
        r"(\d+)/\1 blocks of \d+ tokens a side",
        rf"threads woken while the two loops ran, a second +{NUMBER}$",
        rf"first tok/s +{MEDIAN}",
        rf"second tok/s +{MEDIAN}",
        rf"first ÷ second \(both the same work\) +{MEDIAN}  \[{NUMBER} \.\. {NUMBER}\]",
    ],
    "streaming --block 0": [
        r"whole app turns alternating with whole runs",
        rf"app tok/s +{MEDIAN}",
        rf"loop tok/s +{MEDIAN}",
        rf"app ÷ bare loop +{MEDIAN}  \[{NUMBER} \.\. {NUMBER}\]",
        rf"app's main thread, % of a core +{MEDIAN}",
        rf"from first to last token +{MEDIAN}",
        rf"threads woken \(voluntary context switches\) a second +{NUMBER}$",
    ],
    "history": [
        rf"^ +2 +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}$",
        r"scripted qwen2 · transformer",
        r"scripted mamba · recurrent",
        rf"turns 2\.\.\d+: {MEDIAN}",
    ],
    "responsiveness": [
        rf"idle +p50 +{NUMBER} +p95 +{NUMBER}",
        rf"streaming +p50 +{NUMBER} +p95 +{NUMBER}",
        rf"decode speed during the rounds: {MEDIAN} tok/s",
    ],
    "rendering": [
        rf"a delta a token +{MEDIAN} ms",
        rf"one delta +{MEDIAN} ms",
        rf"token by token ÷ at once +{MEDIAN}",
        rf"streamed beyond at once over the {NUMBER} s stream, % of a core +{MEDIAN}%",
        rf"4 tokens a frame +{MEDIAN} ms",
        rf"all at once +{MEDIAN} ms",
        rf"streamed \(4 a frame\) ÷ at once +{MEDIAN}",
        rf"last quarter ÷ second quarter +{MEDIAN}",
    ],
    "startup": [
        rf"agentworld +{MEDIAN} ms",
        rf"minimal +{MEDIAN} ms",
        rf"agentworld ÷ minimal +{MEDIAN}",
    ],
    "startup --instructions": [
        rf"agentworld +{MEDIAN} ms",
        r"instructions from process start to first frame \(valgrind cachegrind\)$",
        # valgrind is on this project's machines; elsewhere the bench says it is missing
        rf"(agentworld +{MEDIAN} M  .*\n +minimal +{MEDIAN} M  .*\n +agentworld ÷ minimal +"
        rf"{MEDIAN}|valgrind is not installed: no instruction counts)",
    ],
    "probe": [
        rf"without load +{MEDIAN} s",
        rf"remembered load +{MEDIAN} s",
        rf"first load +{MEDIAN} s",
        rf"remembered ÷ without +{NUMBER}",
    ],
    "shadow": [
        rf"model alone step ms +{MEDIAN}",
        rf"twin alone step ms +{MEDIAN}",
        rf"shadow step ms +{MEDIAN}",
        rf"after the later side: shadow ms +{MEDIAN}",
        rf"after the model: plain turn ms +{MEDIAN}",
    ],
    "memory": [
        rf"after \d+ turns: {NUMBER} MiB beyond the model's mapping",
        rf"llama-cpp-python alone, same model, context and prompt: {NUMBER} MiB",
    ],
}


def run_quick(command: str) -> str:
    """A benchmark's quick mode: its name, then any arguments of its own."""
    name, *extra = command.split()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"{name} --quick failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_quick_mode_runs_and_prints_its_figures(name: str) -> None:
    out = run_quick(name)
    assert out.startswith("benchmark "), out[:200]
    for pattern in EXPECTED[name]:
        assert re.search(pattern, out, re.MULTILINE), (
            f"{name}: no line matching {pattern!r}:\n{out}"
        )
    # Every target line reports a verdict (met or missed: the value is not checked here).
    verdicts = re.findall(r"target .*: (meets the target|MISSES the target)", out)
    if name != "memory":  # memory has no target, only a figure to report
        assert verdicts, out
    if name.startswith("startup"):
        # Not a timing: which modules ``--version`` and ``--help`` import is exact.
        assert "--version and --help stay light: meets the target" in out, out
