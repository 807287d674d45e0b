"""What a simulated MCP server serves: tools exactly as given, refused when their schemas
are not JSON Schema, and calls checked before any model time is spent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcpfixtures import NOTES_TOOLS, write_tools

from agentworld_tui.agents.mcp import toolset as toolsets
from agentworld_tui.agents.mcp.toolset import ToolsetError, UnknownTool
from agentworld_tui.world.action import ActionError


def dumped(toolset: toolsets.Toolset) -> list[dict[str, object]]:
    return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in toolset.declared]


@pytest.mark.parametrize(
    "shape",
    [
        lambda tools: tools,
        lambda tools: {"tools": tools},
        lambda tools: {"jsonrpc": "2.0", "id": 3, "result": {"tools": tools}},
    ],
    ids=["bare list", "tools/list result", "json-rpc answer"],
)
def test_a_tools_file_is_served_exactly_as_written(tmp_path: Path, shape: object) -> None:
    file = tmp_path / "tools.json"
    file.write_text(json.dumps(shape(NOTES_TOOLS)), encoding="utf-8")  # type: ignore[operator]
    toolset = toolsets.from_file(file)
    assert dumped(toolset) == NOTES_TOOLS
    assert toolset.domain.name == "mcp"
    prompt_tools = toolset.scenario.extras["tools"]
    assert [t["name"] for t in prompt_tools] == ["read_note", "count_notes"]
    # The prompt's tool list carries each output schema with its tool.
    assert prompt_tools[1]["outputSchema"] == NOTES_TOOLS[1]["outputSchema"]
    assert "outputSchema" not in prompt_tools[0]


def test_an_mcp_scenario_toml_gives_its_tools_and_state(tmp_path: Path) -> None:
    file = tmp_path / "notes.toml"
    file.write_text(
        """
[[scenario]]
name = "other"
title = "Other"
[[scenario.tools]]
name = "other_tool"
[scenario.tools.inputSchema]
type = "object"

