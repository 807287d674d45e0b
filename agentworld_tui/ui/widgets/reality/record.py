"""A twinned turn's record, read for display: what reality answered, how far the prediction
was from it, which side the agent received, and, for a routed call, where it was answered
and which real examples grounded it.

The record comes from the session file (checked when it was read, but keys a newer version
adds are not) or from the simulator; every field is read with its type checked, and every
text that came from reality, a server or a file is sanitized before it is drawn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Turn

STYLES = {"diverged": "bold red", "matched": "green", "failed": "yellow", "none": "dim"}
MAX_REASON = 160
"""Characters of a routing reason shown on a turn's line (the summary shows it whole)."""


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class Routed:
    """Where a routed call was answered (``reality.routing.Decision.to_dict``)."""

    answered: str
    """"real", "sim" or "both"."""
    reason: str
    rule: int | None
    fallback: str

    @classmethod
    def of(cls, data: object) -> Routed | None:
        found = _mapping(data)
        if found is None:
            return None
        answered = found.get("answered")
        return cls(
            answered=answered if answered in ("real", "sim", "both") else "sim",
            reason=str(found.get("reason") or ""),
            rule=_whole(found.get("rule")),
            fallback=str(found.get("fallback") or ""),
        )


@dataclass(frozen=True)
class Grounded:
    """The real examples a call was shown (``reality.grounding.Grounding.to_dict``)."""

    examples: tuple[int, ...]
    cut: tuple[int, ...]
    tokens: int
    budget: int
    problem: str

    @classmethod
    def of(cls, data: object) -> Grounded | None:
        found = _mapping(data)
        if found is None:
            return None

        def ids(key: str) -> tuple[int, ...]:
            value = found.get(key)
            if not isinstance(value, list):
                return ()
            return tuple(i for i in value if _whole(i) is not None)

        return cls(
            examples=ids("examples"),
            cut=ids("cut"),
            tokens=_whole(found.get("tokens")) or 0,
            budget=_whole(found.get("budget")) or 0,
            problem=str(found.get("problem") or ""),
        )

    def label(self) -> str:
        if self.problem:
            return f"grounding failed: {one_line(self.problem)[:MAX_REASON]}"
        if not self.examples:
            return "no real example found"
        shown = ", ".join(f"#{i}" + (" (cut)" if i in self.cut else "") for i in self.examples)
        many = "s" * (len(self.examples) != 1)
        return f"grounded on {len(self.examples)} real example{many}: {shown}"


@dataclass(frozen=True)
class RealityRecord:
    """One twinned turn as the app draws it."""

    number: int
    real_text: str | None
    """Reality's answer, raw (None: the twin gave none, or the call was not sent to it)."""
    status: str
    """"ok", "error", "timeout", "crashed", or "" when reality was not asked."""
    error: str
    elapsed: float | None
    exit_code: int | None
    tool_error: bool
    score: float | None
    diverged: bool | None
    delivered: str
    """"real" or "sim"."""
    note: str
    predicted: str
    route: Routed | None = None
    grounding: Grounded | None = None

    @classmethod
    def of(cls, turn: Turn) -> RealityRecord | None:
        """The record of ``turn``, or None for a turn no twin saw and no router decided."""
        reality = _mapping(turn.reality)
        if reality is None:
            return None
        real = _mapping(reality.get("real"))
        divergence = _mapping(reality.get("divergence"))
        status = str(real.get("status", "ok")) if real is not None else ""
        text = real.get("text") if real is not None else None
        diverged = divergence.get("diverged") if divergence is not None else None
        return cls(
            number=turn.number,
            real_text=text if isinstance(text, str) else None,
            status=status,
            error=str(real.get("error") or "") if real is not None else "",
            elapsed=_number(real.get("elapsed")) if real is not None else None,
            exit_code=_whole(real.get("exit_code")) if real is not None else None,
            tool_error=bool(real.get("tool_error")) if real is not None else False,
            score=_number(divergence.get("score")) if divergence is not None else None,
            diverged=diverged if isinstance(diverged, bool) else None,
            delivered="real" if reality.get("delivered") == "real" else "sim",
            note=str(reality.get("note") or reality.get("error") or ""),
            predicted=turn.observation,
            route=Routed.of(reality.get("route")),
            grounding=Grounded.of(reality.get("grounding")),
        )

    @property
    def answered(self) -> bool:
        """Whether reality gave an answer to compare."""
        return self.status == "ok" and self.real_text is not None

    @property
    def kind(self) -> str:
        """ "diverged", "matched", "failed" (reality did not answer) or "none"."""
        if self.diverged is True:
            return "diverged"
        if self.diverged is False:
            return "matched"
        if self.status and self.status != "ok":
            return "failed"
        return "none"

    def figures(self) -> str:
        """The divergence, or why there is none: "divergence 0.43 (diverged)"."""
        if self.score is not None:
            verdict = "diverged" if self.diverged else "matches"
            return f"divergence {self.score:.2f} ({verdict})"
        if self.status and self.status != "ok":
            why = f": {one_line(self.error)[:MAX_REASON]}" if self.error else ""
            return f"reality {self.status}{why}"
        if self.route is not None and self.route.answered == "real":
            return "answered by reality only"
        if self.route is not None and self.route.answered == "sim":
            return "not sent to reality"
        return "not compared"

    def short(self) -> str:
        """The divergence in a table's cell: "0.43 diverged", "timeout"."""
        if self.score is not None:
            return f"{self.score:.2f} {'diverged' if self.diverged else 'matches'}"
        if self.status and self.status != "ok":
            return f"reality {self.status}"
        return "—"

    def real_label(self) -> str:
        """What reality's side was: its status, exit code, time."""
        parts: list[str] = []
        if self.status and self.status != "ok":
            parts.append(self.status)
        if self.tool_error:
            parts.append("tool error")
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.elapsed is not None:
            parts.append(f"{self.elapsed:.2f} s")
        return " · ".join(parts)

    def line(self) -> Text:
        """The line under the turn in the transcript."""
        text = Text("⇄ ", style="bold")
        text.append(self.figures(), style=STYLES[self.kind])
        text.append(f" · delivered: {self.delivered}", style="bold")
        if self.route is not None:
            text.append(f" · answered: {self.route.answered}", style="cyan")
            if self.route.reason:
                text.append(f" ({one_line(self.route.reason)[:MAX_REASON]})", style="dim")
        if self.grounding is not None:
            text.append(f" · {self.grounding.label()}", style="cyan")
        if self.note:
            text.append(f" · {one_line(self.note)[:MAX_REASON]}", style="dim")
        return text
