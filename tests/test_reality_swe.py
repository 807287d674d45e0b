"""The SWE domain's twin: a copy of a repository in a real sandbox, the domain's shell and
editor calls carried out for real; state persists in the shell, a command past its limit is
stopped and a fresh shell takes over, and no edit reaches outside the sandbox."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from realitykit import any_backend

from agentworld_tui.domains.swe import SweDomain
from agentworld_tui.reality import RealObservation, TwinStatus
from agentworld_tui.reality.sandbox import SandboxOptions
from agentworld_tui.reality.swe_twin import SweTwin
from agentworld_tui.world.domain import Scenario

DOMAIN = SweDomain()
SCENARIO = Scenario("twin", "Twin")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "test_calc.sh").write_text(
        "python3 -B -c 'import pkg.calc as c; assert c.add(2, 2) == 4'\n"
    )
    return folder


@pytest.fixture
def twin(repo: Path) -> SweTwin:
    made = SweTwin(SandboxOptions(seed=repo, workdir="/testbed", backend=any_backend()))  # type: ignore[arg-type]
    try:
        first = made.start()
        assert first.status is TwinStatus.OK, first.error
        yield made
    finally:
        made.close()


def call(twin: SweTwin, name: str, **arguments: Any) -> RealObservation:
    return twin.act(DOMAIN.make_action({"name": name, "arguments": arguments}, SCENARIO))


def test_the_shell_keeps_its_folder_variables_and_exit_status(twin: SweTwin) -> None:
    first = call(twin, "execute_bash", command="cd pkg && export WHO=twin && ls")
    assert (first.text, first.exit_code) == ("calc.py\n", 0)
    second = call(twin, "bash", command="pwd; echo $WHO; false")
    assert (second.text, second.exit_code) == ("/testbed/pkg\ntwin\n", 1)


def test_a_command_the_shell_cannot_read_is_an_answer_not_a_hang(twin: SweTwin) -> None:
    seen = call(twin, "execute_bash", command="echo 'unbalanced")
    assert seen.status is TwinStatus.OK
    assert seen.exit_code == 2
    assert "unexpected EOF" in seen.text
    assert call(twin, "execute_bash", command="echo fine").text == "fine\n"


def test_a_command_past_its_limit_is_stopped_and_a_fresh_shell_takes_over(twin: SweTwin) -> None:
    call(twin, "execute_bash", command="export KEPT=1; cd pkg")
    began = time.monotonic()
    seen = call(twin, "execute_bash", command="echo started; sleep 300", timeout=1)
    assert time.monotonic() - began < 15
    assert seen.status is TwinStatus.TIMEOUT
    assert seen.text.startswith("started")
    assert "fresh shell" in seen.error
    after = call(
        twin, "execute_bash", command="pwd; echo ${KEPT:-gone}; pgrep -f '^sleep 300' || echo none"
    )
    assert after.text == "/testbed\ngone\nnone\n"


def test_output_of_megabytes_keeps_its_start_and_end(repo: Path) -> None:
    twin = SweTwin(
        SandboxOptions(seed=repo, workdir="/testbed", backend=any_backend()), max_output=4000
    )  # type: ignore[arg-type]
    assert twin.start().ok
    try:
        seen = call(
            twin, "execute_bash", command="echo FIRST; yes | head -c 5000000; echo; echo LAST"
        )
        assert seen.exit_code == 0
        assert seen.text.startswith("FIRST\n")
        assert seen.text.rstrip().endswith("LAST")
        assert len(seen.text) < 4200
    finally:
        twin.close()


def test_the_editor_views_edits_inserts_and_undoes_for_real(twin: SweTwin) -> None:
    viewed = call(twin, "str_replace_editor", command="view", path="/testbed/pkg/calc.py")
    assert viewed.text == "     1\tdef add(a, b):\n     2\t    return a - b"
    edited = call(
        twin, "str_replace_editor", command="str_replace", path="/testbed/pkg/calc.py",
        old_str="a - b", new_str="a + b",
    )  # fmt: skip
    assert edited.text == (
        "Edited /testbed/pkg/calc.py. Lines 1 to 2 now read:\n"
        "     1\tdef add(a, b):\n     2\t    return a + b"
    )
    assert twin.check("sh test_calc.sh").passed
    call(
        twin,
        "str_replace_editor",
        command="insert",
        path="/testbed/pkg/calc.py",
        insert_line=0,
        new_str="# calc",
    )
    assert call(twin, "execute_bash", command="head -1 pkg/calc.py").text == "# calc\n"
    call(twin, "str_replace_editor", command="undo_edit", path="/testbed/pkg/calc.py")
    call(twin, "str_replace_editor", command="undo_edit", path="/testbed/pkg/calc.py")
    assert (
        call(twin, "execute_bash", command="cat pkg/calc.py").text
        == "def add(a, b):\n    return a - b\n"
    )
    assert not twin.check("sh test_calc.sh").passed
    ranged = call(
        twin, "str_replace_editor", command="view", path="/testbed/pkg/calc.py", view_range=[2, -1]
    )
    assert ranged.text == "     2\t    return a - b"
    listing = call(twin, "str_replace_editor", command="view", path="/testbed")
    assert listing.text.splitlines()[0].startswith("Files and folders in /testbed")
    assert {"/testbed/pkg", "/testbed/pkg/calc.py", "/testbed/test_calc.sh"} <= set(
        listing.text.splitlines()
    )


def test_editor_refusals_are_the_tool_s_own_errors(twin: SweTwin) -> None:
    cases = [
        dict(command="str_replace", path="/testbed/pkg/calc.py", old_str="nowhere", new_str="x"),
        dict(command="str_replace", path="/testbed/pkg/calc.py", old_str="a", new_str="x"),
        dict(command="create", path="/testbed/pkg/calc.py", file_text="x"),
        dict(command="view", path="/testbed/missing.py"),
        dict(command="undo_edit", path="/testbed/pkg/calc.py"),
        dict(command="insert", path="/testbed/pkg/calc.py", insert_line=9, new_str="x"),
    ]
    for arguments in cases:
        seen = call(twin, "str_replace_editor", **arguments)
        assert (seen.status, seen.tool_error) == (TwinStatus.OK, True), (arguments, seen)
    assert "appears 3 times" in call(twin, "str_replace_editor", **cases[1]).text


def test_no_edit_reaches_outside_the_sandbox(twin: SweTwin, repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    call(twin, "execute_bash", command=f"ln -s {outside} /testbed/link.txt")
    for arguments in (
        dict(command="create", path="/etc/agentworld-twin-test", file_text="x"),
        dict(command="create", path="/usr/agentworld-twin-test", file_text="x"),
        dict(command="str_replace", path="/testbed/link.txt", old_str="untouched", new_str="x"),
        dict(command="create", path="/testbed/../../etc/agentworld-twin-test", file_text="x"),
    ):
        seen = call(twin, "str_replace_editor", **arguments)
        assert seen.tool_error, (arguments, seen.text)
    assert twin.sandbox is not None
    # the host's path, written inside, is the sandbox's own /tmp: the scratch folder
    call(twin, "str_replace_editor", command="create", path=str(outside), file_text="x")
    assert outside.read_text() == "untouched\n"
    assert (twin.sandbox.scratch / outside.relative_to("/")).read_text() == "x"
    assert not Path("/etc/agentworld-twin-test").exists()
    assert not Path("/usr/agentworld-twin-test").exists()
    made = call(
        twin,
        "str_replace_editor",
        command="create",
        path="/testbed/new/file.txt",
        file_text="inside\n",
    )
    assert made.text == "Created /testbed/new/file.txt."
    assert (twin.sandbox.scratch / "work" / "new" / "file.txt").read_text() == "inside\n"
    assert not (repo / "new").exists()


def test_a_tool_without_a_real_counterpart_is_an_error_not_a_guess(twin: SweTwin) -> None:
    scenario = Scenario(
        "own", "Own", extras={"tools": [{"name": "search_code", "inputSchema": {"type": "object"}}]}
    )
    seen = twin.act(DOMAIN.make_action({"name": "search_code", "arguments": {}}, scenario))
    assert seen.status is TwinStatus.ERROR
    assert "no real tool 'search_code'" in seen.error
    waiting = call(twin, "execute_bash", command="cat", is_input=True)
    assert waiting.status is TwinStatus.ERROR


def test_an_exiting_shell_is_replaced_and_restart_gives_a_fresh_one(twin: SweTwin) -> None:
    call(twin, "execute_bash", command="cd pkg")
    ended = call(twin, "execute_bash", command="exit 3")
    assert ended.status is TwinStatus.ERROR
    assert call(twin, "execute_bash", command="pwd").text == "/testbed\n"
    call(twin, "execute_bash", command="cd pkg")
    assert call(twin, "execute_bash", restart=True).text == "The shell was restarted."
    assert call(twin, "execute_bash", command="pwd").text == "/testbed\n"