[[scenario]]
name = "notes"
title = "Notes"
description = "A notebook."
state = "3 notes"
[[scenario.tools]]
name = "read_note"
title = "Read a note"
[scenario.tools.inputSchema]
type = "object"
required = ["title"]
[scenario.tools.inputSchema.properties.title]
type = "string"
""",
        encoding="utf-8",
    )
    toolset = toolsets.from_file(file, pick="notes")
    assert [t.name for t in toolset.declared] == ["read_note"]
    assert toolset.declared[0].title == "Read a note"
    assert toolset.scenario.state == "3 notes"


def test_openai_style_definitions_are_declared_in_the_mcp_spelling(tmp_path: Path) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up a word.",
                "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
            },
        }
    ]
    toolset = toolsets.from_file(write_tools(tmp_path / "t.json", tools))
    assert dumped(toolset) == [
        {
            "name": "lookup",
            "description": "Look up a word.",
            "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
        }
    ]


@pytest.mark.parametrize(
    ("tool", "problem"),
    [
        (
            {
                "name": "bad",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "strin"}}},
            },
            "tool 'bad': its inputSchema is not valid JSON Schema at properties.a.type",
        ),
        (
            {"name": "list", "inputSchema": {"type": "array"}},
            'tool \'list\': its inputSchema must have "type": "object"',
        ),
        (
            {"name": "out", "inputSchema": {"type": "object"}, "outputSchema": {"required": 3}},
            "tool 'out': its outputSchema is not valid JSON Schema at required",
        ),
        ({"description": "no name"}, "tool 1 has no name"),
        ({"name": "x", "inputSchema": {"type": "object"}, "icons": "nope"}, "tool 'x': icons"),
    ],
)
def test_a_schema_that_is_not_json_schema_is_refused_naming_the_tool(
    tmp_path: Path, tool: dict[str, object], problem: str
) -> None:
    file = write_tools(tmp_path / "tools.json", [tool])
    with pytest.raises(ToolsetError) as caught:
        toolsets.from_file(file)
    assert str(caught.value).startswith(f"{file}: ")
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"error": {"code": -32601, "message": "no tools here"}}', "an error: no tools here"),
        ('{"tools": []}', "the tool list is empty"),
        ('[{"name": "a", "inputSchema": {"type": "object"}}, {"name": "a"}]', "defined twice"),
    ],
)
def test_unusable_tool_files_say_why(tmp_path: Path, text: str, problem: str) -> None:
    file = tmp_path / "tools.json"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(ToolsetError, match=problem):
        toolsets.from_file(file)


def test_calls_are_checked_once_by_json_schema_in_the_app_s_words(tmp_path: Path) -> None:
    toolset = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    action = toolset.action("read_note", {"title": "groceries", "lines": 3})
    assert action.payload == {"name": "read_note", "arguments": {"title": "groceries", "lines": 3}}
    with pytest.raises(ActionError, match=r"read_note: arguments\.title must be a string, not 5"):
        toolset.action("read_note", {"title": 5})
    with pytest.raises(ActionError, match=r"arguments\.colour is not a known field"):
        toolset.action("read_note", {"title": "a", "colour": "red"})
    with pytest.raises(ActionError, match=r"arguments\.title is required"):
        toolset.action("read_note", None)
    with pytest.raises(
        ActionError, match=r"arguments\.title does not match the pattern \^\[a-z-\]\+\$"
    ):
        toolset.action("read_note", {"title": "Groceries!"})
    with pytest.raises(UnknownTool, match=r"Unknown tool: delete_note\. The tools are: read_note"):
        toolset.action("delete_note", {})


def test_an_unknown_tool_s_huge_name_is_cut_in_the_message(tmp_path: Path) -> None:
    toolset = toolsets.from_file(write_tools(tmp_path / "tools.json"))
    with pytest.raises(UnknownTool) as caught:
        toolset.action("x" * 100_000, {})
    message = str(caught.value)
    assert len(message) < 300
    assert "(100,000 characters)" in message and message.endswith("read_note, count_notes")


def test_a_bad_call_gets_the_domain_s_message_from_mcp_and_openenv_alike() -> None:
    from agentworld_tui.agents.env.actions import ToolCall, make_action

    terminal = toolsets.for_domain("terminal", "python-project")
    for arguments in ({"keystrokes": ["ls"]}, {"keystrokes": "ls", "duration": -1}):
        with pytest.raises(ActionError) as over_mcp:
            terminal.action("send_keystrokes", arguments)
        with pytest.raises(ActionError) as over_openenv:
            make_action(terminal.domain, terminal.scenario, ToolCall("send_keystrokes", arguments))
        assert str(over_mcp.value) == str(over_openenv.value)


def test_huge_or_hostile_arguments_get_a_clear_refusal(tmp_path: Path) -> None:
    toolset = toolsets.from_file(
        write_tools(
            tmp_path / "tools.json",
            [{"name": "store", "inputSchema": {"type": "object"}}],
        )
    )
    with pytest.raises(
        ActionError, match=r"the arguments are 200,01\d characters of JSON; the limit"
    ):
        toolset.action("store", {"blob": "x" * 200_000})
    deep: dict[str, object] = {}
    node = deep
    for _ in range(150):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    with pytest.raises(ActionError, match="nested too deeply"):
        toolset.action("store", deep)
    with pytest.raises(ActionError, match="a number too large"):
        toolset.action("store", {"n": 10**5000})


@pytest.mark.parametrize(
    ("domain", "tools"),
    [
        ("terminal", ["send_keystrokes"]),
        ("swe", ["execute_bash", "str_replace_editor"]),
        ("search", ["web_search", "web_extractor", "dict_memory"]),
        ("web", ["browser_action"]),
        ("android", ["phone_action"]),
        ("os", ["run_python"]),
        ("mcp", ["read_text_file", "write_file", "list_directory"]),
    ],
)
def test_every_domain_is_a_tool_shaped_server(domain: str, tools: list[str]) -> None:
    toolset = toolsets.for_domain(domain)
    names = [t.name for t in toolset.declared]
    assert names[: len(tools)] == tools
    assert toolset.scenario.name  # the domain's first scenario is the starting state
    assert toolset.domain.name == domain


def test_a_domain_s_call_is_its_action_and_bad_calls_say_why() -> None:
    terminal = toolsets.for_domain("terminal", "python-project")
    action = terminal.action("send_keystrokes", {"keystrokes": "ls\n", "duration": 1})
    assert action.payload == [{"keystrokes": "ls\n", "duration": 1.0}]
    with pytest.raises(ActionError, match=r"keystrokes must be text"):
        terminal.action("send_keystrokes", {"keystrokes": ["ls"]})
    with pytest.raises(
        ToolsetError, match="no terminal scenario named 'nowhere'; the scenarios are"
    ):
        toolsets.for_domain("terminal", "nowhere")
