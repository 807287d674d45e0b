"""Checking tool arguments against the JSON-Schema subset that tool definitions use.

Tool servers describe their inputs with a small part of JSON Schema: ``type``,
``properties``, ``required``, ``enum``/``const``, ``items``, ``additionalProperties``,
simple bounds (lengths, sizes, minimum/maximum), and sometimes ``anyOf``/``oneOf``.
Checking these before a call is sent lets the editor point at the bad field; keywords outside the subset are ignored rather than
guessed at, so a valid call is never refused.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@dataclass(frozen=True)
class SchemaProblem:
    """One way a value breaks its schema; ``path`` is dotted (``arguments.files.0.name``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path} {self.message}"


MAX_DEPTH = 100
"""How deeply an action's JSON may nest: real tool arguments stay far below it, and it keeps
every recursive walk (the parser, the schema check, the encoder) well inside Python's limit."""
MAX_NUMBER_CHARS = 1000
"""The longest number literal read: beyond a few thousand digits Python refuses to convert
an integer to or from text at all."""


_MAX_BITS = int(MAX_NUMBER_CHARS / math.log10(2))


class _BadNumber(Exception):
    def __init__(self, literal: str, message: str) -> None:
        super().__init__(message)
        self.literal = literal
        self.message = message


def _number_message(literal: str) -> str:
    digits = sum(c.isdigit() for c in literal)
    return f"a number of {digits:,} digits; numbers may have at most {MAX_NUMBER_CHARS:,}"


def _read_int(literal: str) -> int:
    if len(literal) > MAX_NUMBER_CHARS:
        raise _BadNumber(literal, _number_message(literal))
    return int(literal)


def _read_float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise _BadNumber(literal, _number_message(literal))
    value = float(literal)
    if not math.isfinite(value):
        raise _BadNumber(literal, f"{literal[:20]} is too large for a number")
    return value


def _read_constant(literal: str) -> Any:
    raise _BadNumber(literal, f"{literal} is not a JSON number")


def _outside_strings(text: str) -> Iterator[int]:
    """The offsets of the characters of ``text`` that are not inside a JSON string."""
    in_string = escaped = False
    for i, ch in enumerate(text):
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


def _too_deep_at(text: str, limit: int) -> int:
    depth = 0
    for i in _outside_strings(text):
        ch = text[i]
        if ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return 0


def _literal_at(text: str, literal: str) -> int:
    for i in _outside_strings(text):
        if text.startswith(literal, i):
            return i
    return 0


def looks_like_json(text: str) -> bool:
    """Whether an action is meant as JSON rather than as a command line. Shell lines may
    start with a bracket too: a test (``[ -f x ]``, ``[ "$a" = b ]``, ``[[ -n $x ]]``) or a
    group (``{ a; b; }``); JSON goes on with a value or a key, or ends (``[{``, ``["``,
    ``[1``, ``[]``, ``{"``, ``{}``, also after a line break when pretty-printed)."""
    head, after = text[:1], text[1:2]
    rest = text[1:].lstrip()
    if head == "{":
        return rest[:1] in ('"', "}")
    if head != "[" or not after or after == "[":
        return False
    if not after.isspace():
        return True
    if rest[:1] in ("{", "]"):
        return True
    if rest[:1] == '"':  # [ "a", "b" ] or the shell's [ "$x" = y ]: only JSON parses
        try:
            read_json(text)
        except json.JSONDecodeError:
            return False
        return True
    return False


