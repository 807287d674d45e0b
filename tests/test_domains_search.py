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
        ({"name": "web_search", "arguments": {"query": []}}, "arguments.query", "at least 1 item"),
        (
            {"name": "web_search", "arguments": {"query": [""]}},
            "arguments.query.0",
            "at least 1 character",
        ),
        (
            {"name": "web_search", "arguments": {"q": ["x"]}},
            "arguments.queries",
            "needs queries (a list of searches) or query (one search)",
        ),
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


# -- every form of the three tools that is accepted, and how the turn writes it ----------


def call_turn(name: str, arguments: dict[str, object]) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, indent=2)
    return f"### Turn 1\n\n**Action:**\n```json\n{body}\n```"


SEARCH_FORMS: dict[str, tuple[str, dict[str, object]]] = {
    "web_search, a batch in queries": ("web_search", {"queries": ["tide tables", "moon"]}),
    "web_search, one query": ("web_search", {"query": "tide tables Tromsø"}),
    "web_search, query as a list": ("web_search", {"query": ["tide tables"]}),
    "web_search, queries as one text": ("web_search", {"queries": "tide tables"}),
    "web_extractor, url": ("web_extractor", {"url": "https://example.no/bru"}),
    "web_extractor, url and goal": (
        "web_extractor",
        {"url": "https://example.no/bru", "goal": "the opening date"},
    ),
    "web_extractor, several urls": (
        "web_extractor",
        {"url": ["https://a.example", "https://b.example"]},
    ),
    "dict_memory add": ("dict_memory", {"action": "add", "key": "architect", "value": "Lund"}),
    "dict_memory add, a JSON value": (
        "dict_memory",
        {"action": "add", "key": "k", "value": {"n": 2}},
    ),
    "dict_memory add, dict": ("dict_memory", {"action": "add", "dict": {"a": "1", "b": "2"}}),
    "dict_memory update": ("dict_memory", {"action": "update", "key": "k", "value": "v2"}),
    "dict_memory update, dict": ("dict_memory", {"action": "update", "dict": {"a": "3"}}),
    "dict_memory retrieve, key": ("dict_memory", {"action": "retrieve", "key": "k"}),
    "dict_memory retrieve, key_list": (
        "dict_memory",
        {"action": "retrieve", "key_list": ["a", "b"]},
    ),
    "dict_memory retrieve, everything": ("dict_memory", {"action": "retrieve"}),
    "dict_memory retrieve_all": ("dict_memory", {"action": "retrieve_all"}),
    "dict_memory remove, key": ("dict_memory", {"action": "remove", "key": "k"}),
    "dict_memory remove, key_list": ("dict_memory", {"action": "remove", "key_list": ["a"]}),
    "dict_memory remove_all": ("dict_memory", {"action": "remove_all"}),
    "dict_memory key_list as an operation": ("dict_memory", {"action": "key_list"}),
    "dict_memory dict as an operation": ("dict_memory", {"action": "dict"}),
    "dict_memory, the operation under operation": (
        "dict_memory",
        {"operation": "add", "key": "k", "value": "v"},
    ),
    "dict_memory, the operation under mode": ("dict_memory", {"mode": "retrieve_all"}),
}


@pytest.mark.parametrize(("name", "arguments"), list(SEARCH_FORMS.values()), ids=list(SEARCH_FORMS))
def test_every_official_form_is_accepted_as_written(
    name: str, arguments: dict[str, object]
) -> None:
    text = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    action = SEARCH.parse_action(text, scenario("open-web"))
    assert action.payload == {"name": name, "arguments": arguments}
    assert SEARCH.render_turn(1, action, None) == call_turn(name, arguments)
    # The pane builds the same action from the picked tool and its arguments editor.
    call = {"name": name, "arguments": arguments}
    assert SEARCH.make_action(call, scenario("open-web")) == action


def test_a_batch_with_the_simulation_instruction() -> None:
    world = scenario("fictional-bridge")
    action = SEARCH.parse_action(
        '{"name": "web_search", "arguments": {"queries": ["Kvaløysletta bru", "arkitekt"]}}', world
    )
    message = SEARCH.render_turn(2, action, None)
    instruction = simulation_instruction(world)
    assert message == (
        f"### Turn 2\n\n**Simulation Instruction:**\n{instruction}\n\n**Action:**\n```json\n"
        + json.dumps(
            {"name": "web_search", "arguments": {"queries": ["Kvaløysletta bru", "arkitekt"]}},
            ensure_ascii=False,
            indent=2,
        )
        + "\n```"
    )


