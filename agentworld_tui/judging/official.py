"""Reading a judge's verdict by the official AgentWorldBench evaluator's rules.

A bench score is comparable with the published tables only if every judge answer is read
as the official evaluator reads it, so this module follows its rules, quirks included
(docs/judging.md lists them):

- think blocks are removed first (``remove_thinking``), case-insensitively;
- the verdict is the last ``<final_evaluation>`` block (to its closing tag, or to the end),
  else the whole answer;
- in it, the last fenced JSON object that mentions "scores", else the last ``{...}`` that
  does, else the last ``{...}``, else the object ending at the last ``}``;
- trailing commas, single-quoted and unquoted keys are mended; an object that still does
  not parse gives up everything but its ``"scores": {...}``;
- each score is taken as a whole number (floats rounded, "4/5" read as 4), values above 5
  become 5, and a missing or unreadable one is absent (0): the total is the mean of the
  others. An answer without a ``scores`` object is unreadable, and so is one with a
  (negative) score too large for a float to hold, which no mean could take in.

The answer read here is the judge's whole text as generated, never what the world model's
observation splitter would make of it: a judge that quotes ``<predicted_observation>``
while it reasons is still read.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from agentworld_tui.world.judgement import DIMENSIONS, JudgementError, OfficialVerdict

ANSWER_TAG = "predicted_observation"
VERDICT_TAG = "final_evaluation"
SCAN_BUDGET = 20_000_000
"""Characters the brace matching may visit for one answer; an answer that needs more (a
hostile run of unclosed braces) is unreadable rather than a hang."""

_OPEN_THINK = re.compile(r"<think>", re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think>", re.IGNORECASE)
_CLOSE_LEN = len("</think>")
_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_SINGLE_QUOTED_KEY = re.compile(r"'(\w+)'(\s*:)")
_BARE_KEY = re.compile(r"([{,])\s*(\w+)\s*:")
_SCORES_ONLY = re.compile(r'"scores"\s*:\s*\{[^}]+\}')


# -- think blocks ---------------------------------------------------------------------------
def remove_thinking(text: str, answer_tag: str = "") -> str:
    """``text`` without its reasoning, as the official evaluator removes it.

    A ``<think>`` is paired with the first free ``</think>`` after it (so nested blocks go
    whole); a ``</think>`` left without a partner removes everything before it (so the
    reasoning ends at the last such one); a ``<think>`` left open removes everything up to
    the next ``<answer_tag>``, or to the end. Text without think tags comes back as it is;
    otherwise the result is stripped.
    """
    tags = sorted(
        [(m.start(), True) for m in _OPEN_THINK.finditer(text)]
        + [(m.start(), False) for m in _CLOSE_THINK.finditer(text)]
    )
    if not tags:
        return text
    cuts: list[tuple[int, int]] = []
    waiting: list[int] = []  # open tags not yet paired, oldest first
    first_waiting = 0
    for position, is_open in tags:
        if is_open:
            waiting.append(position)
        elif first_waiting < len(waiting):
            cuts.append((waiting[first_waiting], position + _CLOSE_LEN))
            first_waiting += 1
        else:
            cuts.append((0, position + _CLOSE_LEN))
    answer = re.compile(rf"<{re.escape(answer_tag)}>", re.IGNORECASE) if answer_tag else None
    for position in waiting[first_waiting:]:
        found = answer.search(text, position) if answer is not None else None
        cuts.append((position, found.start() if found else len(text)))
    kept: list[str] = []
    reached = 0
    for start, end in sorted(cuts):
        if start > reached:
            kept.append(text[reached:start])
        reached = max(reached, end)
    kept.append(text[reached:])
    return "".join(kept).strip()


def last_tagged(text: str, tag: str) -> str | None:
    """The stripped content of the last ``<tag>`` block (to its closing tag or the end);
    None when the tag never opens."""
    opens = list(re.finditer(rf"<{re.escape(tag)}>", text, re.IGNORECASE))
    if not opens:
        return None
    start = opens[-1].end()
    close = re.compile(rf"</{re.escape(tag)}>", re.IGNORECASE).search(text, start)
    return text[start : close.start() if close else len(text)].strip()


# -- the verdict ----------------------------------------------------------------------------
def read_official_verdict(answer: str) -> OfficialVerdict:
    """The verdict in a judge's whole answer; raises JudgementError (one line) when the
    official evaluator would find none."""
    if not answer or not answer.strip():
        raise JudgementError("the judge's answer is empty")
    cleaned = remove_thinking(answer.strip(), VERDICT_TAG)
    target = last_tagged(cleaned, VERDICT_TAG) or cleaned
    budget = _Budget()
    found = _fenced_object(target) or _best_object(target, budget) or _last_object(target)
    if found is None:
        raise JudgementError("no JSON object in the answer")
    text = _BARE_KEY.sub(
        r'\1"\2":', _SINGLE_QUOTED_KEY.sub(r'"\1"\2', _TRAILING_COMMA.sub(r"\1", found))
    )
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        only = _SCORES_ONLY.search(text)
        if only is None:
            raise JudgementError(f"the verdict is not JSON ({exc.msg})") from None
        try:
            data = _loads('{"strengths":[],"weaknesses":[],' + only.group(0) + "}")
        except json.JSONDecodeError:
            raise JudgementError(f"the verdict is not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise JudgementError("the verdict has no scores object")
    try:
        scores = {d: _whole_score(data["scores"].get(d, 0)) for d in DIMENSIONS}
    except (ValueError, OverflowError) as exc:  # round() of NaN or infinity
        raise JudgementError(f"a score cannot be rounded ({exc})") from None
    return averageable(
        OfficialVerdict(
            scores, _texts(data.get("strengths", [])), _texts(data.get("weaknesses", []))
        )
    )


def averageable(verdict: OfficialVerdict) -> OfficialVerdict:
    """``verdict`` itself; raises JudgementError when a score is too large for a float (it
    would break every mean it entered)."""
    if any(abs(v) > sys.float_info.max for v in verdict.scores.values()):
        raise JudgementError("a score is too large to average")
    return verdict


def _loads(text: str) -> Any:
    """json.loads; JSON too deep or a number too long to read is unreadable."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError):
        raise JudgementError("the verdict's JSON is too deep or too long to read") from None


