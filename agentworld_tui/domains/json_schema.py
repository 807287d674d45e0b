"""JSON from users and models, and tool arguments checked against their JSON Schema.

Arguments are checked by one validator, the ``jsonschema`` library, everywhere (the app's
editor, ``predict``, the MCP server, the environments), and its findings are told in the
app's words: the field, and what is wrong with it (``arguments.title must be a string,
not 5``).

A check is bounded in time, because the arguments may come from a hostile agent: every
keyword looks at the clock, regular expressions run in the ``regex`` engine with a
timeout and without holding the GIL (Python's ``re`` backtracks for ever on ``^(a+)+$``
and holds the GIL while it does), and ``uniqueItems`` hashes the items instead of
comparing every pair. A check that runs out of time raises CheckTimeout.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import regex  # type: ignore[import-untyped]
from jsonschema import SchemaError, ValidationError  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
from jsonschema.validators import (  # type: ignore[import-untyped]
    Draft202012Validator,
    extend,
    validator_for,
)

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


# -- checking arguments against a schema ----------------------------------------------------
CHECK_SECONDS = 2.0
"""How long one check of one call's arguments may take, unless the caller says otherwise."""
MAX_PROBLEMS = 100
"""Problems counted for "(and N more)"; past this a check stops looking."""
_MESSAGE_CHARS = 300

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


class CheckTimeout(Exception):
    """A check of arguments ran past its time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the arguments could not be checked within {seconds:g} s")
        self.seconds = seconds


@dataclass(frozen=True)
class SchemaProblem:
    """One way a value breaks its schema; ``path`` is dotted (``arguments.files.0.name``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path} {self.message}"


_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "agentworld_check_deadline", default=None
)


@contextlib.contextmanager
def checking_within(seconds: float) -> Iterator[None]:
    """Every check of arguments made inside ends by ``seconds`` from now (CheckTimeout)."""
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _remaining() -> float:
    deadline = _DEADLINE.get()
    if deadline is None:
        return CHECK_SECONDS
    left = deadline[0] - time.monotonic()
    if left <= 0:
        raise CheckTimeout(deadline[1])
    return left


def _timed_out() -> CheckTimeout:
    deadline = _DEADLINE.get()
    return CheckTimeout(deadline[1] if deadline is not None else CHECK_SECONDS)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    """``re.search`` semantics, bounded by the check's time and letting the GIL go."""
    try:
        compiled = _compiled(pattern)
    except (regex.error, TypeError, ValueError, OverflowError):
        return True  # a pattern no engine can read is not the caller's fault
    try:
        return compiled.search(text, timeout=_remaining(), concurrent=True) is not None
    except TimeoutError:
        raise _timed_out() from None


Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterable[ValidationError] | None]


