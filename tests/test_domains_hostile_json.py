"""Actions whose JSON would break the parser or a later step: deep nesting, numbers too long
for Python to convert, NaN and Infinity. Every domain's parse path answers them with an
ActionError that says what is wrong, never a RecursionError or a ValueError."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentworld_tui.domains import get_domain
from agentworld_tui.domains.json_schema import MAX_DEPTH, read_json, value_problem
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios

HUGE = "1" * 5000
"""More digits than Python converts between text and int (4,300)."""
DEEP = "[" * 5000 + "]" * 5000
"""Deeper than the json module can recurse."""
DEEPISH = "[" * 500 + "]" * 500
"""Parses, but deeper than any recursive walk after the parser should be trusted with."""
BLANK = Scenario("blank", "Blank")

NUMBER = "numbers may have at most 1,000"
NESTING = "nested too deeply"


def scenario(domain: str, name: str) -> Scenario:
    return {s.name: s for s in load_scenarios(domain)[0]}[name]


@pytest.mark.parametrize(
    ("text", "reason", "column"),
    [
        (DEEP, "nested too deeply (more than 100 levels)", MAX_DEPTH + 1),
        (DEEPISH, "nested too deeply (more than 100 levels)", MAX_DEPTH + 1),
        ('{"x": ' + HUGE + "}", "a number of 5,000 digits; " + NUMBER, 7),
        ('{"s": "' + HUGE + '", "x": -' + HUGE + "}", "a number of 5,000 digits", 5016),
        ('{"x": 1' + "0" * 1200 + ".5}", "a number of 1,202 digits", 7),
        ("[1e999]", "1e999 is too large for a number", 2),
        ("[NaN]", "NaN is not a JSON number", 2),
        ('{"a": -Infinity}', "-Infinity is not a JSON number", 7),
        ('{"a": "[[[[[", "b": ' + "[" * 101 + "]" * 101 + "}", "more than 100 levels", 120),
    ],
    ids=[
        "deep",
        "deep but parsed",
        "huge integer",
        "huge integer after a string of digits",
        "long float",
        "float overflow",
        "NaN",
        "-Infinity",
        "brackets inside a string do not count",
    ],
)
def test_read_json_refuses_what_would_break_later(text: str, reason: str, column: int) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        read_json(text)
    assert reason in caught.value.msg
    assert (caught.value.lineno, caught.value.colno) == (1, column)


def test_read_json_reads_what_is_within_the_limits() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert read_json(at_limit) is not None
    assert read_json('{"n": ' + "9" * 1000 + ', "f": 1.5e300, "s": "' + HUGE + '"}')["s"] == HUGE
    # States (an Android JSON tree) may nest as deep as the parser goes.
    assert read_json(DEEPISH, max_depth=None) is not None
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        read_json(DEEP, max_depth=None)


def test_value_problem_checks_values_that_never_were_text() -> None:
    assert value_problem({"a": [1, 2.5, "x", None, True]}) == ""
    assert "too large" in value_problem({"a": 10**5000})
    assert "not a JSON number" in value_problem([float("inf")])
    deep: list[object] = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert value_problem(deep) == "nested too deeply (more than 100 levels)"


TOOL_CALLS = {
    "mcp": ("mcp", "open-server", "assign_laptop", "asset"),
    "search": ("search", "open-web", "web_extractor", "url"),
    "swe": ("swe", "python-slugify-bug", "execute_bash", "command"),
}


@pytest.mark.parametrize("domain", list(TOOL_CALLS))
@pytest.mark.parametrize(
    ("value", "reason"),
    [(HUGE, NUMBER), ("-" + HUGE, NUMBER), (DEEP, NESTING), (DEEPISH, NESTING), ("NaN", "NaN")],
    ids=["huge", "huge negative", "deep", "deep but parsed", "NaN"],
)
def test_tool_calls(domain: str, value: str, reason: str) -> None:
    _, world, tool, field = TOOL_CALLS[domain]
    where = scenario(domain, world)
    arguments = f'{{"{field}": {value}}}'
    plain = f'{{"name": "{tool}", "arguments": {arguments}}}'
    as_text = json.dumps({"name": tool, "arguments": arguments})
    for text in (plain, as_text):
        with pytest.raises(ActionError, match=reason):
            get_domain(domain).parse_action(text, where)


@pytest.mark.parametrize("domain", list(TOOL_CALLS))
def test_tool_calls_built_from_objects(domain: str) -> None:
    """The pane and the agents' front-ends hand over arguments already parsed."""
    _, world, tool, field = TOOL_CALLS[domain]
    where = scenario(domain, world)
    deep: list[object] = []
    for _ in range(2000):
        deep = [deep]
    for value, reason in ((10**5000, "too large"), (deep, NESTING), (float("nan"), "nan")):
        with pytest.raises(ActionError, match=reason):
            domain_object: Any = get_domain(domain)
            domain_object.make_action({"name": tool, "arguments": {field: value}}, where)
