"""TwinRunner, the one way front-ends drive a twin: the same real twin from blocking code,
from asyncio and as futures beside the world model; a twin that hangs or breaks yields a
crashed observation within its bound and is stopped, and nothing ever raises."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from realitykit import any_backend

from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.reality import (
    CheckResult,
    RealObservation,
    TwinRunner,
    TwinStatus,
    has_twin,
    make_twin,
)
from agentworld_tui.reality.sandbox import SandboxOptions
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Scenario

KEYS = TerminalDomain().parse_action(
    '[{"keystrokes": "echo twin-$((6*7))\\n", "duration": 2}]', Scenario("t", "t")
)


class Stuck:
    """A twin whose act never returns until it is killed (what a bug in a twin looks like:
    the real twins bound their own calls)."""

    domain = "terminal"

    def __init__(self) -> None:
        self.killed = threading.Event()

    def start(self) -> RealObservation:
        return RealObservation("ready")

    def act(self, action: Action) -> RealObservation:
        self.killed.wait(60)
        return RealObservation("too late")

    def check(self, command: str, timeout: float = 1.0) -> CheckResult:
        raise RuntimeError("the check machinery broke")

    def time_limit(self, action: Action) -> float:
        return 0.2

    def kill(self) -> None:
        self.killed.set()

    def close(self) -> None:
        self.killed.set()


def test_a_hung_twin_gives_a_crashed_observation_in_time_and_is_stopped() -> None:
    twin = Stuck()
    runner = TwinRunner(twin, grace=0.3)
    assert runner.start().text == "ready"
    began = time.monotonic()
    seen = runner.act(KEYS)
    assert time.monotonic() - began < 5
    assert seen.status is TwinStatus.CRASHED
    assert "did not answer within 0.5 seconds" in seen.error
    assert twin.killed.is_set()
    again = runner.act(KEYS)
    assert (again.status, again.error) == (TwinStatus.CRASHED, seen.error)
    runner.close()


def test_a_twin_that_raises_gives_a_value_not_an_exception() -> None:
    runner = TwinRunner(Stuck())
    verdict = runner.check("true")
    assert (verdict.passed, verdict.status) == (False, TwinStatus.CRASHED)
    assert "the check machinery broke" in verdict.error
    runner.close()
    assert runner.act(KEYS).status is TwinStatus.CRASHED


@pytest.fixture
def terminal(tmp_path: Path) -> TwinRunner:
    twin = make_twin("terminal", sandbox=SandboxOptions(backend=any_backend()))  # type: ignore[arg-type]
    runner = TwinRunner(twin)
    yield runner
    runner.close()


def test_the_same_twin_from_blocking_code_and_as_a_future(terminal: TwinRunner) -> None:
    assert terminal.start().ok
    pending = terminal.submit_act(KEYS)
    assert "twin-42" in pending.result(30).text.splitlines()[-2]
    assert terminal.check("true").passed


async def test_the_same_twin_from_asyncio(terminal: TwinRunner) -> None:
    first = await terminal.start_async()
    assert first.ok
    beat = asyncio.create_task(asyncio.sleep(0.05))
    seen = await terminal.act_async(KEYS)
    assert beat.done()  # the loop kept running while the twin worked
    assert seen.text.splitlines()[-2] == "twin-42"
    verdict = await terminal.check_async("test -d /work")
    assert verdict.passed
    await terminal.close_async()


def test_which_domains_have_a_twin() -> None:
    assert [
        d for d in ("terminal", "swe", "mcp", "web", "android", "os", "search") if has_twin(d)
    ] == [
        "terminal",
        "swe",
        "mcp",
    ]
    with pytest.raises(ValueError, match="the web domain has no twin"):
        make_twin("web")
