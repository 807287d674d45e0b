"""The terminal's twin: a real tmux session inside a sandbox.

The terminal domain's actions are tmux's own, so they are played as they are: literal
keystrokes typed with ``send-keys -l``, a key name (``C-c``, ``Escape``...) sent as that key,
then the entry's duration waited. The observation is the visible screen (``capture-pane``)
at a fixed size. The tmux server runs inside the sandbox (so its shells are sandboxed) on a
socket in the sandbox's run folder, and every tmux command is run inside the sandbox too.
A command that never returns is simply on the screen: an action takes its durations, and a
tmux command that does not answer is stopped after ``TMUX_SECONDS``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from agentworld_tui.domains.terminal import MAX_DURATION, is_key
from agentworld_tui.reality.observation import (
    CheckResult,
    RealObservation,
    TwinStatus,
    failed,
)
from agentworld_tui.reality.sandbox import (
    KILL_GRACE,
    CommandResult,
    Sandbox,
    SandboxError,
    SandboxOptions,
)
from agentworld_tui.reality.twin import CHECK_SECONDS
from agentworld_tui.world.action import Action

WIDTH = 160
HEIGHT = 40
"""The screen's size: about the 40 lines the terminal domain's observations show."""
TMUX_SECONDS = 10.0
"""How long one tmux command may take before the twin says it timed out."""
READY_SECONDS = 15.0
"""How long the shell may take to draw its first prompt."""
MAX_WAIT = MAX_DURATION
"""The most seconds one action waits in all, whatever its durations add up to."""
CHECK_OUTPUT = 64_000
SESSION = "twin"


def screen_text(capture: str) -> str:
    """A captured screen without the blank lines below the last drawn one."""
    lines = capture.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


class TerminalTwin:
    """A shell in a sandbox, driven like the terminal domain's world model is."""

    domain = "terminal"

    def __init__(
        self,
        options: SandboxOptions,
        *,
        width: int = WIDTH,
        height: int = HEIGHT,
        shell: str = "/bin/bash",
        max_wait: float = MAX_WAIT,
    ) -> None:
        self.options = options
        self.width = width
        self.height = height
        self.shell = shell
        self.max_wait = max_wait
        self.sandbox: Sandbox | None = None
        self._dead = ""
        self._stop = threading.Event()

    @property
    def socket(self) -> str:
        assert self.sandbox is not None
        return f"{self.sandbox.run_dir}/tmux.sock"

    def start(self) -> RealObservation:
        began = time.monotonic()
        try:
            self.sandbox = Sandbox.open(self.options)
        except (SandboxError, OSError) as exc:
            self._dead = f"the twin did not start: {exc}"
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        made = self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", SESSION,
            "-x", str(self.width), "-y", str(self.height), "-c", self.sandbox.workdir, self.shell,
            ";", "set-option", "-g", "status", "off",
            ";", "set-option", "-g", "history-limit", "5000",
        )  # fmt: skip
        if made.exit_code != 0:
            self._dead = f"the twin did not start: tmux: {_first_line(made.output) or 'no answer'}"
            self.sandbox.close()
            return failed(TwinStatus.CRASHED, self._dead, elapsed=time.monotonic() - began)
        screen = ""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and not self._stop.is_set():
            shown = self._capture()
            if isinstance(shown, RealObservation):
                return replace(shown, elapsed=time.monotonic() - began)
            screen = shown
            if screen.strip():
                break
            self._stop.wait(0.05)
        return RealObservation(screen, elapsed=time.monotonic() - began)

    def time_limit(self, action: Action) -> float:
        entries = action.payload if isinstance(action.payload, list) else []
        waits = sum(float(e.get("duration", 0)) for e in entries if isinstance(e, dict))
        return min(waits, self.max_wait) + (TMUX_SECONDS + KILL_GRACE) * (2 * len(entries) + 1)

    def act(self, action: Action) -> RealObservation:
        began = time.monotonic()
        if self._dead or self.sandbox is None:
            return failed(TwinStatus.CRASHED, self._dead or "the twin was not started")
        entries = action.payload if isinstance(action.payload, list) else None
        if entries is None:
            return failed(TwinStatus.ERROR, "a terminal action is a list of keystroke entries")
        budget = self.max_wait
        for entry in entries:
            keys = str(entry.get("keystrokes", ""))
            if keys:
                sent = self._send(keys)
                if sent is not None:
                    return replace(sent, elapsed=time.monotonic() - began)
            wait = min(max(0.0, float(entry.get("duration", 0.0))), budget)
            budget -= wait
            if self._stop.wait(wait):
                return failed(
                    TwinStatus.CRASHED, "the twin was stopped", elapsed=time.monotonic() - began
                )
        shown = self._capture()
        if isinstance(shown, RealObservation):
            return replace(shown, elapsed=time.monotonic() - began)
        return RealObservation(shown, elapsed=time.monotonic() - began)

    def check(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        return run_check(self.sandbox, self._dead, command, timeout)

    def kill(self) -> None:
        self._stop.set()
        self._dead = self._dead or "the twin was stopped"
        if self.sandbox is not None:
            self.sandbox.close()

    def close(self) -> None:
        if self.sandbox is not None and not self._dead:
            self._tmux("kill-server", timeout=TMUX_SECONDS)
        self._dead = self._dead or "the twin was closed"
        if self.sandbox is not None:
            self.sandbox.close()

    # -- tmux ----------------------------------------------------------------------------

    def _tmux(self, *args: str, timeout: float = TMUX_SECONDS) -> CommandResult:
        assert self.sandbox is not None
        return self.sandbox.run(
            ["tmux", "-S", self.socket, *args], timeout=timeout, max_output=200_000
        )

    def _send(self, keys: str) -> RealObservation | None:
        """Type ``keys``; None when it went, else what went wrong."""
        done: CommandResult | None
        if is_key(keys):
            done = self._tmux("send-keys", "-t", SESSION, keys)
        else:
            # tmux takes an argument's final ";" for a command separator: that one goes as hex
            text, last = (keys[:-1], ";") if keys.endswith(";") else (keys, "")
            done = self._tmux("send-keys", "-t", SESSION, "-l", "--", text) if text else None
            if last and (done is None or done.exit_code == 0):
                done = self._tmux("send-keys", "-t", SESSION, "-H", "3b")
        return None if done is None or done.exit_code == 0 else self._trouble(done)

    def _capture(self) -> str | RealObservation:
        done = self._tmux("capture-pane", "-p", "-t", SESSION)
        if done.exit_code != 0:
            return self._trouble(done)
        return screen_text(done.output)

    def _trouble(self, done: CommandResult) -> RealObservation:
        if done.timed_out:
            return failed(
                TwinStatus.TIMEOUT, f"tmux did not answer within {TMUX_SECONDS:g} seconds"
            )
        if self.sandbox is None or not self.sandbox.alive():
            self._dead = "the twin's sandbox ended"
        else:
            self._dead = (
                f"the terminal ended (its shell exited or was killed): {_first_line(done.output)}"
            )
        return failed(TwinStatus.CRASHED, self._dead)


def run_check(sandbox: Sandbox | None, dead: str, command: str, timeout: float) -> CheckResult:
    """A task's check, run with bash in the sandbox's working folder."""
    if sandbox is None or (dead and not sandbox.alive()):
        return CheckResult(
            False, None, "", status=TwinStatus.CRASHED, error=dead or "the twin was not started"
        )
    done = sandbox.run(["bash", "-c", command], timeout=timeout, max_output=CHECK_OUTPUT)
    if done.timed_out:
        return CheckResult(
            False, None, done.output, status=TwinStatus.TIMEOUT,
            error=f"the check did not finish within {timeout:g} seconds", elapsed=done.elapsed,
        )  # fmt: skip
    return CheckResult(done.exit_code == 0, done.exit_code, done.output, elapsed=done.elapsed)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())[:300]
    return ""