def _whole_score(value: Any) -> int:
    if isinstance(value, int):  # bool too: true reads as 1, false as absent
        score = int(value)
    elif isinstance(value, float):
        score = round(value)
    elif isinstance(value, str):
        try:
            score = int(value.split("/")[0].strip())
        except ValueError:
            score = 0
    else:
        score = 0
    return max(1, min(5, score)) if score > 0 else score


def _texts(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    if isinstance(value, str):
        return (value,) if value else ()
    return ()


# -- finding the object ---------------------------------------------------------------------
class _Budget:
    def __init__(self) -> None:
        self.left = SCAN_BUDGET

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise JudgementError("the answer has too many unclosed braces to read")


def _fenced_object(text: str) -> str | None:
    blocks = [m.group(1).strip() for m in _FENCED.finditer(text)]
    objects = [b for b in blocks if b.startswith("{") and b.endswith("}")]
    return _last_preferring_scores(objects)


def _last_preferring_scores(objects: list[str]) -> str | None:
    with_scores = [o for o in objects if '"scores"' in o]
    chosen = with_scores or objects
    return chosen[-1] if chosen else None


def _best_object(text: str, budget: _Budget) -> str | None:
    """Every ``{...}`` read forwards from each opening brace outside one already found;
    the last that mentions "scores", else the last."""
    objects: list[str] = []
    start = text.find("{")
    while start != -1:
        end = _forward_match(text, start, budget)
        if end == -1:
            start = text.find("{", start + 1)
            continue
        objects.append(text[start : end + 1])
        start = text.find("{", end + 1)
    return _last_preferring_scores(objects)


def _forward_match(text: str, start: int, budget: _Budget) -> int:
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if escaped:
            escaped = False
        elif ch == "\\" and in_string:
            escaped = True
        elif ch == '"':
            in_string = not in_string
        elif not in_string:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    budget.spend(i - start)
                    return i
    budget.spend(len(text) - start)
    return -1


def _last_object(text: str) -> str | None:
    """The object that ends at the last ``}``, matched backwards (a quote counts unless a
    backslash stands right before it)."""
    end = text.rfind("}")
    if end == -1:
        return None
    depth, in_string = 0, False
    for i in range(end, -1, -1):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            in_string = not in_string
        if in_string:
            continue
        if ch == "}":
            depth += 1
        elif ch == "{":
            depth -= 1
            if depth == 0:
                return text[i : end + 1]
    return None
