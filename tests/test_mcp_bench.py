"""The MCP benchmark's quick mode runs and prints every figure (the figures themselves
are BENCHMARKS.md's business: a machine's noise is not a test failure)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # `python -m pytest -m bench`

BENCH = Path(__file__).resolve().parents[1] / "bench" / "mcp.py"
NUMBER = r"-?\d+(?:\.\d+)?"
MS = rf"p50 +{NUMBER} ms +p95 +{NUMBER} ms"
EXPECTED = [
    rf"simulator directly +{MS}",
    rf"through MCP \(HTTP\) +{MS}",
    rf"added by MCP +{MS}",
    rf"a bare SDK server +{MS}",
    rf"added beyond the SDK +{MS}",
    r"agent in its own process:",
    r"agent in this loop:",
    r"target < 5 ms \(p50, agent in its own process\): (meets|MISSES) the target",
    rf"^ +1 +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} ms$",
    rf"^ +4 +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} ms$",
    r"target ≥ 0\.95 \(every row\): (meets|MISSES) the target",
    rf"alone +{NUMBER} calls/s",
    rf"beside \^\(a\|aa\)\+\$ on 81 characters +{NUMBER} calls/s +{NUMBER} +\d+ hostile calls",
    rf"beside 6,500 distinct objects, uniqueItems +{NUMBER} calls/s",
    r"target ≥ 0\.95 of the rate alone: (meets|MISSES) the target",
    r"descriptors: \d+ before, \d+ at the end of the run \(\d+ sessions open\), \d+ once",
    rf"memory: resident {NUMBER} MiB before, {NUMBER} MiB after",
]


def test_the_quick_mode_prints_every_figure(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    for pattern in EXPECTED:
        assert re.search(pattern, done.stdout, re.MULTILINE), (pattern, done.stdout)
