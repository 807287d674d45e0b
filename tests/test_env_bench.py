"""bench/env.py's quick mode runs and prints each of its figures (issue 30's measurements).

The figures are not judged here (machines are noisy; BENCHMARKS.md records them): a
benchmark that stops running, or stops printing a number where one belongs, is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # `python -m pytest -m bench`

BENCH = Path(__file__).resolve().parents[1] / "bench" / "env.py"
NUMBER = r"-?\d+(?:\.\d+)?"


def test_the_environment_benchmark_prints_its_figures() -> None:
    here = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}  # this checkout's package
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=here,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for pattern in (
        rf"1\. step overhead, scripted qwen2 \(local\)  median {NUMBER} ms",
        rf"step overhead, server answering at once  median {NUMBER} ms",
        rf"2\. 16 environments, server of 16 slots x 0\.2 s: {NUMBER} steps/s of 80\.0  "
        rf"fraction {NUMBER}",
        rf"requests in flight at most 16; memory per environment {NUMBER} KiB",
        rf"3\. forks of a mamba episode .*evaluated ÷ new median {NUMBER}  max {NUMBER}",
        rf"3\. forks of a jamba episode .*evaluated ÷ new median {NUMBER}  max {NUMBER}",
    ):
        assert re.search(pattern, out), f"missing {pattern!r} in:\n{out}"
    assert "Traceback" not in done.stderr


def test_the_http_client_comparison_prints_its_figures() -> None:
    """bench/http_clients.py (issue 40's choice of one HTTP client): every candidate streams
    the answers and gets a figure, the control too."""
    script = BENCH.parent / "http_clients.py"
    here = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=here,
    )
    assert done.returncode == 0, done.stderr
    for kind in ("http.client", "httpx", "sdk", "aiohttp", "control"):
        pattern = rf"  {re.escape(kind)} +median {NUMBER}  \[{NUMBER}\]"
        assert re.search(pattern, done.stdout), f"missing {pattern!r} in:\n{done.stdout}"
    assert "Traceback" not in done.stderr


def test_the_hostile_environment_benchmark_prints_its_figures() -> None:
    """bench/env_hostile.py (issue 38): env serve's sessions beside each hostile kind, and
    the server's descriptors and memory around abandoned sessions."""
    script = BENCH.parent / "env_hostile.py"
    here = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=here,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    rate = rf"{NUMBER} steps/s \({NUMBER} of the limit\)   {NUMBER}   0 failed"
    for pattern in (
        rf"mcp, alone +{rate}",
        rf"mcp, \^\(a\|aa\)\+\$ on 81 characters .* +{rate}   \d+ hostile steps, \d+ refused",
        rf"mcp, the most distinct objects .* +{rate}   \d+ hostile steps, 0 refused",
        rf"terminal, 49,999 one-key entries .* +{rate}   \d+ hostile steps, 0 refused",
        r"1 rounds of 60 sessions .* then 10 left open .* --session-idle-timeout 1 closed",
        rf"before: descriptors \d+, resident {NUMBER} MiB",
        rf"round 1: 60 stepped and dropped: descriptors \d+, resident {NUMBER} MiB",
        rf"10 stepped and left open: descriptors \d+, resident {NUMBER} MiB; {NUMBER} s "
        rf"later: descriptors \d+, resident {NUMBER} MiB",
    ):
        assert re.search(pattern, out), f"missing {pattern!r} in:\n{out}"
    assert "Traceback" not in done.stderr
