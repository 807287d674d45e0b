"""SWE: shell and editor calls in a repository, and outputs highlighted by file type."""

from __future__ import annotations

import json

import pytest

from agentworld_tui.domains.swe import SweDomain, file_lexer
from agentworld_tui.domains.tool_call import tools_from_data, with_tools
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import new_session

SWE = SweDomain()


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("swe")[0]}[name]


@pytest.mark.parametrize(
    "call",
    [
        {
            "name": "execute_bash",
            "arguments": {"command": "cd /testbed && pytest -q tests/test_slug.py"},
        },
        {
            "name": "str_replace_editor",
            "arguments": {"command": "view", "path": "/testbed/textkit/slug.py"},
        },
        {
            "name": "str_replace_editor",
            "arguments": {
                "command": "view",
                "path": "/testbed/textkit/slug.py",
                "view_range": [1, 40],
            },
        },
        {
            "name": "str_replace_editor",
            "arguments": {
                "command": "create",
                "path": "/testbed/tests/test_pl.py",
                "file_text": "def test(): pass\n",
            },
        },
        {
            "name": "str_replace_editor",
            "arguments": {
                "command": "str_replace",
                "path": "/testbed/textkit/slug.py",
                "old_str": "a",
                "new_str": "b",
            },
        },
        {
            "name": "str_replace_editor",
            "arguments": {
                "command": "insert",
                "path": "/testbed/textkit/slug.py",
                "insert_line": 3,
                "new_str": "import unicodedata",
            },
        },
        {
            "name": "str_replace_editor",
            "arguments": {"command": "undo_edit", "path": "/testbed/textkit/slug.py"},
        },
    ],
)
def test_good_calls(call: dict[str, object]) -> None:
    assert SWE.parse_action(json.dumps(call), scenario("python-slugify-bug")).payload == call


