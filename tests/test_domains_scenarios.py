"""Every domain: registered in tab order, ready scenarios, prompts, and scenario files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentworld_tui.domains import DOMAINS
from agentworld_tui.domains.android import parse_hierarchy
from agentworld_tui.domains.scenario_file import (
    ScenarioFileError,
    load_scenario_file,
    scenario_from_text,
)
from agentworld_tui.domains.tool_call import scenario_tools
from agentworld_tui.domains.web import elements
from agentworld_tui.world.prompts import load_scenarios, load_template, render_template
from agentworld_tui.world.session import new_session

PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")
DIMENSIONS = ("Format", "Factuality", "Consistency", "Realism", "Quality")


def test_domains_in_tab_order() -> None:
    from agentworld_tui.domains import SHIPPED

    shipped = [name for name, _where, _title in SHIPPED]
    assert shipped == ["terminal", "mcp", "web", "android", "search", "swe", "os"]
    assert list(DOMAINS)[: len(shipped)] == shipped  # a registered domain comes after them
    assert [d.title for d in DOMAINS.values()] == [
        "Terminal",
        "MCP",
        "Web",
        "Android",
        "Search",
        "SWE",
        "OS",
    ]
    # The tab bar reads the titles without importing the domains; each matches its class.
    assert [DOMAINS.title(name) for name in DOMAINS] == [d.title for d in DOMAINS.values()]
    assert all(DOMAINS[name].name == name for name in DOMAINS)


def test_domains_are_imported_when_first_asked_for() -> None:
    code = (
        "import sys; from agentworld_tui.domains import DOMAINS; "
        "print(DOMAINS.title('android'), 'agentworld_tui.domains.android' in sys.modules); "
        "DOMAINS['android']; print('agentworld_tui.domains.android' in sys.modules); "
        "DOMAINS['nope']"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["Android", "False", "True"]
    assert "KeyError: 'nope'" in done.stderr


@pytest.mark.parametrize("name", list(DOMAINS))
def test_ready_scenarios_fill_the_system_prompt(name: str) -> None:
    domain = DOMAINS[name]
    scenarios, problems = load_scenarios(name)
    assert problems == []
    assert len(scenarios) >= 3
    assert len({s.name for s in scenarios}) == len(scenarios)
    for scenario in scenarios:
        assert scenario.title and scenario.description
        session, prompt_problems = new_session(domain, scenario)
        assert prompt_problems == []
        assert PLACEHOLDER.search(session.system_prompt) is None
        assert "<predicted_observation>" in session.system_prompt
        if name == "web":
            assert len(elements(scenario.state)) >= 10
        if name == "android":
            assert len(parse_hierarchy(scenario.state)) >= 10


@pytest.mark.parametrize("name", list(DOMAINS))
def test_judge_prompt_has_the_parts_and_the_dimensions(name: str) -> None:
    template = load_template(name, "judge_system_prompt")
    assert template.problems == [] and template.source.startswith("shipped:")
    for dimension in DIMENSIONS:
        assert f"- {dimension}:" in template.text
    assert "<final_evaluation>" in template.text and "</final_evaluation>" in template.text
    # Instructions only: the turn to judge comes in the user message (world/judge_prompts.py).
    assert PLACEHOLDER.search(template.text) is None
    assert '"scores": {"format": n' in template.text


def test_render_template_leaves_no_gap_for_empty_parts() -> None:
    text = render_template("A\n\n{{goal}}\n\nB\n", {"goal": ""})
    assert text == "A\n\nB\n"


# -- scenario files (predict --state, the panes' open and paste) ---------------------------

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]


def test_plain_text_is_the_state(tmp_path: Path) -> None:
    path = tmp_path / "screen.xml"
    path.write_text("<hierarchy><node bounds='[0,0][10,10]'/></hierarchy>", encoding="utf-8")
    scenario = load_scenario_file(path)
    assert scenario.state.startswith("<hierarchy>")
    assert scenario.name == "screen" and scenario.extras == {}
    json_state = tmp_path / "page.json"
    json_state.write_text('{"class": "FrameLayout", "bounds": [0, 0, 10, 10]}', encoding="utf-8")
    assert load_scenario_file(json_state).state.startswith('{"class"')


def test_tool_list_files(tmp_path: Path) -> None:
    for i, data in enumerate(
        (TOOLS, {"tools": TOOLS}, {"jsonrpc": "2.0", "id": 7, "result": {"tools": TOOLS}})
    ):
        path = tmp_path / f"tools-{i}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        scenario = load_scenario_file(path)
        assert scenario.state == ""
        tools = scenario_tools(scenario)
        assert tools is not None and [t.name for t in tools] == ["get_weather"]


def test_toml_scenarios(tmp_path: Path) -> None:
    many = tmp_path / "mine.toml"
    many.write_text(
        """