def depth_of(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        pending.extend((child, depth) for child in children)
    return deepest


def read_json(text: str, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """``json.loads`` for text from users and models. What would make the parser or a later
    step fail (nesting deeper than ``max_depth``, a number too long to convert, NaN or
    Infinity, which JSON has no room for) is a JSONDecodeError like any other malformed JSON,
    with the place it was found."""
    limit = max_depth if max_depth is not None else sys.getrecursionlimit()
    try:
        value = json.loads(
            text,
            parse_int=_read_int,
            parse_float=_read_float,
            parse_constant=_read_constant,
        )
    except RecursionError:
        raise json.JSONDecodeError(
            f"nested too deeply (more than {limit} levels)", text, _too_deep_at(text, limit)
        ) from None
    except _BadNumber as exc:
        raise json.JSONDecodeError(exc.message, text, _literal_at(text, exc.literal)) from None
    if max_depth is not None and depth_of(value) > max_depth:
        raise json.JSONDecodeError(
            f"nested too deeply (more than {max_depth} levels)", text, _too_deep_at(text, max_depth)
        )
    return value


def value_problem(value: Any, max_depth: int = MAX_DEPTH) -> str:
    """Why an already parsed value cannot stand in an action ("" when it can): too deep, a
    number too large to write out, or not a finite number. For values that did not come
    through ``read_json`` (an agent's call handed over as Python objects)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            # bit_length, not str(): converting a huge integer to text is what fails
            if item.bit_length() > _MAX_BITS:
                return f"a number too large to write out (over {MAX_NUMBER_CHARS:,} digits)"
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{item} is not a JSON number"
            continue
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > max_depth:
            return f"nested too deeply (more than {max_depth} levels)"
        pending.extend((child, depth + 1) for child in children)
    return ""


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float)
    return True  # an unknown type name is not ours to enforce


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def schema_problems(value: Any, schema: Any, path: str = "arguments") -> list[SchemaProblem]:
    """Every problem found in ``value`` against ``schema`` (empty when it conforms)."""
    if not isinstance(schema, dict):
        return []
    problems: list[SchemaProblem] = []

    types = schema.get("type")
    if isinstance(types, str):
        types = [types]
    if isinstance(types, list) and types and not any(_is_type(value, t) for t in types):
        wanted = " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in types)
        return [SchemaProblem(path, f"must be {wanted}, not {_describe(value)}")]

    if "const" in schema and value != schema["const"]:
        problems.append(SchemaProblem(path, f"must be {_describe(schema['const'])}"))
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        choices = ", ".join(_describe(v) for v in enum)
        problems.append(SchemaProblem(path, f"must be one of {choices}; got {_describe(value)}"))

    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            results = [schema_problems(value, option, path) for option in options]
            if all(results):
                best = min(results, key=len)
                problems.extend(best)

    if isinstance(value, str):
        _bounds(problems, path, len(value), schema, "minLength", "maxLength", "characters")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            problems.append(SchemaProblem(path, f"must be at least {low:g}"))
        if isinstance(high, int | float) and value > high:
            problems.append(SchemaProblem(path, f"must be at most {high:g}"))
    elif isinstance(value, list):
        _bounds(problems, path, len(value), schema, "minItems", "maxItems", "items")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                problems.extend(schema_problems(item, items, f"{path}.{i}"))
    elif isinstance(value, dict):
        problems.extend(_object_problems(value, schema, path))
    return problems


def _bounds(
    problems: list[SchemaProblem],
    path: str,
    size: int,
    schema: dict[str, Any],
    low_key: str,
    high_key: str,
    unit: str,
) -> None:
    low, high = schema.get(low_key), schema.get(high_key)
    if isinstance(low, int) and size < low:
        problems.append(SchemaProblem(path, f"needs at least {low} {_plural(unit, low)}"))
    if isinstance(high, int) and size > high:
        problems.append(SchemaProblem(path, f"allows at most {high} {_plural(unit, high)}"))


def _plural(unit: str, count: int) -> str:
    if count != 1:
        return unit
    return unit.removesuffix("ies") + "y" if unit.endswith("ies") else unit.removesuffix("s")


def _object_problems(
    value: dict[str, Any], schema: dict[str, Any], path: str
) -> list[SchemaProblem]:
    problems: list[SchemaProblem] = []
    _bounds(problems, path, len(value), schema, "minProperties", "maxProperties", "entries")
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in value:
                problems.append(SchemaProblem(f"{path}.{name}", "is required"))
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            problems.extend(schema_problems(item, properties[name], f"{path}.{name}"))
        elif extra is False:
            known = ", ".join(properties) or "none"
            problems.append(
                SchemaProblem(f"{path}.{name}", f"is not a known field (known: {known})")
            )
        elif isinstance(extra, dict):
            problems.extend(schema_problems(item, extra, f"{path}.{name}"))
    return problems
