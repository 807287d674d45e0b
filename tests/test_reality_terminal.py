"""The terminal's twin: a real tmux inside a real sandbox, driven by the terminal domain's
own actions; a command that never returns, megabytes of output, a shell that exits and a
twin killed mid-action all end as values; checks pass and fail; nothing is left after."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from realitykit import any_backend, living_in

from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.reality import TwinRunner, TwinStatus
from agentworld_tui.reality.sandbox import SandboxOptions
from agentworld_tui.reality.terminal_twin import HEIGHT, WIDTH, TerminalTwin
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Scenario

DOMAIN = TerminalDomain()
SCENARIO = Scenario("twin", "Twin")


def keys(text: str) -> Action:
    return DOMAIN.parse_action(text, SCENARIO)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    return folder


@pytest.fixture
def twin(seed: Path) -> TerminalTwin:
    made = TerminalTwin(SandboxOptions(seed=seed, workdir="/app", backend=any_backend()))  # type: ignore[arg-type]
    try:
        first = made.start()
        assert first.status is TwinStatus.OK, first.error
        yield made
    finally:
        made.close()


def test_the_first_screen_is_the_shell_s_prompt_in_the_working_folder(twin: TerminalTwin) -> None:
    assert twin.sandbox is not None
    shown = twin._capture()
    assert isinstance(shown, str)
    assert shown.splitlines()[-1].rstrip().endswith(":/app#")


def test_a_command_runs_for_real_and_the_screen_shows_it(twin: TerminalTwin, seed: Path) -> None:
    seen = twin.act(
        keys('[{"keystrokes": "cat notes.txt; echo made > made.txt;\\n", "duration": 2}]')
    )
    assert seen.status is TwinStatus.OK, seen.error
    lines = seen.text.splitlines()
    assert lines[-4].endswith("# cat notes.txt; echo made > made.txt;")
    assert lines[-3:-1] == ["alpha", "beta"]
    assert lines[-1].endswith(":/app#")
    assert twin.sandbox is not None
    assert (twin.sandbox.scratch / "work" / "made.txt").read_text() == "made\n"
    assert not (seed / "made.txt").exists()
    assert seen.elapsed >= 2.0  # the entry's duration was waited


def test_control_keys_are_sent_as_keys(twin: TerminalTwin) -> None:
    started = twin.act(keys('[{"keystrokes": "sleep 1000\\n", "duration": 0.3}]'))
    assert started.text.splitlines()[-1].endswith("sleep 1000")
    stopped = twin.act(keys('[{"keystrokes": "C-c", "duration": 1.5}]'))
    lines = stopped.text.splitlines()
    assert lines[-2] == "^C"
    assert lines[-1].endswith(":/app#")


def test_a_command_that_never_returns_is_bounded_by_the_durations(twin: TerminalTwin) -> None:
    began = time.monotonic()
    seen = twin.act(
        keys('[{"keystrokes": "cat\\n", "duration": 0.5}, {"keystrokes": "", "duration": 0.5}]')
    )
    assert seen.status is TwinStatus.OK
    assert time.monotonic() - began < 1.0 + 10
    assert seen.text.splitlines()[-1].endswith("# cat")
    assert twin.act(keys("C-d")).text.splitlines()[-1].endswith(":/app#")


def test_megabytes_of_output_leave_one_screen(twin: TerminalTwin) -> None:
    seen = twin.act(keys('[{"keystrokes": "seq 1 300000\\n", "duration": 6}]'))
    lines = seen.text.splitlines()
    assert len(lines) <= HEIGHT
    assert all(len(line) <= WIDTH for line in lines)
    assert lines[-2] == "300000"


def test_a_task_check_passes_or_fails_by_its_exit_status(twin: TerminalTwin) -> None:
    twin.act(keys('[{"keystrokes": "echo done > result.txt\\n", "duration": 2}]'))
    passed = twin.check("grep -q done result.txt")
    failed = twin.check("echo looked; test -f missing.txt")
    assert (passed.passed, passed.exit_code) == (True, 0)
    assert (failed.passed, failed.exit_code, failed.output) == (False, 1, "looked\n")
    slow = twin.check("sleep 60", timeout=0.5)
    assert (slow.passed, slow.status) == (False, TwinStatus.TIMEOUT)


def test_a_check_sees_what_the_agent_s_shell_left_running(twin: TerminalTwin) -> None:
    twin.act(keys('[{"keystrokes": "sleep 500 &\\n", "duration": 2}]'))
    assert twin.check("pgrep -x sleep").passed


def test_a_shell_that_exits_is_a_crashed_twin_and_every_later_action_says_so(
    twin: TerminalTwin,
) -> None:
    ended = twin.act(keys("exit"))
    assert ended.status is TwinStatus.CRASHED
    assert "terminal ended" in ended.error
    later = twin.act(keys("ls"))
    assert (later.status, later.error) == (TwinStatus.CRASHED, ended.error)


def test_a_twin_that_cannot_start_says_why_and_never_raises(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentworld_tui.reality.sandbox import clear_probes

    monkeypatch.setenv("PATH", str(tmp_path))
    clear_probes()
    try:
        twin = TerminalTwin(SandboxOptions())
        first = twin.start()
        assert first.status is TwinStatus.CRASHED
        assert first.error.startswith("the twin did not start: no sandbox works here")
        assert twin.act(keys("ls")).status is TwinStatus.CRASHED
        assert twin.check("true").passed is False
        twin.close()
    finally:
        monkeypatch.undo()
        clear_probes()


def test_killing_the_twin_mid_action_ends_the_action_and_every_process(seed: Path) -> None:
    twin = TerminalTwin(SandboxOptions(seed=seed, backend=any_backend()))  # type: ignore[arg-type]
    runner = TwinRunner(twin)
    assert runner.start().status is TwinStatus.OK
    assert twin.sandbox is not None
    namespace = twin.sandbox.namespace()
    runner.act(keys("sleep 1000 &"))
    pending = runner.submit_act(keys('[{"keystrokes": "", "duration": 300}]'))
    time.sleep(0.5)
    began = time.monotonic()
    threading.Thread(target=twin.kill).start()
    seen = pending.result(30)
    assert time.monotonic() - began < 15
    assert seen.status is TwinStatus.CRASHED
    runner.close()
    assert not twin.sandbox.scratch.exists()
    assert living_in(namespace) == []


def test_keystrokes_ending_in_a_semicolon_keep_it(twin: TerminalTwin) -> None:
    seen = twin.act(keys('[{"keystrokes": "echo a;", "duration": 0.2}]'))
    assert seen.text.splitlines()[-1].endswith("# echo a;")


HOLDER = """
import sys, time
from agentworld_tui.reality.sandbox import SandboxOptions
from agentworld_tui.reality.terminal_twin import TerminalTwin
from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.world.domain import Scenario
twin = TerminalTwin(SandboxOptions(backend=sys.argv[1]))
assert twin.start().ok
twin.act(TerminalDomain().parse_action("sleep 1000 &", Scenario("t", "t")))
print(twin.sandbox.scratch, twin.sandbox.namespace(), flush=True)
twin.act(TerminalDomain().parse_action('[{"keystrokes": "", "duration": 300}]', Scenario("t", "t")))
"""


def test_kill_9_mid_action_leaves_no_process_and_the_next_start_sweeps_the_folder(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from agentworld_tui.reality.sandbox import Sandbox

    backend = any_backend()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, backend],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert holder.stdout is not None
    scratch, namespace = holder.stdout.readline().split()
    assert living_in(namespace)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    deadline = time.monotonic() + 10
    while living_in(namespace) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert living_in(namespace) == []
    assert Path(scratch).exists()  # nobody was left to remove it
    Sandbox.open(SandboxOptions(backend=backend)).close()  # type: ignore[arg-type]
    assert not Path(scratch).exists()  # the next sandbox swept it
