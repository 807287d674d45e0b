"""How far a predicted observation is from the real one: a cheap structural measure,
computed on every step.

Both sides are first masked: parts that differ between any two real runs (timestamps,
dates, times, UUIDs and hex ids, durations, sizes, temporary names; per domain, a terminal
prompt's host, process ids) become placeholders, so only what a world model could have
known counts. Then:

- **JSON** (both sides parse to an object or a list): the leaves are flattened to paths
  (``a.b[].c``); ``keys`` is the Dice overlap of the two multisets of paths, ``values``
  that of (path, value) pairs, with a value under a volatile key (``id``, ``created_at``,
  ``duration``...) masked; similarity = (keys + values) / 2.
- **text**: each line's whitespace is collapsed and blank lines dropped; ``lines`` is the
  Dice overlap of the multisets of lines, ``tokens`` that of the multisets of words and
  punctuation marks; similarity = (lines + tokens) / 2.

Dice overlap of multisets A and B: 2·|A ∩ B| / (|A| + |B|), 1 when both are empty. The
score is 1 - similarity, in [0, 1]; a step has *diverged* when the score is above
``THRESHOLD``. The cost is linear in the text's size (counters, and one regular-expression
pass over only the lines or values the two sides do not share; bench/divergence.py measures
it); the price is that order is not weighed: two screens with the same lines shuffled count
as the same.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

THRESHOLD = 0.05
"""A step diverged when more than a twentieth of its (masked) content differs: one wrong
line of a ten-line screen is over it, one of a forty-line screen is not."""

_COMMON = (
    ("UUID", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    (
        "TIME",
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|[ ]?UTC)?",
    ),
    ("DATE", r"\d{4}-\d{2}-\d{2}\b|\d{1,2}/\d{1,2}/\d{2,4}\b"),
    (
        "DATE",
        r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?[ \t]+)?"
        r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?[ \t]+\d{1,2}"
        r"(?:,?[ \t]+\d{4})?(?:[ \t]+\d{1,2}:\d{2}(?::\d{2})?)?(?:[ \t]+\d{4})?\b",
    ),
    ("TIME", r"\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"),
    ("HEX", r"0x[0-9a-fA-F]+\b|(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{7,64}\b"),
    ("TIME", r"1[5-9]\d{8}(?:\d{3}|\.\d+)?\b"),
    (
        "DURATION",
        r"\d+(?:\.\d+)?[ ]?(?:ns|µs|us|ms|s|secs?|seconds?|min|mins|minutes?|h|hrs?|hours?)\b",
    ),
    ("SIZE", r"\d+(?:\.\d+)?[ ]?(?:[KMGTP]i?B|[kKMGTP]|B|bytes?)\b"),
    ("TMP", r"tmp[A-Za-z0-9_]{6,}\b"),
)
"""Masks tried at the start of a word (epoch seconds count as a time)."""
_COMMON_ANYWHERE = (("TMP", r"/tmp/[^\s/:'\"]+"),)
_PROCESSES = (("PID", r"(?i:pid)[ =:#]*\d+"),)
_PROCESS_LINES = (("PID", r"^\[\d+\][ \t]+\d+|^[ \t]*\d+[ \t]+(?=(?:pts/\d+|tty\d*|\?)[ \t])"),)
_PROMPT = (("HOST", r"[a-z_][\w-]*@[\w.-]+(?=:)"),)

DOMAIN_RULES: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "terminal": (_PROMPT + _PROCESSES + _COMMON, _COMMON_ANYWHERE + _PROCESS_LINES),
    "swe": (_PROCESSES + _COMMON, _COMMON_ANYWHERE + _PROCESS_LINES),
    "mcp": (_COMMON, _COMMON_ANYWHERE),
}
"""Each domain's masks: those tried at the start of a word, then those tried anywhere; at
each place the first that matches wins. A domain not named here gets the common ones.
No mask reaches past the end of a line."""

VOLATILE_KEY = re.compile(
    r"(?i)^(?:.*[_-])?(?:id|uuid|guid|etag|nonce|token|pid|time|timestamp|date|"
    r"created|updated|modified|started|finished|at|duration|elapsed|took|latency|size|bytes)$"
    r"|(?:Id|At|Time|Date)$"
)
"""A JSON key whose value is volatile whatever it looks like (``id``, ``created_at``,
``requestId``...)."""

_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(domain: str) -> re.Pattern[str]:
    found = _compiled.get(domain)
    if found is None:
        words, anywhere = DOMAIN_RULES.get(domain, (_COMMON, _COMMON_ANYWHERE))
        number = itertools.count()

        def group(rules: tuple[tuple[str, str], ...]) -> str:
            return "|".join(f"(?P<{name}_{next(number)}>{rule})" for name, rule in rules)

        found = re.compile(
            rf"(?=[\w/\[ \t])(?:\b(?:{group(words)})|{group(anywhere)})", re.MULTILINE
        )
        _compiled[domain] = found
    return found


def mask(text: str, domain: str = "") -> str:
    """``text`` with its volatile parts replaced by ``<KIND>`` placeholders."""
    return _pattern(domain).sub(_placeholder, text)


def _placeholder(match: re.Match[str]) -> str:
    return f"<{str(match.lastgroup).rpartition('_')[0]}>"


@dataclass(frozen=True)
class Divergence:
    score: float
    """1 - similarity: 0 when both sides are the same once masked, 1 when nothing matches."""
    diverged: bool
    """score > THRESHOLD."""
    kind: Literal["json", "text"]
    parts: tuple[float, float]
    """The two similarities that were averaged: (keys, values) or (lines, tokens)."""

    @property
    def similarity(self) -> float:
        return 1.0 - self.score

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 6),
            "diverged": self.diverged,
            "kind": self.kind,
            "parts": [round(p, 6) for p in self.parts],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Divergence:
        parts = data.get("parts") or [0.0, 0.0]
        kind: Literal["json", "text"] = "json" if data.get("kind") == "json" else "text"
        return cls(
            float(data.get("score", 1.0)),
            bool(data.get("diverged", True)),
            kind,
            (float(parts[0]), float(parts[1])),
        )


def divergence(
    predicted: str, real: str, domain: str = "", threshold: float = THRESHOLD
) -> Divergence:
    """The divergence of a predicted observation from the real one."""
    left, right = _json(predicted), _json(real)
    if left is not None and right is not None:
        a, b = _masked(_leaves(left), _leaves(right), lambda v: _mask_values(v, domain))
        keys = dice(_paths(a), _paths(b))
        return _verdict("json", keys, dice(a, b), threshold)
    a, b = _masked(
        Counter(_lines(predicted)), Counter(_lines(real)), lambda v: _mask_lines(v, domain)
    )
    lines = dice(a, b)
    words = dice(_words(a), _words(b))
    return _verdict("text", lines, words, threshold)


def dice(a: Iterable[Hashable] | Counter[Any], b: Iterable[Hashable] | Counter[Any]) -> float:
    """2·|A ∩ B| / (|A| + |B|) over multisets; 1 when both are empty."""
    left = a if isinstance(a, Counter) else Counter(a)
    right = b if isinstance(b, Counter) else Counter(b)
    total = left.total() + right.total()
    if total == 0:
        return 1.0
    return 2 * (left & right).total() / total


def _masked(
    a: Counter[Any], b: Counter[Any], masking: Callable[[list[Any]], list[Any]]
) -> tuple[Counter[Any], Counter[Any]]:
    """Both multisets masked. What the two sides share already is the same once masked,
    so only the rest goes through the masks: a prediction close to reality costs little
    more than counting its lines."""
    shared = a & b
    out = []
    for side in (a - shared, b - shared):
        keys = list(side)
        masked = Counter(shared)
        for key, value in zip(keys, masking(keys), strict=True):
            masked[value] += side[key]
        out.append(masked)
    return out[0], out[1]


def _mask_lines(lines: list[str], domain: str) -> list[str]:
    if not lines:
        return []
    return mask("\n".join(lines), domain).split("\n")


def _mask_values(leaves: list[tuple[str, str]], domain: str) -> list[tuple[str, str]]:
    texts = _mask_lines([value.replace("\n", " ") for _, value in leaves], domain)
    return [
        (path, value if value == "<VOLATILE>" else text)
        for (path, value), text in zip(leaves, texts, strict=True)
    ]


def _verdict(
    kind: Literal["json", "text"], first: float, second: float, threshold: float
) -> Divergence:
    score = min(1.0, max(0.0, 1.0 - (first + second) / 2))
    return Divergence(score, score > threshold, kind, (first, second))


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _words(lines: Counter[str]) -> Counter[str]:
    words: Counter[str] = Counter()
    for line, count in lines.items():
        for word in line.split(" "):
            words[word] += count
    return words


def _paths(leaves: Counter[tuple[str, str]]) -> Counter[str]:
    paths: Counter[str] = Counter()
    for (path, _), count in leaves.items():
        paths[path] += count
    return paths


def _json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def _leaves(value: Any) -> Counter[tuple[str, str]]:
    """(path, value) for every leaf, values as JSON text (strings as they are); a value
    under a volatile key is ``<VOLATILE>``."""
    found: Counter[tuple[str, str]] = Counter()
    stack: list[tuple[str, str, Any]] = [("$", "", value)]
    while stack:
        path, key, item = stack.pop()
        if isinstance(item, dict) and item:
            stack.extend((f"{path}.{k}", str(k), v) for k, v in item.items())
        elif isinstance(item, list) and item:
            stack.extend((f"{path}[]", key, v) for v in item)
        elif key and VOLATILE_KEY.search(key):
            found[(path, "<VOLATILE>")] += 1
        else:
            found[(path, item if isinstance(item, str) else json.dumps(item))] += 1
    return found
