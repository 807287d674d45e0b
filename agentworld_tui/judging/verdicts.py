"""A judge's answer read both ways, behind one boundary that cannot raise.

A judge's answer is untrusted text, and the readers in ``official`` and ``reading`` do
arithmetic on whatever numbers it holds. Whatever goes wrong while reading (a rule said
as ``JudgementError``, or anything a hostile answer makes Python raise: an integer too
large for a float, a number too long to parse, nesting too deep) means the same thing, as
it does for the official evaluator: the verdict is unreadable, and the judge is asked
again. Every place that reads a verdict (asking a judge, scoring a run's stored answers)
goes through ``read_verdict`` or ``guarded``, so no answer can stop a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agentworld_tui.judging.official import read_official_verdict
from agentworld_tui.judging.reading import parse_judgement
from agentworld_tui.world.judgement import Judgement, JudgementError, OfficialVerdict

T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """What a judge's answer says: the official reading (what a bench score counts) and
    the project's stricter one, each with why it is missing."""

    official: OfficialVerdict | None
    official_error: str = ""
    strict: Judgement | None = None
    strict_error: str = ""


def guarded(read: Callable[[], T]) -> tuple[T | None, str]:
    """``read()``'s result, or None and one line saying why it could not be read."""
    try:
        return read(), ""
    except JudgementError as exc:
        return None, " ".join(str(exc).split()) or "unreadable"
    except Exception as exc:
        return None, f"the verdict cannot be read ({type(exc).__name__})"


def read_verdict(answer: str) -> Reading:
    """Both readings of ``answer``; never raises."""
    official, official_error = guarded(lambda: read_official_verdict(answer))
    strict, strict_error = guarded(lambda: parse_judgement(answer))
    return Reading(official, official_error, strict, strict_error)
