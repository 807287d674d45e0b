"""What the shadow-mode tests share: a terminal twin in a real sandbox beside a world model
on a real engine, and a look at the sandbox's processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from realitykit import any_backend, living_in

from agentworld_tui.domains import get_domain
from agentworld_tui.reality.sandbox import Sandbox
from agentworld_tui.reality.spec import Deliver, TwinSpec
from agentworld_tui.simulator.shadow import Shadow
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, new_session

TERMINAL = get_domain("terminal")
PREDICTED = "PREDICTED\nroot@box:/app# "
ANSWER = f"Reading the screen.</think><predicted_observation>{PREDICTED}</predicted_observation>"


def keys(command: str, duration: float = 0.4) -> Action:
    """A command line typed into the terminal, then ``duration`` seconds waited."""
    entry = {"keystrokes": command + "\n", "duration": duration}
    return TERMINAL.parse_action(json.dumps([entry]), Scenario("t", "t"))


def terminal_shadow(seed: Path, deliver: Deliver = "real", check: str = "") -> Shadow:
    """A started terminal twin in a sandbox seeded from ``seed``; close its runner."""
    spec = TwinSpec("terminal", seed=str(seed), backend=any_backend())  # type: ignore[arg-type]
    runner, first = spec.start()
    return Shadow(runner, deliver, spec, check=check, first=first)


def twinned_session(shadow: Shadow) -> Session:
    """A terminal session whose first state is the twin's first screen."""
    state = shadow.first.text if shadow.first is not None else ""
    session, _ = new_session(TERMINAL, Scenario("twin", "Twin", state=state))
    return session


def sandbox_of(shadow: Shadow) -> Sandbox:
    box = getattr(shadow.runner.twin, "sandbox", None)
    assert isinstance(box, Sandbox)
    return box


def sandbox_processes(shadow: Shadow) -> list[int]:
    namespace = sandbox_of(shadow).namespace()
    assert namespace
    return [int(pid) for pid in living_in(namespace)]


def signal_sandbox(shadow: Shadow, signum: signal.Signals, timeout: float = 60) -> None:
    """Send ``signum`` to every process of the twin's sandbox (SIGSTOP: it hangs;
    SIGKILL: it is gone, and this returns once the sandbox is seen ended: until its
    processes are reaped it still looks alive, longer on a loaded machine)."""
    box = sandbox_of(shadow)
    for pid in sandbox_processes(shadow):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
    if signum == signal.SIGKILL:
        deadline = time.monotonic() + timeout
        while box.alive():
            if time.monotonic() > deadline:
                raise AssertionError("the sandbox still runs after SIGKILL")
            time.sleep(0.02)
