"""MCP: tool lists from every source, calls checked against their input schemas, turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentworld_tui.domains.json_schema import schema_problems
from agentworld_tui.domains.mcp import McpDomain
from agentworld_tui.domains.tool_call import (
    ToolListError,
    load_tools,
    scenario_tools,
    tools_from_json,
    with_tools,
)
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import new_session

MCP = McpDomain()


def scenario(name: str) -> Scenario:
    found = {s.name: s for s in load_scenarios("mcp")[0]}
    return found[name]


def test_scenarios_carry_real_looking_tool_lists() -> None:
    scenarios, problems = load_scenarios("mcp")
    assert problems == []
    assert len(scenarios) >= 3
    fs_tools = scenario_tools(scenario("filesystem"))
    assert fs_tools is not None
    assert {"read_text_file", "write_file", "list_directory"} <= {t.name for t in fs_tools}
    read = next(t for t in fs_tools if t.name == "read_text_file")
    assert read.required == ["path"]
    assert read.input_schema["properties"]["head"]["type"] == "integer"
    assert scenario_tools(scenario("open-server")) is None


def test_good_call_is_accepted_and_rendered_as_json() -> None:
    action = MCP.parse_action(
        '{"name": "read_text_file", "arguments": {"path": "/home/maya/notes/inbox.md", "head": 5}}',
        scenario("filesystem"),
    )
    assert action.payload == {
        "name": "read_text_file",
        "arguments": {"path": "/home/maya/notes/inbox.md", "head": 5},
    }
    assert action.label.startswith("read_text_file(path=")
    message = MCP.render_turn(1, action, None)
    assert message.startswith("### Turn 1\n\n**Action:**\n```json\n")
    body = message.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(body) == action.payload
    assert "**Current State:**" not in message
    with_state = MCP.render_turn(2, action, "the inbox has 12 lines")
    assert "**Current State:**\n```\nthe inbox has 12 lines\n```" in with_state


@pytest.mark.parametrize(
    ("call", "field", "reason"),
    [
        ('{"name": "rm_rf", "arguments": {}}', "name", "available tools: read_text_file"),
        ('{"name": "read_text_file", "arguments": {}}', "arguments.path", "is required"),
        (
            '{"name": "read_text_file", "arguments": {"path": 7}}',
            "arguments.path",
            "must be a string",
        ),
        (
            '{"name": "read_text_file", "arguments": {"path": "a", "head": 0}}',
            "arguments.head",
            "at least 1",
        ),
        (
            '{"name": "read_text_file", "arguments": {"path": "a", "head": 2.5}}',
            "arguments.head",
            "must be an integer",
        ),
        (
            '{"name": "read_text_file", "arguments": {"path": "a", "lines": 3}}',
            "arguments.lines",
            "not a known field",
        ),
        (
            '{"name": "search_files", "arguments": {"path": "/", "pattern": "*.md", '
            '"excludePatterns": ["ok", 3]}}',
            "arguments.excludePatterns.1",
            "must be a string",
        ),
        ('{"name": "read_text_file", "arguments": [1]}', "arguments", "must be a JSON object"),
        ('{"name": "read_text_file", "argumnts": {}}', "argumnts", "unexpected key"),
        ('{"name": "read_text_file", "arguments": {', "arguments", "invalid JSON"),
        ("", "name", "empty action"),
        ('{"arguments": {}}', "name", "needs a tool name"),
    ],
)
def test_bad_calls_are_refused_with_field_and_reason(call: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        MCP.parse_action(call, scenario("filesystem"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_enum_is_checked_against_the_schema() -> None:
    with pytest.raises(ActionError, match="must be one of") as caught:
        MCP.parse_action(
            '{"name": "list_issues", "arguments": {"owner": "tomasz-k", '
            '"repo": "tinyhttp-cache", "state": "pending"}}',
            scenario("code-host"),
        )
    assert caught.value.field == "arguments.state"
    ok = MCP.parse_action(
        '{"name": "list_issues", "arguments": {"owner": "tomasz-k", '
        '"repo": "tinyhttp-cache", "state": "closed", "per_page": 20}}',
        scenario("code-host"),
    )
    assert ok.payload["arguments"]["state"] == "closed"


def test_without_a_tool_list_any_well_formed_call_goes_as_written() -> None:
    action = MCP.parse_action(
        '{"name": "assign_laptop", "arguments": {"asset": "LT-0042", "to": "j.moreau"}}',
        scenario("open-server"),
    )
    assert action.payload["name"] == "assign_laptop"
    # Arguments given as a JSON string, as some agents write them, are decoded.
    encoded = MCP.parse_action(
        '{"name": "count", "arguments": "{\\"kind\\": \\"monitor\\"}"}', Scenario("x", "X")
    )
    assert encoded.payload["arguments"] == {"kind": "monitor"}
    with pytest.raises(ActionError, match="tool call is a JSON object"):
        MCP.parse_action('["assign_laptop"]', scenario("open-server"))


def test_tool_list_sources(tmp_path: Path) -> None:
    definitions = [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    pasted = tools_from_json(json.dumps(definitions))
    assert [t.name for t in pasted] == ["get_weather"]
    saved = tmp_path / "tools-list.json"
    saved.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"tools": definitions}}),
        encoding="utf-8",
    )
    assert load_tools(saved) == pasted
    wrapped = tools_from_json(json.dumps({"tools": definitions}))
    assert wrapped == pasted
    openai_style = tools_from_json(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parameters": definitions[0]["inputSchema"],
                    },
                }
            ]
        )
    )
    assert openai_style == pasted

    loaded = with_tools(Scenario("blank", "Blank"), pasted)
    with pytest.raises(ActionError, match=r"arguments\.city is required"):
        MCP.parse_action('{"name": "get_weather", "arguments": {}}', loaded)
    assert MCP.parse_action('{"name": "get_weather", "arguments": {"city": "Oslo"}}', loaded)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{nope", "not JSON"),
        (
            '{"jsonrpc": "2.0", "id": 1, "error": {"message": "Method not found"}}',
            "Method not found",
        ),
        ('[{"description": "x"}]', "has no name"),
        ('[{"name": "a"}, {"name": "a"}]', "defined twice"),
        ('{"name": "a"}', "expected a list of tools"),
        ('[{"name": "a", "inputSchema": []}]', "input schema must be an object"),
    ],
)
def test_unusable_tool_lists_say_why(text: str, reason: str) -> None:
    with pytest.raises(ToolListError, match=reason):
        tools_from_json(text)


def test_system_prompt_carries_the_tool_definitions() -> None:
    session, problems = new_session(MCP, scenario("calendar"))
    assert problems == []
    prompt = session.system_prompt
    assert "{{" not in prompt
    assert "Lena Fischer" in prompt
    lines = [line for line in prompt.splitlines() if line.startswith('{"name": "find_free_slots"')]
    assert len(lines) == 1
    assert json.loads(lines[0])["inputSchema"]["properties"]["duration_minutes"]["maximum"] == 480
    blank, _ = new_session(MCP, scenario("open-server"))
    assert "No tool list was given" in blank.system_prompt


def test_observation_lexer_follows_the_result() -> None:
    action = MCP.parse_action('{"name": "x"}', Scenario("x", "X"))
    assert MCP.observation_lexer(action, '{"content": []}') == "json"
    assert MCP.observation_lexer(action, "Error: file not found") == "text"


def test_schema_subset() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "meta": {"type": "object", "additionalProperties": {"type": "number"}},
            "flag": {"type": "boolean"},
        },
    }
    assert (
        schema_problems({"when": 5, "tags": ["a"], "meta": {"x": 1.5}, "flag": True}, schema) == []
    )
    problems = {
        p.path: p.message
        for p in schema_problems(
            {"when": [], "tags": ["a", "b", "c"], "meta": {"x": "no"}, "flag": 1}, schema
        )
    }
    assert set(problems) == {
        "arguments.when",
        "arguments.tags",
        "arguments.meta.x",
        "arguments.flag",
    }
    assert "at most 2 items" in problems["arguments.tags"]
    assert problems["arguments.flag"].startswith("must be true or false")


def test_deeply_nested_json_is_an_error_not_a_crash() -> None:
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ActionError, match="nested too deeply"):
        MCP.parse_action('{"name": "x", "arguments": {"a": ' + deep + "}}", Scenario("x", "X"))
    with pytest.raises(ToolListError, match="nested too deeply"):
        tools_from_json(deep)
    action = MCP.parse_action('{"name": "x"}', Scenario("x", "X"))
    assert MCP.observation_lexer(action, deep) == "text"


# -- every form of a call that is accepted, and how the turn writes it -------------------

READ = {"name": "read_text_file", "arguments": {"path": "/home/maya/notes/inbox.md"}}
READ_TURN = (
    "### Turn 1\n\n**Action:**\n```json\n"
    + json.dumps(READ, ensure_ascii=False, indent=2)
    + "\n```"
)
ARGS = '{"path": "/home/maya/notes/inbox.md"}'
MCP_FORMS = {
    "plain": '{"name": "read_text_file", "arguments": ' + ARGS + "}",
    "arguments as a JSON string": json.dumps({"name": "read_text_file", "arguments": ARGS}),
    "parameters": '{"name": "read_text_file", "parameters": ' + ARGS + "}",
    "args": '{"name": "read_text_file", "args": ' + ARGS + "}",
    "tool and input": '{"tool": "read_text_file", "input": ' + ARGS + "}",
    "tool_name": '{"tool_name": "read_text_file", "arguments": ' + ARGS + "}",
    "MCP tools/call request": '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
    '"params": {"name": "read_text_file", "arguments": ' + ARGS + ', "_meta": {}}}',
    "OpenAI tool call": json.dumps(
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_text_file", "arguments": ARGS},
        }
    ),
    "Anthropic tool_use": '{"type": "tool_use", "id": "toolu_1", "name": "read_text_file", '
    '"input": ' + ARGS + "}",
    "a list of one call": '[{"name": "read_text_file", "arguments": ' + ARGS + "}]",
    "in a Markdown fence": '```json\n{"name": "read_text_file", "arguments": ' + ARGS + "}\n```",
    "in tool_call tags": '<tool_call>\n{"name": "read_text_file", "arguments": '
    + ARGS
    + "}\n</tool_call>",
    "tool_call tags left open": '<tool_call>{"name": "read_text_file", "arguments": ' + ARGS + "}",
}


@pytest.mark.parametrize("text", list(MCP_FORMS.values()), ids=list(MCP_FORMS))
def test_every_call_form_is_accepted_and_written_as_the_benchmark_does(text: str) -> None:
    action = MCP.parse_action(text, scenario("filesystem"))
    assert action.payload == READ
    assert MCP.render_turn(1, action, None) == READ_TURN


def test_a_call_without_arguments_and_with_state() -> None:
    action = MCP.parse_action('{"name": "list_allowed_directories"}', scenario("open-server"))
    assert MCP.render_turn(3, action, "two roots") == (
        "### Turn 3\n\n**Current State:**\n```\ntwo roots\n```\n\n**Action:**\n```json\n"
        '{\n  "name": "list_allowed_directories",\n  "arguments": {}\n}\n```'
    )


MCP_REFUSED = {
    "two calls": (
        '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]',
        "",
        "one tool call per turn; the list holds 2 calls",
    ),
    "another JSON-RPC method": (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        "method",
        "only as tools/call, not 'tools/list'",
    ),
    "tools/call without params": ('{"method": "tools/call"}', "params", "needs params"),
    "a stray key in the request": (
        '{"method": "tools/call", "params": {"name": "a"}, "extra": 1}',
        "extra",
        "unexpected key 'extra' in the tools/call request",
    ),
    "a stray key beside function": (
        '{"function": {"name": "a"}, "name": "a"}',
        "name",
        "unexpected key 'name' beside function",
    ),
    "arguments given twice": (
        '{"name": "a", "arguments": {}, "input": {}}',
        "input",
        "gives its arguments twice (arguments and input)",
    ),
    "name given twice": ('{"name": "a", "tool": "b"}', "tool", "gives its name twice"),
    "an unknown type": (
        '{"type": "search", "name": "a"}',
        "type",
        "unexpected key 'type': a tool call has only name and arguments",
    ),
    "arguments text not JSON": (
        '{"name": "a", "arguments": "{path: 1}"}',
        "arguments",
        "arguments given as text are not JSON",
    ),
    "a bare string": ('"read_text_file"', "", "a tool call is a JSON object"),
}


@pytest.mark.parametrize(
    ("text", "field", "reason"), list(MCP_REFUSED.values()), ids=list(MCP_REFUSED)
)
def test_refused_call_forms_say_why(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        MCP.parse_action(text, Scenario("x", "X"))
    assert caught.value.field == field
    assert reason in str(caught.value)
