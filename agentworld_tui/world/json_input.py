"""JSON that came from outside the program, parsed within bounds.

Python's parser turns a 5,000-digit number into a ValueError of its own (or a number that
later code cannot print) and deep nesting into a RecursionError, here or in whatever walks
the result afterwards (saving, copying, drawing). A file a user was sent must give a clear
message instead, so numbers are limited in length and nesting in depth while parsing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted; a session file itself uses about ten
levels, the rest is room for an action's arguments."""
MAX_NUMBER_CHARS = 100
"""Longest number accepted, in characters: far beyond any count, time or score."""


class JsonInputError(ValueError):
    """JSON that cannot be accepted; the message is one line that says why and where."""


def parse_json(
    text: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    max_number_chars: int = MAX_NUMBER_CHARS,
) -> Any:
    """Parse ``text``; raises JsonInputError for invalid JSON, a too long number or too
    deep nesting (bytes must be UTF-8)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonInputError("not UTF-8 text") from None

    def whole(digits: str) -> int:
        if len(digits) > max_number_chars:
            raise JsonInputError(_too_long(len(digits), max_number_chars))
        return int(digits)

    def real(digits: str) -> float:
        if len(digits) > max_number_chars:
            raise JsonInputError(_too_long(len(digits), max_number_chars))
        return float(digits)

    try:
        data = json.loads(text, parse_int=whole, parse_float=real)
    except json.JSONDecodeError as exc:
        raise JsonInputError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise JsonInputError(f"nested more than {max_depth} levels deep") from None
    check_bounds(data, max_depth=max_depth, max_number_chars=max_number_chars)
    return data


def check_bounds(
    data: Any, *, max_depth: int = MAX_DEPTH, max_number_chars: int = MAX_NUMBER_CHARS
) -> None:
    """Raise JsonInputError unless ``data`` is within the bounds ``parse_json`` accepts, so a
    program can refuse to write what it could not read back. Walks without recursion, so
    any depth can be measured."""
    too_big = 10 ** (max_number_chars - 1)  # with its sign, within max_number_chars
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            if isinstance(value, int) and not -too_big < value < too_big:
                raise JsonInputError(_too_long(len(str(value)), max_number_chars))
            continue
        depth += 1
        if depth > max_depth:
            raise JsonInputError(f"nested more than {max_depth} levels deep")
        stack.extend((child, depth) for child in children)


def _too_long(chars: int, limit: int) -> str:
    return f"a number of {chars:,} characters (at most {limit})"


def outside_strings(text: str, start: int = 0) -> Iterator[int]:
    """The offsets, from ``start``, of the characters of ``text`` that are not inside a JSON
    string (nor its quotes): where brackets, commas and literals of JSON-like text are
    looked for without parsing it."""
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i
