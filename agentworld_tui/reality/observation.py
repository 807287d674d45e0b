"""What a twin answers: the real side of a turn, and the verdict of a task's check."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class TwinStatus(StrEnum):
    """How an action went in reality.

    ``ok``: reality answered and ``text`` is its answer (a tool that reported an error, a
    command that exited non-zero: still an answer). ``error``: the twin could not carry the
    action out (an action it has no real counterpart for, a server that answered outside the
    protocol). ``timeout``: the action ran past its bound; ``text`` is what was seen by then.
    ``crashed``: the twin is gone (it never started, its sandbox or server died); every later
    action is ``crashed`` too.
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


@dataclass(frozen=True)
class RealObservation:
    """One action's answer from reality, as raw as reality gave it (never sanitized here:
    a front-end sanitizes where it shows it, as it does for model output)."""

    text: str
    status: TwinStatus = TwinStatus.OK
    error: str = ""
    """One line saying what went wrong; empty when ``status`` is ok."""
    elapsed: float = 0.0
    """Seconds the twin took for the action, waits included."""
    tool_error: bool = False
    """Reality answered with an error of its own (an MCP error result, a JSON-RPC error)."""
    exit_code: int | None = None
    """A shell command's exit status, where the action ran one to its end."""

    @property
    def ok(self) -> bool:
        return self.status is TwinStatus.OK

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "status": self.status.value,
            "elapsed": round(self.elapsed, 6),
        }
        if self.error:
            data["error"] = self.error
        if self.tool_error:
            data["tool_error"] = True
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RealObservation:
        status = str(data.get("status", "ok"))
        code = data.get("exit_code")
        return cls(
            text=str(data.get("text", "")),
            status=TwinStatus(status)
            if status in TwinStatus._value2member_map_
            else TwinStatus.ERROR,
            error=str(data.get("error", "")),
            elapsed=float(data.get("elapsed", 0.0)),
            tool_error=bool(data.get("tool_error", False)),
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        )


def failed(
    status: TwinStatus, error: str, *, text: str = "", elapsed: float = 0.0
) -> RealObservation:
    return RealObservation(text=text, status=status, error=error, elapsed=elapsed)


@dataclass(frozen=True)
class CheckResult:
    """A task's check run in the twin after an episode: exit status 0 is success."""

    passed: bool
    exit_code: int | None
    output: str
    """The command's output, its last part where it was long."""
    status: TwinStatus = TwinStatus.OK
    error: str = ""
    elapsed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "output": self.output,
            "status": self.status.value,
            "elapsed": round(self.elapsed, 6),
        }
        if self.error:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        status = str(data.get("status", "ok"))
        code = data.get("exit_code")
        return cls(
            passed=bool(data.get("passed", False)),
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            output=str(data.get("output", "")),
            status=TwinStatus(status)
            if status in TwinStatus._value2member_map_
            else TwinStatus.ERROR,
            error=str(data.get("error", "")),
            elapsed=float(data.get("elapsed", 0.0)),
        )
