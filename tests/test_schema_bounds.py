"""Arguments from a hostile agent cannot make a schema check run long: a backtracking
pattern, a pattern on field names, and ``uniqueItems`` over thousands of objects each end
within the check's time, with the same answer as an unbounded check where there is one."""

from __future__ import annotations

import threading
import time

import pytest

from agentworld_tui.domains.json_schema import CheckTimeout, checking_within, schema_problems
from agentworld_tui.domains.tool_call import Tool, check_call
from agentworld_tui.world.action import ActionError

REDOS = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a|aa)+$"}}}
KEYS = {
    "type": "object",
    "patternProperties": {"^(a|aa)+$": {"type": "string"}},
    "additionalProperties": False,
}
UNIQUE = {
    "type": "object",
    "properties": {"rows": {"type": "array", "uniqueItems": True}},
}


def rows(count: int) -> list[dict[str, object]]:
    return [{"id": i, "tags": ["a", "b"], "meta": {"n": i, "ok": True}} for i in range(count)]


def test_a_backtracking_pattern_ends_at_the_check_s_time() -> None:
    began = time.monotonic()
    with pytest.raises(CheckTimeout), checking_within(0.5):
        schema_problems({"name": "a" * 60 + "!"}, REDOS)
    # A deadline, not a measurement: unbounded, this match takes longer than a lifetime.
    assert time.monotonic() - began < 30
    assert schema_problems({"name": "aaaa"}, REDOS) == []
    [problem] = schema_problems({"name": "b"}, REDOS)
    assert str(problem) == "arguments.name does not match the pattern ^(a|aa)+$"


def test_a_pattern_on_field_names_ends_at_the_check_s_time() -> None:
    with pytest.raises(CheckTimeout), checking_within(0.5):
        schema_problems({"a" * 60 + "!": "x"}, KEYS)
    [problem] = schema_problems({"b": "x"}, KEYS)
    assert problem.path == "arguments.b" and "is not a known field" in problem.message


def test_unique_items_over_thousands_of_objects_is_quick_and_right() -> None:
    many = rows(3000)
    began = time.monotonic()
    assert schema_problems({"rows": many}, UNIQUE) == []
    # A deadline, not a measurement: the pairwise check took 25 s here, this one ~0.05 s.
    assert time.monotonic() - began < 10
    [problem] = schema_problems(
        {"rows": [*many, {"meta": {"ok": True, "n": 7}, "tags": ["a", "b"], "id": 7.0}]}, UNIQUE
    )
    assert problem.path == "arguments.rows" and "repeats an item" in problem.message
    assert schema_problems({"rows": [1, True, 1.5, "1", [1], {"a": 1}]}, UNIQUE) == []
    assert schema_problems({"rows": [[1, 2], [1, 2.0]]}, UNIQUE) != []


def test_a_check_that_runs_out_of_time_is_a_clear_refusal() -> None:
    tool = Tool("find", "", REDOS)
    with pytest.raises(ActionError) as caught, checking_within(0.3):
        check_call({"name": "find", "arguments": {"name": "a" * 60 + "!"}}, [tool])
    assert caught.value.field == "arguments"
    assert str(caught.value).startswith("find: the arguments could not be checked within 0.3 s")


def test_a_pattern_check_lets_other_threads_run() -> None:
    """The pattern engine lets go of the GIL: a thread beside it keeps its pace."""
    gaps: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        with pytest.raises(CheckTimeout), checking_within(1.0):
            schema_problems({"name": "a" * 60 + "!"}, REDOS)
    finally:
        stop.set()
        ticker.join()
    # Holding the GIL, the engine would stop the ticker for the whole second; a loaded
    # machine may delay a tick, never by half of it.
    assert max(gaps) < 0.5