[[scenario]]
name = "first"
title = "First"
state = "user@box:~$ "

[[scenario]]
name = "second"
description = "The second one."
instruction = "Open the calculator."
state = "tag\\tname"
""",
        encoding="utf-8",
    )
    first = load_scenario_file(many)
    assert (first.name, first.title, first.state) == ("first", "First", "user@box:~$ ")
    second = load_scenario_file(many, pick="second")
    assert second.description == "The second one."
    assert second.extras == {"instruction": "Open the calculator."}
    assert second.state == "tag\tname"
    with pytest.raises(ScenarioFileError, match="no scenario named 'third'; it has: first, second"):
        load_scenario_file(many, pick="third")

    top = tmp_path / "top.toml"
    top.write_text(
        'description = "A server."\n[[tools]]\nname = "ping"\n[tools.inputSchema]\ntype = "object"\n',
        encoding="utf-8",
    )
    server = load_scenario_file(top)
    assert server.name == "top" and server.description == "A server."
    tools = scenario_tools(server)
    assert tools is not None and tools[0].name == "ping"


def test_a_shipped_scenario_file_loads_like_the_catalogue() -> None:
    shipped = Path(__file__).resolve().parent.parent / "prompts" / "mcp" / "scenarios.toml"
    calendar = load_scenario_file(shipped, pick="calendar")
    catalogue = {s.name: s for s in load_scenarios("mcp")[0]}["calendar"]
    assert calendar.description == catalogue.description
    assert scenario_tools(calendar) == scenario_tools(catalogue)


def test_pasted_text_is_recognised() -> None:
    assert scenario_tools(scenario_from_text(json.dumps(TOOLS))) is not None
    assert scenario_from_text('[[scenario]]\nname = "p"\nstate = "s"\n').state == "s"
    assert scenario_from_text('{"state": "page", "goal": "buy"}').extras == {"goal": "buy"}
    assert scenario_from_text("RootWebArea 'x'").state == "RootWebArea 'x'"
    assert scenario_from_text("[a12] button 'OK'").state == "[a12] button 'OK'"


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("bad.toml", "state = ", "not valid TOML"),
        ("empty.toml", "", "no scenario keys"),
        ("none.toml", "scenario = []", "list is empty"),
        ("tools.toml", 'tools = "{oops"', "tool list is unusable"),
        ("dup.json", json.dumps(TOOLS + TOOLS), "defined twice"),
    ],
)
def test_unusable_files_say_why(tmp_path: Path, name: str, text: str, reason: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioFileError) as caught:
        load_scenario_file(path)
    assert str(caught.value).startswith(str(path))
    assert reason in str(caught.value)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="cannot read"):
        load_scenario_file(tmp_path / "nope.txt")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScenarioFileError, match="cannot read"):
        load_scenario_file(binary)


def test_lexer_names_are_known_to_pygments() -> None:
    from pygments.lexers import get_lexer_by_name

    from agentworld_tui.domains.swe import _LEXERS, _NAMED

    names = {d.lexer for d in DOMAINS.values()} | set(_LEXERS.values()) | set(_NAMED.values())
    names |= {"json", "xml", "html", "markdown", "python"}
    for name in sorted(names):
        assert get_lexer_by_name(name) is not None, name
