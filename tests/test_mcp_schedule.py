"""Perturbation schedules: per tool, per call number, with a probability and a seed; the
same file and seed give the same schedule, and each turn records what it got."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faultserver import FaultServer
from mcp import Client
from mcpfixtures import remote_simulator, reply_with, serving, session_turns, write_tools

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.server import AgentServer
from agentworld_tui.agents.mcp.sessions import SessionFolder
from agentworld_tui.agents.schedule import ScheduleError, load_schedule, parse_schedule
from agentworld_tui.world.perturbation import load_perturbations

SCHEDULE = """
seed = 11

[[rule]]
tool = "read_note"
calls = [2]
preset = "http-500"

[[rule]]
calls = ["3-"]
probability = 0.5
instruction = "The notebook is read-only now: every write fails with EROFS."
"""


def decisions(schedule_text: str, seed: int | None = None, calls: int = 60) -> list[list[object]]:
    schedule = parse_schedule(_toml(schedule_text), "mcp")
    if seed is not None:
        schedule = schedule.with_seed(seed)
    found = []
    for number in range(1, calls + 1):
        tool = "read_note" if number % 2 else "count_notes"
        tool_call = (number + 1) // 2 if number % 2 else number // 2
        found.append([(d.rule, d.fired) for d in schedule.decide(tool, number, tool_call)])
    return found


def _toml(text: str) -> object:
    import tomllib

    return tomllib.loads(text)


def test_the_same_file_and_seed_give_the_same_schedule(tmp_path: Path) -> None:
    file = tmp_path / "schedule.toml"
    file.write_text(SCHEDULE, encoding="utf-8")
    again = load_schedule(file, "mcp")
    assert decisions(SCHEDULE) == decisions(SCHEDULE)
    assert again.decide("read_note", 9, 5) == again.decide("read_note", 9, 5)
    assert decisions(SCHEDULE) != decisions(SCHEDULE, seed=12)  # 2^-29 to be the same
    fired = [rule for call in decisions(SCHEDULE) for rule, did in call if did and rule == 2]
    assert 10 < len(fired) < 50  # about half of the 58 calls from the third on


def test_a_rule_that_names_a_tool_counts_that_tool_s_calls() -> None:
    schedule = parse_schedule(_toml(SCHEDULE), "mcp")
    # The connection's 2nd call is count_notes: rule 1 waits for read_note's 2nd.
    assert schedule.decide("count_notes", 2, 1) == []
    [first] = schedule.decide("read_note", 3, 2)[:1]
    presets = {p.name: p.instruction for p in load_perturbations("mcp")[0]}
    assert first.rule == 1 and first.fired and first.instruction == presets["http-500"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("seed = 1", "the schedule has no [[rule]] entries"),
        ('[[rule]]\npreset = "lava"', "rule 1: no mcp perturbation named 'lava'; the presets are:"),
        ('[[rule]]\ninstruction = "x"\nprobability = 2', "probability must be from 0 to 1"),
        ('[[rule]]\ninstruction = "x"\ncalls = ["2-x"]', 'ranges such as "2-5" or "3-"'),
        ('[[rule]]\ninstruction = "x"\ncalls = [0]', "calls are numbers from 1"),
        ('[[rule]]\ninstruction = "x"\npreset = "timeout"', "either a preset or an instruction"),
        ('[[rule]]\ninstruction = "x"\nwhen = 3', "rule 1: unknown key 'when'"),
        ('seeds = 3\n[[rule]]\ninstruction = "x"', "unknown key 'seeds'"),
        ('seed = "x"\n[[rule]]\ninstruction = "x"', "seed must be a whole number"),
    ],
)
def test_a_bad_schedule_says_where_and_why(tmp_path: Path, text: str, problem: str) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(ScheduleError) as caught:
        load_schedule(file, "mcp")
    assert str(caught.value).startswith(f"{file}: ")
    assert problem in str(caught.value)


def test_a_json_schedule_reads_like_the_toml_one(tmp_path: Path) -> None:
    file = tmp_path / "schedule.json"
    file.write_text(
        json.dumps(
            {"seed": 11, "rule": [{"tool": "read_note", "calls": [2], "preset": "http-500"}]}
        ),
        encoding="utf-8",
    )
    schedule = load_schedule(file, "mcp")
    assert [d.fired for d in schedule.decide("read_note", 2, 2)] == [True]


async def test_each_turn_records_what_the_schedule_gave_it(tmp_path: Path) -> None:
    notes = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    schedule = parse_schedule(_toml(SCHEDULE), "mcp")
    folders = [tmp_path / "run-1", tmp_path / "run-2"]
    presets = {p.name: p.instruction for p in load_perturbations("mcp")[0]}
    for folder in folders:
        with FaultServer() as fault:
            fault.default = reply_with("ok")
            simulator = remote_simulator(fault.url)
            server = AgentServer(
                simulator, notes, sessions=SessionFolder(folder), schedule=schedule
            )
            try:
                async with serving(server) as url, Client(url) as client:
                    await client.call_tool("read_note", {"title": "a"})
                    server.set_control(server.connections()[0].id, "The disk is nearly full.")
                    for title in ("b", "c", "d", "e", "f"):
                        await client.call_tool("read_note", {"title": title})
            finally:
                simulator.close()
            sent = [r.body["messages"][-1]["content"] for r in fault.chat_requests()]
        [turns] = session_turns(folder).values()
        assert "schedule" not in turns[0]["stats"]["agent"] and turns[0]["control"] == ""
        # The person's instruction for the next call and the schedule's are joined.
        assert turns[1]["control"] == f"The disk is nearly full.\n\n{presets['http-500']}"
        assert turns[1]["stats"]["agent"]["schedule"] == [
            {
                "rule": 1,
                "draw": turns[1]["stats"]["agent"]["schedule"][0]["draw"],
                "fired": True,
                "preset": "http-500",
            }
        ]
        assert presets["http-500"] in sent[1]
        for turn in turns[2:]:
            [record] = turn["stats"]["agent"]["schedule"]
            assert record["rule"] == 2
            assert bool(turn["control"]) == record["fired"]
        folder_turns = [(t["control"], t["stats"]["agent"].get("schedule")) for t in turns]
        if folder is folders[0]:
            first_run = folder_turns
    assert folder_turns == first_run  # the same schedule, run again


def test_the_inline_forms_read_like_the_file_and_write_back() -> None:
    table = parse_schedule(_toml(SCHEDULE), "mcp")
    rules = parse_schedule(_toml(SCHEDULE)["rule"], "mcp")
    assert rules.rules == table.rules and rules.seed == 0
    assert parse_schedule(table.to_dict(), "mcp") == table
    assert table.to_dict()["rule"][1] == {
        "calls": ["3-"],
        "probability": 0.5,
        "instruction": "The notebook is read-only now: every write fails with EROFS.",
    }
    assert not parse_schedule(None, "mcp") and not parse_schedule([], "mcp")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"schedule": []}, "[[schedule]] tables are [[rule]] now"),
        ([{"turn": 2, "preset": "timeout"}], "rule 1: unknown key 'turn' (calls = [N] is turn N"),
        ([{"calls": [2], "instruction": "x", "persistent": True}], 'calls = ["N-"] every turn'),
    ],
)
def test_the_environment_s_old_entries_say_how_to_write_them_now(
    data: object, problem: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(data, "mcp")
    assert problem in str(caught.value)
