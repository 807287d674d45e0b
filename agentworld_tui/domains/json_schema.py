"""Checking tool arguments against the JSON-Schema subset that tool definitions use.

Tool servers describe their inputs with a small part of JSON Schema: ``type``,
``properties``, ``required``, ``enum``/``const``, ``items``, ``additionalProperties``,
simple bounds, and sometimes ``anyOf``/``oneOf``. Checking these before a call is sent lets
the editor point at the bad field; keywords outside the subset are ignored rather than
guessed at, so a valid call is never refused.
"""

from __future__ import annotations

import json
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


def read_json(text: str) -> Any:
    """``json.loads`` for text from users and models: nesting too deep for the parser is
    reported as a JSONDecodeError like any other malformed JSON, never a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


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
    return unit.removesuffix("s") if count == 1 else unit


def _object_problems(
    value: dict[str, Any], schema: dict[str, Any], path: str
) -> list[SchemaProblem]:
    problems: list[SchemaProblem] = []
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
