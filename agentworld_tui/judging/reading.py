"""The project's own reading of a judge's answer: lenient about the mess judges write
(reasoning before the verdict, code fences, trailing commas, keys in any case, scores
written as text) but never guessing: an answer without all five scores within 1-5 is
unreadable, and an unreadable judgement is left out of every average rather than counted
as zero. (``official`` reads the same answer by the official evaluator's rules, which is
what bench scores count.)"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from agentworld_tui.world.json_input import outside_strings
from agentworld_tui.world.judgement import DIMENSIONS, HIGHEST, LOWEST, Judgement, JudgementError

MAX_JUDGE_ANSWER_CHARS = 400_000
"""Only the end of a longer answer is read (the verdict comes last)."""
_UNTAGGED_CHARS = 20_000
"""Without tags, the verdict is looked for in this much of the answer's end."""
_BLOCK_CHARS = 50_000
"""A verdict block longer than this is read only up to here."""
_MAX_STARTS = 256
"""Opening braces tried per candidate, so hostile text cannot make parsing slow."""

_BLOCK = re.compile(r"<final_evaluation\s*>(.*?)(?:</final_evaluation\s*>|\Z)", re.S | re.I)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[^\n]*\n(.*?)(?:\n\s*\1\s*)?$", re.S)
_SPACES = re.compile(r"\s*")
_NUMBER = r"(?P<value>-?\d+(?:\.\d+)?)"


# -- reading the judge's answer -------------------------------------------------------------
def parse_judgement(text: str) -> Judgement:
    """The verdict in a judge's answer; raises JudgementError when there is none to read.

    The last ``<final_evaluation>`` block that holds a verdict wins; without tags, the last
    JSON object in the answer that holds the scores.
    """
    text = text[-MAX_JUDGE_ANSWER_CHARS:]
    blocks = [m.group(1) for m in _BLOCK.finditer(text)]
    candidates = [b[:_BLOCK_CHARS] for b in blocks[::-1]] if blocks else [text[-_UNTAGGED_CHARS:]]
    problems: list[str] = []
    for candidate in candidates:
        try:
            return _read_candidate(candidate)
        except JudgementError as exc:
            problems.append(str(exc))
    if not blocks and not problems:
        problems.append("no verdict found")
    where = "the <final_evaluation> block" if blocks else "the answer (no <final_evaluation> tags)"
    raise JudgementError(f"{where}: {problems[0]}")


def _read_candidate(block: str) -> Judgement:
    body = block.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(2)
    body = body.replace("\u201c", '"').replace("\u201d", '"')
    objects = _json_objects(body)
    problem = "no JSON object with the scores"
    for data, mended in reversed(objects):
        try:
            judgement = _judgement_from(data)
        except JudgementError as exc:
            problem = str(exc)
            continue
        if mended:
            return Judgement(
                judgement.scores, judgement.strengths, judgement.weaknesses, "JSON mended"
            )
        return judgement
    scores = _scores_by_pattern(body)
    if scores is not None:
        return Judgement(scores, note="scores read from malformed JSON; reasons unreadable")
    raise JudgementError(problem)


def _json_objects(text: str) -> list[tuple[dict[str, Any], bool]]:
    """Every top-level ``{...}`` in ``text`` that reads as JSON (mended if need be)."""
    found: list[tuple[dict[str, Any], bool]] = []
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_STARTS:
        tries += 1
        end = _matching_brace(text, start)
        if end == -1:
            break
        chunk = text[start : end + 1]
        data, mended = _loads(chunk)
        if isinstance(data, dict):
            found.append((data, mended))
            start = text.find("{", end + 1)
        else:
            start = text.find("{", start + 1)
    return found


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for i in outside_strings(text, start):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _loads(chunk: str) -> tuple[Any, bool]:
    try:
        return json.loads(chunk), False
    except (ValueError, RecursionError):  # not JSON, too deep, or a number too long
        pass
    mended = _without_trailing_commas(chunk)
    try:
        return json.loads(mended, strict=False), True
    except (ValueError, RecursionError):
        return None, False


def _without_trailing_commas(text: str) -> str:
    """``text`` without commas right before a closing bracket, outside strings only."""
    dropped: list[int] = []
    for i in outside_strings(text):
        if text[i] == ",":
            after = _SPACES.match(text, i + 1)
            if after is not None and text[after.end() : after.end() + 1] in ("}", "]"):
                dropped.append(i)
    kept = [text[a + 1 : b] for a, b in zip([-1, *dropped], [*dropped, len(text)], strict=True)]
    return "".join(kept)


def _judgement_from(data: dict[str, Any]) -> Judgement:
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    holder = lowered.get("scores", lowered.get("score", lowered))
    if not isinstance(holder, dict):
        raise JudgementError("scores is not an object")
    holder = {str(k).strip().lower().replace(" ", "_"): v for k, v in holder.items()}
    scores: dict[str, float] = {}
    for dimension in DIMENSIONS:
        key = next((k for k in holder if k == dimension), None) or next(
            (k for k in holder if k.startswith(dimension)), None
        )
        if key is None:
            raise JudgementError(f"no {dimension} score")
        scores[dimension] = _score(dimension, holder[key])
    return Judgement(
        scores,
        _reasons(lowered.get("strengths")),
        _reasons(lowered.get("weaknesses")),
    )


def _score(dimension: str, value: Any) -> float:
    if isinstance(value, dict):
        value = next((value[k] for k in value if str(k).lower() in ("score", "value")), None)
    if isinstance(value, str):
        match = re.fullmatch(rf"\s*{_NUMBER}\s*(?:/\s*5)?\s*", value)
        value = float(match.group("value")) if match else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JudgementError(f"the {dimension} score is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise JudgementError(f"the {dimension} score is not a number")
    if not LOWEST <= value <= HIGHEST:  # compared exactly: an integer of any size is fine
        shown = f"{value:g}" if isinstance(value, float) or abs(value) < 10**9 else "far"
        raise JudgementError(f"the {dimension} score {shown} is outside 1-5")
    return float(value)


def _reasons(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return (str(value),)


def _scores_by_pattern(text: str) -> dict[str, float] | None:
    """The five scores written as ``"name": n`` in text that is not valid JSON."""
    scores: dict[str, float] = {}
    for dimension in DIMENSIONS:
        found = re.findall(rf"[\"']?{dimension}\w*[\"']?\s*[:=]\s*[\"']?{_NUMBER}", text, re.I)
        if not found:
            return None
        value = float(found[-1])
        if not LOWEST <= value <= HIGHEST:
            return None
        scores[dimension] = value
    return scores