SEARCH_REFUSED: dict[str, tuple[str, dict[str, object], str, str]] = {
    "web_search with neither key": (
        "web_search",
        {},
        "arguments.queries",
        "web_search needs queries (a list of searches) or query (one search)",
    ),
    "web_search with both keys": (
        "web_search",
        {"query": "a", "queries": ["b"]},
        "arguments.query",
        "web_search takes queries (a batch) or query (one), not both",
    ),
    "web_search, an empty batch": (
        "web_search",
        {"queries": []},
        "arguments.queries",
        "at least 1 item",
    ),
    "web_search, an empty query": (
        "web_search",
        {"query": ""},
        "arguments.query",
        "at least 1 character",
    ),
    "web_search, a number": (
        "web_search",
        {"query": 5},
        "arguments.query",
        "must be an array or a string",
    ),
    "web_search, an unknown key": (
        "web_search",
        {"query": "a", "num": 3},
        "arguments.num",
        "is not a known field (known: queries, query)",
    ),
    "web_extractor without url": ("web_extractor", {"goal": "x"}, "arguments.url", "is required"),
    "dict_memory without an operation": (
        "dict_memory",
        {"key": "k"},
        "arguments.action",
        "dict_memory needs action: one of add, update, retrieve, remove, retrieve_all, remove_all",
    ),
    "dict_memory, an unknown operation": (
        "dict_memory",
        {"action": "forget"},
        "arguments.action",
        "dict_memory action must be one of add, update, retrieve, remove, retrieve_all, "
        'remove_all, key_list, dict; got "forget"',
    ),
    "dict_memory, two operation keys": (
        "dict_memory",
        {"action": "add", "operation": "add"},
        "arguments.operation",
        "dict_memory names its operation twice (action and operation)",
    ),
    "dict_memory add without value": (
        "dict_memory",
        {"action": "add", "key": "k"},
        "arguments.value",
        "dict_memory add needs value (it takes key and value, or dict)",
    ),
    "dict_memory add with nothing": (
        "dict_memory",
        {"action": "add"},
        "arguments.key",
        "dict_memory add needs key and value, or dict",
    ),
    "dict_memory add with key and dict": (
        "dict_memory",
        {"action": "add", "key": "k", "dict": {"a": "1"}},
        "arguments.key",
        "dict_memory add takes key and value, or dict, not key and dict",
    ),
    "dict_memory add, an empty dict": (
        "dict_memory",
        {"action": "add", "dict": {}},
        "arguments.dict",
        "needs at least 1 entry",
    ),
    "dict_memory remove without a key": (
        "dict_memory",
        {"action": "remove"},
        "arguments.key",
        "dict_memory remove needs key, or key_list",
    ),
    "dict_memory retrieve, an empty key_list": (
        "dict_memory",
        {"action": "retrieve", "key_list": []},
        "arguments.key_list",
        "needs at least 1 item",
    ),
    "dict_memory retrieve, key_list of numbers": (
        "dict_memory",
        {"action": "retrieve", "key_list": [1]},
        "arguments.key_list.0",
        "must be a string",
    ),
    "dict_memory retrieve_all with a key": (
        "dict_memory",
        {"action": "retrieve_all", "key": "k"},
        "arguments.key",
        "dict_memory retrieve_all takes nothing, not key",
    ),
    "dict_memory, an unknown argument": (
        "dict_memory",
        {"action": "remove", "key": "k", "force": True},
        "arguments.force",
        "dict_memory remove takes key, or key_list, not key and force",
    ),
}


@pytest.mark.parametrize(
    ("name", "arguments", "field", "reason"),
    list(SEARCH_REFUSED.values()),
    ids=list(SEARCH_REFUSED),
)
def test_refused_forms_say_why(
    name: str, arguments: dict[str, object], field: str, reason: str
) -> None:
    text = json.dumps({"name": name, "arguments": arguments})
    with pytest.raises(ActionError) as caught:
        SEARCH.parse_action(text, scenario("open-web"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_the_skeleton_starts_a_batch() -> None:
    search = next(t for t in SEARCH.tools(scenario("open-web")) if t.name == "web_search")
    assert search.skeleton() == {"queries": []}