@pytest.mark.parametrize(
    ("call", "field", "reason"),
    [
        (
            {"name": "python", "arguments": {"code": "print(1)"}},
            "name",
            "unknown tool 'python'; available tools: execute_bash, str_replace_editor",
        ),
        ({"name": "execute_bash", "arguments": {}}, "arguments.command", "is required"),
        (
            {"name": "execute_bash", "arguments": {"command": ""}},
            "arguments.command",
            "at least 1 character",
        ),
        (
            {"name": "str_replace_editor", "arguments": {"command": "delete", "path": "/a"}},
            "arguments.command",
            "must be one of",
        ),
        (
            {"name": "str_replace_editor", "arguments": {"command": "create", "path": "/a.py"}},
            "arguments.file_text",
            "create needs file_text",
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "str_replace", "path": "/a.py"},
            },
            "arguments.old_str",
            "needs old_str",
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "insert", "path": "/a.py", "new_str": "x"},
            },
            "arguments.insert_line",
            "needs insert_line",
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "view", "path": "textkit/slug.py"},
            },
            "arguments.path",
            "must be absolute (e.g. /testbed/textkit/slug.py)",
        ),
        (
            {
                "name": "str_replace_editor",
                "arguments": {"command": "view", "path": "/a", "view_range": [1]},
            },
            "arguments.view_range",
            "at least 2 items",
        ),
    ],
)
def test_bad_calls(call: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        SWE.parse_action(json.dumps(call), scenario("python-slugify-bug"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_a_scenario_may_bring_its_own_tools() -> None:
    tools = tools_from_data(
        [
            {
                "name": "run",
                "inputSchema": {
                    "type": "object",
                    "properties": {"cmd": {"type": "string"}},
                    "required": ["cmd"],
                },
            }
        ]
    )
    custom = with_tools(scenario("go-ratelimit"), tools)
    assert SWE.parse_action('{"name": "run", "arguments": {"cmd": "go test -race ./..."}}', custom)
    with pytest.raises(ActionError, match="available tools: run"):
        SWE.parse_action('{"name": "execute_bash", "arguments": {"command": "ls"}}', custom)


def test_first_turn_carries_the_repository_and_the_prompt_the_task() -> None:
    world = scenario("express-pagination")
    session, problems = new_session(SWE, world)
    assert problems == []
    assert "The task the agent works on:\nBug report: GET /orders?page=2" in session.system_prompt
    assert '{"name": "str_replace_editor"' in session.system_prompt
    assert "{{" not in session.system_prompt
    turn = session.begin_turn(
        SWE.parse_action('{"name": "execute_bash", "arguments": {"command": "npm test"}}', world)
    )
    assert "**Current State:**\n```\n/workspace/orders-api\n" in turn.user_message
    body = turn.user_message.split("**Action:**\n```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(body) == {"name": "execute_bash", "arguments": {"command": "npm test"}}
    second = session.begin_turn(
        SWE.parse_action('{"name": "execute_bash", "arguments": {"command": "git diff"}}', world)
    )
    assert "**Current State:**" not in second.user_message


def test_outputs_are_highlighted_by_file_type() -> None:
    world = scenario("go-ratelimit")

    def lexer(call: dict[str, object]) -> str:
        return SWE.observation_lexer(SWE.parse_action(json.dumps(call), world), "")

    view = {"name": "str_replace_editor", "arguments": {"command": "view"}}
    assert (
        lexer({**view, "arguments": {"command": "view", "path": "/src/ratelimit/bucket.go"}})
        == "go"
    )
    assert (
        lexer({**view, "arguments": {"command": "view", "path": "/src/ratelimit/go.mod"}}) == "text"
    )
    assert lexer({**view, "arguments": {"command": "view", "path": "/src/ratelimit"}}) == "text"
    assert lexer({"name": "execute_bash", "arguments": {"command": "cat bucket.go"}}) == "text"
    assert file_lexer("/testbed/textkit/slug.py") == "python"
    assert file_lexer("/w/src/App.TSX") == "tsx"
    assert file_lexer("/w/Makefile") == "make"
    assert file_lexer("/w/notes.unknown") == "text"


# -- every form of the two tools that is accepted, and how the turn writes it ------------


def call_turn(call: dict[str, object]) -> str:
    body = json.dumps(call, ensure_ascii=False, indent=2)
    return f"### Turn 1\n\n**Action:**\n```json\n{body}\n```"


SLUG = "/testbed/textkit/slug.py"
SWE_FORMS: dict[str, tuple[str, dict[str, object]]] = {
    "execute_bash": (
        '{"name": "execute_bash", "arguments": {"command": "pytest -q"}}',
        {"name": "execute_bash", "arguments": {"command": "pytest -q"}},
    ),
    "execute_bash with a timeout in seconds": (
        '{"name": "execute_bash", "arguments": {"command": "pytest", "timeout": 120.5}}',
        {"name": "execute_bash", "arguments": {"command": "pytest", "timeout": 120.5}},
    ),
    "OpenHands is_input": (
        '{"name": "execute_bash", "arguments": {"command": "C-c", "is_input": "true"}}',
        {"name": "execute_bash", "arguments": {"command": "C-c", "is_input": "true"}},
    ),
    "SWE-agent's bash": (
        '{"name": "bash", "arguments": {"command": "git status"}}',
        {"name": "bash", "arguments": {"command": "git status"}},
    ),
    "Anthropic's bash restart": (
        '{"name": "bash", "arguments": {"restart": true}}',
        {"name": "bash", "arguments": {"restart": True}},
    ),
    "a shell tool with an argv list": (
        '{"name": "shell", "arguments": {"command": ["bash", "-lc", "ls"]}}',
        {"name": "shell", "arguments": {"command": ["bash", "-lc", "ls"]}},
    ),
    "a bare shell command": (
        "grep -rn slugify /testbed | head",
        {"name": "execute_bash", "arguments": {"command": "grep -rn slugify /testbed | head"}},
    ),
    "a shell command in a bash fence": (
        "```bash\ncd /testbed\npython -m pytest -x\n```",
        {"name": "execute_bash", "arguments": {"command": "cd /testbed\npython -m pytest -x"}},
    ),
    "a shell test starting with [": (
        "[ -d /testbed/.git ] && git log -1",
        {"name": "execute_bash", "arguments": {"command": "[ -d /testbed/.git ] && git log -1"}},
    ),
    "view": (
        json.dumps({"name": "str_replace_editor", "arguments": {"command": "view", "path": SLUG}}),
        {"name": "str_replace_editor", "arguments": {"command": "view", "path": SLUG}},
    ),
    "view to the end of the file": (
        json.dumps(
            {
                "name": "str_replace_editor",
                "arguments": {"command": "view", "path": SLUG, "view_range": [20, -1]},
            }
        ),
        {
            "name": "str_replace_editor",
            "arguments": {"command": "view", "path": SLUG, "view_range": [20, -1]},
        },
    ),
    "create under Anthropic's editor name": (
        json.dumps(
            {
                "name": "str_replace_based_edit_tool",
                "arguments": {"command": "create", "path": "/testbed/a.py", "file_text": "x = 1\n"},
            }
        ),
        {
            "name": "str_replace_based_edit_tool",
            "arguments": {"command": "create", "path": "/testbed/a.py", "file_text": "x = 1\n"},
        },
    ),
    "str_replace that deletes (no new_str)": (
        json.dumps(
            {
                "name": "str_replace_editor",
                "arguments": {"command": "str_replace", "path": SLUG, "old_str": "# TODO\n"},
            }
        ),
        {
            "name": "str_replace_editor",
            "arguments": {"command": "str_replace", "path": SLUG, "old_str": "# TODO\n"},
        },
    ),
    "insert under text_editor": (
        json.dumps(
            {
                "name": "text_editor",
                "arguments": {"command": "insert", "path": SLUG, "insert_line": 0, "new_str": "#"},
            }
        ),
        {
            "name": "text_editor",
            "arguments": {"command": "insert", "path": SLUG, "insert_line": 0, "new_str": "#"},
        },
    ),
    "an OpenAI tool call": (
        json.dumps(
            {
                "type": "function",
                "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'},
            }
        ),
        {"name": "execute_bash", "arguments": {"command": "ls"}},
    ),
}


@pytest.mark.parametrize(("text", "call"), list(SWE_FORMS.values()), ids=list(SWE_FORMS))
def test_every_form_is_accepted_and_written_as_the_benchmark_does(
    text: str, call: dict[str, object]
) -> None:
    action = SWE.parse_action(text, scenario("python-slugify-bug"))
    assert action.payload == call
    assert SWE.render_turn(1, action, None) == call_turn(call)


def test_an_aliased_editor_view_is_highlighted_by_file_type() -> None:
    call = {"name": "str_replace_based_edit_tool", "arguments": {"command": "view", "path": SLUG}}
    action = SWE.parse_action(json.dumps(call), scenario("python-slugify-bug"))
    assert SWE.observation_lexer(action, "") == "python"


SWE_REFUSED: dict[str, tuple[str, str, str]] = {
    "bash with nothing to run": (
        '{"name": "bash", "arguments": {}}',
        "arguments.command",
        "is required",
    ),
    "an argv list that is no list of text": (
        '{"name": "bash", "arguments": {"command": ["ls", 1]}}',
        "arguments.command",
        "must be a string",
    ),
    "is_input that is no flag": (
        '{"name": "execute_bash", "arguments": {"command": "x", "is_input": "yes"}}',
        "arguments.is_input",
        "must be one of",
    ),
    "an aliased editor without file_text": (
        '{"name": "str_replace_based_edit_tool", "arguments": {"command": "create", '
        '"path": "/a.py"}}',
        "arguments.file_text",
        "str_replace_based_edit_tool create needs file_text",
    ),
    "a relative path under an alias": (
        '{"name": "text_editor", "arguments": {"command": "view", "path": "a.py"}}',
        "arguments.path",
        "must be absolute (e.g. /testbed/a.py)",
    ),
    "broken JSON is not taken for a command": (
        '{"name": "bash", "arguments": {"command": "ls"}',
        "arguments",
        "invalid JSON",
    ),
}


@pytest.mark.parametrize(
    ("text", "field", "reason"), list(SWE_REFUSED.values()), ids=list(SWE_REFUSED)
)
def test_refused_forms_say_why(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        SWE.parse_action(text, scenario("python-slugify-bug"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_with_its_own_tools_a_scenario_takes_no_bare_command_or_alias() -> None:
    tools = tools_from_data([{"name": "run", "inputSchema": {"type": "object"}}])
    custom = with_tools(scenario("go-ratelimit"), tools)
    with pytest.raises(ActionError, match="invalid JSON"):
        SWE.parse_action("go test ./...", custom)
    with pytest.raises(ActionError, match="unknown tool 'bash'; available tools: run"):
        SWE.parse_action('{"name": "bash", "arguments": {"command": "ls"}}', custom)
