"""Search: the three research tools, the simulation instruction on every turn, results."""

from __future__ import annotations

import json

import pytest

from agentworld_tui.domains.search import (
    SearchDomain,
    search_results,
    simulation_instruction,
    with_simulation,
)
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import new_session

SEARCH = SearchDomain()


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("search")[0]}[name]


@pytest.mark.parametrize(
    "call",
    [
        {"name": "web_search", "arguments": {"query": ["Kvaløysletta footbridge architect"]}},
        {"name": "web_search", "arguments": {"query": ["a", "b", "c"]}},
        {"name": "web_extractor", "arguments": {"url": "https://example.no/bru"}},
        {"name": "web_extractor", "arguments": {"url": "https://x.example", "goal": "opening"}},
        {"name": "dict_memory", "arguments": {"action": "add", "key": "k", "value": "v"}},
        {"name": "dict_memory", "arguments": {"action": "retrieve"}},
        {"name": "dict_memory", "arguments": {"action": "remove", "key": "k"}},
    ],
)
def test_good_calls(call: dict[str, object]) -> None:
    action = SEARCH.parse_action(json.dumps(call), scenario("open-web"))
    assert action.payload == call  # no simulation instruction in the open web


@pytest.mark.parametrize(
    ("call", "field", "reason"),
    [
        (
            {"name": "google", "arguments": {}},
            "name",
            "available tools: web_search, web_extractor, dict_memory",
        ),
        (
            {"name": "web_search", "arguments": {"query": "one string"}},
            "arguments.query",
            "must be an array",
        ),
        ({"name": "web_search", "arguments": {"query": []}}, "arguments.query", "at least 1 item"),
        (
            {"name": "web_search", "arguments": {"query": [""]}},
            "arguments.query.0",
            "at least 1 character",
        ),
        ({"name": "web_search", "arguments": {"q": ["x"]}}, "arguments.query", "is required"),
        ({"name": "web_extractor", "arguments": {}}, "arguments.url", "is required"),
        (
            {"name": "dict_memory", "arguments": {"action": "forget"}},
            "arguments.action",
            "must be one of",
        ),
        (
            {"name": "dict_memory", "arguments": {"action": "add", "key": "k"}},
            "arguments.value",
            "dict_memory add needs value",
        ),
        ({"name": "dict_memory", "arguments": {"action": "remove"}}, "arguments.key", "needs key"),
    ],
)
def test_bad_calls(call: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        SEARCH.parse_action(json.dumps(call), scenario("open-web"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_scenarios_with_and_without_an_instruction() -> None:
    scenarios, problems = load_scenarios("search")
    assert problems == [] and len(scenarios) >= 3
    assert simulation_instruction(scenario("open-web")) == ""
    text = simulation_instruction(scenario("fictional-bridge"))
    assert text.startswith("Target query: Who designed the Kvaløysletta footbridge")
    assert "Reference answer: The Kvaløysletta footbridge was designed by" in text
    assert "Lund &\nAasheim" in text


def test_the_instruction_reaches_every_user_message() -> None:
    world = scenario("fictional-company")
    session, problems = new_session(SEARCH, world)
    assert problems == []
    calls = [
        {"name": "web_search", "arguments": {"query": ["Kestrel Robotics revenue 2025"]}},
        {"name": "web_extractor", "arguments": {"url": "https://ir.kestrel-robotics.example"}},
        {"name": "dict_memory", "arguments": {"action": "add", "key": "rev", "value": "418.6"}},
    ]
    for number, call in enumerate(calls, 1):
        turn = session.begin_turn(SEARCH.parse_action(json.dumps(call), world))
        session.finish_turn(
            turn, observation=f"observation {number}", reasoning="", status="complete"
        )
    last = session.begin_turn(SEARCH.parse_action(json.dumps(calls[0]), world))
    messages = session.prompt(last).messages
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert len(users) == 4
    for message in users:
        section = message.split("**Simulation Instruction:**\n", 1)[1].split("\n\n**Action:**")[0]
        assert "EUR 418.6 million" in section
        assert section.startswith("Target query: What revenue did Kestrel Robotics report")
    # The action block still holds only the call.
    block = users[0].split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(block) == calls[0]
    # The saved turn keeps the instruction it was sent with.
    assert "simulation_instruction" in session.turns[0].action.to_dict()["payload"]
    # And the observations come back as the history between them.
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        "observation 1",
        "observation 2",
        "observation 3",
    ]


def test_without_an_instruction_there_is_no_section() -> None:
    session, _ = new_session(SEARCH, scenario("open-web"))
    turn = session.begin_turn(
        SEARCH.parse_action(
            '{"name": "web_search", "arguments": {"query": ["x"]}}', scenario("open-web")
        )
    )
    assert "Simulation Instruction" not in turn.user_message
    assert turn.user_message.startswith("### Turn 1\n\n**Action:**\n```json")


def test_an_edited_instruction_applies_from_the_next_turn() -> None:
    world = with_simulation(
        scenario("open-web"), "Who won the 2031 Oslo marathon?", "Ane Berg, 2:24:10"
    )
    action = SEARCH.parse_action(
        '{"name": "web_search", "arguments": {"query": ["Oslo marathon 2031"]}}', world
    )
    assert "Ane Berg, 2:24:10" in SEARCH.render_turn(1, action, None)
    cleared = with_simulation(world, "", "")
    assert simulation_instruction(cleared) == ""


def test_system_prompt_lists_the_tools() -> None:
    session, _ = new_session(SEARCH, scenario("fictional-bridge"))
    prompt = session.system_prompt
    assert "{{" not in prompt
    for name in ("web_search", "web_extractor", "dict_memory"):
        assert f'{{"name": "{name}"' in prompt
    assert "Simulation Instruction" in prompt


def test_search_results_are_read_from_the_answer() -> None:
    answer = """## Results for "Kvaløysletta footbridge"
1. [Kvaløysletta gangbru opnar i oktober](https://www.nordlys.example/nyheter/gangbru)
   Date: 2019-09-30
   The new 212-metre footbridge designed by Lund & Aasheim Arkitekter opens on
   14 October ...
2. **Kvaløysletta footbridge - Encyclopedia**
   URL: https://encyclopedia.example/wiki/Kvaløysletta_footbridge
   Published: 2021-02-11
   Snippet: A cable-stayed steel footbridge in Tromsø, Norway.
3. Plain title without a link
"""
    results = search_results(answer)
    assert [r.number for r in results] == [1, 2, 3]
    first = results[0]
    assert first.title == "Kvaløysletta gangbru opnar i oktober"
    assert first.url == "https://www.nordlys.example/nyheter/gangbru"
    assert first.date == "2019-09-30"
    assert first.snippet.startswith("The new 212-metre footbridge") and first.snippet.endswith(
        "14 October ..."
    )
    second = results[1]
    assert second.title == "Kvaløysletta footbridge - Encyclopedia"
    assert second.url == "https://encyclopedia.example/wiki/Kvaløysletta_footbridge"
    assert second.date == "2021-02-11"
    assert second.snippet == "A cable-stayed steel footbridge in Tromsø, Norway."
    assert results[2].url == ""
    assert search_results("# Kvaløysletta\n\nA page of text.") == []