def _pattern(validator: Any, pattern: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if isinstance(pattern, str) and isinstance(instance, str) and not _search(pattern, instance):
        yield ValidationError(f"does not match the pattern {pattern}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not isinstance(instance, dict) or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extra_keys(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties")
    known = properties if isinstance(properties, dict) else {}
    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, dict) else {}
    return [
        key for key in instance if key not in known and not any(_search(p, key) for p in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    extras = _extra_keys(instance, schema)
    if isinstance(allowed, dict):
        for key in extras:
            yield from validator.descend(instance[key], allowed, path=key)
    elif allowed is False:
        properties = schema.get("properties")
        known = ", ".join(properties) if isinstance(properties, dict) and properties else "none"
        for key in extras:
            yield ValidationError(f"is not a known field (known: {known})", path=[key])


def _required(
    validator: Any, required: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if isinstance(instance, dict) and isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in instance:
                yield ValidationError("is required", path=[name])


def _same_key(value: Any) -> Any:
    """A hashable stand-in equal for values JSON Schema calls equal (1 and 1.0, objects in
    any key order) and different otherwise (true and 1)."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_same_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _same_key(v)) for k, v in value.items()))
    return ("other", id(value))


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if unique is not True or not isinstance(instance, list):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        if index % 256 == 0:
            _remaining()
        key = _same_key(item)
        if key in seen:
            yield ValidationError(f"repeats an item (item {index} is an earlier one again)")
            return
        seen.add(key)


def _skipped(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> None:
    return None


def _timed(keyword: Keyword) -> Keyword:
    """The keyword, looking at the clock before it starts (each keyword of each value)."""

    def check(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        _remaining()
        found = keyword(validator, value, instance, schema)
        if found is not None:
            yield from found

    return check


_OWN: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "required": _required,
    "uniqueItems": _unique_items,
}


@functools.lru_cache(maxsize=16)
def _bounded_class(base: Any, unevaluated: bool) -> Any:
    """``base`` (a draft's validator class) with the keywords above, every keyword timed.
    ``unevaluated=False`` leaves ``unevaluatedProperties`` unchecked: beside
    ``patternProperties`` the library would run those patterns in ``re``."""
    keywords = {name: _OWN.get(name, fn) for name, fn in base.VALIDATORS.items()}
    if not unevaluated and "unevaluatedProperties" in keywords:
        keywords["unevaluatedProperties"] = _skipped
    return extend(base, {name: _timed(fn) for name, fn in keywords.items()})


def _mentions(schema: Any, key: str) -> bool:
    pending = [schema]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if key in item:
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def schema_validator(schema: dict[str, Any]) -> Any:
    """A bounded validator for ``schema`` (None when the library cannot build one: such a
    schema is then not checked, rather than every call refused)."""
    try:
        base = validator_for(schema, default=Draft202012Validator)
        unevaluated = not (
            _mentions(schema, "patternProperties") and _mentions(schema, "unevaluatedProperties")
        )
        return _bounded_class(base, unevaluated)(schema)
    except (SchemaError, RecursionError, TypeError, ValueError, LookupError):
        return None


def schema_problems(
    value: Any, schema: Any, path: str = "arguments", *, validator: Any = None
) -> list[SchemaProblem]:
    """Every problem found in ``value`` against ``schema`` (empty when it conforms), up to
    MAX_PROBLEMS; raises CheckTimeout past the check's time (see ``checking_within``)."""
    if not isinstance(schema, dict):
        return []
    checker = validator if validator is not None else schema_validator(schema)
    if checker is None:
        return []
    errors: list[Any] = []
    bounded = (
        checking_within(CHECK_SECONDS) if _DEADLINE.get() is None else contextlib.nullcontext()
    )
    try:
        with bounded:
            for error in checker.iter_errors(value):
                errors.append(error)
                if len(errors) >= MAX_PROBLEMS:
                    break
    except (CheckTimeout, RecursionError):
        raise
    except Exception:  # an unresolvable $ref and the like: not the caller's fault
        return []
    return [_problem(error, path) for error in errors]


def _where(path: str, error: Any) -> str:
    return ".".join([path, *(str(p) for p in error.absolute_path)])


def _problem(error: Any, path: str) -> SchemaProblem:
    """The app's words for one of the library's errors."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        merged = _merged_types(error)
        if merged is not None:
            return SchemaProblem(_where(path, error), merged)
        if error.validator == "anyOf" or not _valid_under_several(error):
            return _problem(_nearest_form(error.context), path)
    return SchemaProblem(_where(path, error), _reason(error))


def _merged_types(error: Any) -> str | None:
    """'must be an array or a string, not 5' where each form is one type at this place."""
    wanted: list[str] = []
    for sub in error.context:
        if sub.validator != "type" or list(sub.relative_path):
            return None
        kinds = (
            sub.validator_value if isinstance(sub.validator_value, list) else [sub.validator_value]
        )
        wanted += [str(k) for k in kinds if str(k) not in wanted]
    if not wanted:
        return None
    names = " or ".join(_TYPE_NAMES.get(k, k) for k in wanted)
    return f"must be {names}, not {_describe(error.instance)}"


def _nearest_form(context: list[Any]) -> Any:
    """The first error of the form the value came closest to (the fewest errors; the
    first form listed on a tie, the one a call is usually started from)."""
    forms: dict[Any, list[Any]] = {}
    for sub in context:
        key = sub.relative_schema_path[0] if sub.relative_schema_path else None
        forms.setdefault(key, []).append(sub)
    if not forms:
        return best_match(context)
    nearest = min(forms.values(), key=len)
    return best_match(nearest) if len(nearest) > 1 and _deeper(nearest) else nearest[0]


def _deeper(errors: list[Any]) -> bool:
    return any(sub.context for sub in errors)


def _valid_under_several(error: Any) -> bool:
    return "is valid under each of" in error.message


def _reason(error: Any) -> str:
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        names = " or ".join(_TYPE_NAMES.get(str(k), str(k)) for k in kinds)
        return f"must be {names}, not {_describe(value)}"
    if kind == "enum" and isinstance(expected, list):
        choices = ", ".join(_describe(v) for v in expected[:20])
        more = f" (and {len(expected) - 20} more)" if len(expected) > 20 else ""
        return f"must be one of {choices}{more}; got {_describe(value)}"
    if kind == "const":
        return f"must be {_describe(expected)}"
    bounds = {
        "minLength": ("needs at least", "character"),
        "maxLength": ("allows at most", "character"),
        "minItems": ("needs at least", "item"),
        "maxItems": ("allows at most", "item"),
        "minProperties": ("needs at least", "entry"),
        "maxProperties": ("allows at most", "entry"),
    }
    if kind in bounds and isinstance(expected, int):
        words, unit = bounds[kind]
        return f"{words} {expected} {_plural(unit, expected)}"
    numbers = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "more than",
        "exclusiveMaximum": "less than",
        "multipleOf": "a multiple of",
    }
    if kind in numbers and isinstance(expected, int | float) and not isinstance(expected, bool):
        return f"must be {numbers[kind]} {expected:g}"
    if kind == "oneOf":
        return "matches more than one of the forms it may take; it must match exactly one"
    if kind == "not":
        return "is a value this field must not have"
    return _bounded_text(error.message)


def _bounded_text(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MESSAGE_CHARS else line[: _MESSAGE_CHARS - 1] + "…"


def _describe(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _plural(unit: str, count: int) -> str:
    if count == 1:
        return unit
    return unit[:-1] + "ies" if unit.endswith("y") else unit + "s"
