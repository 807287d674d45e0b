"""Every domain as tools an agent calls: the tools offered, and the action each call is."""

from __future__ import annotations

import pytest

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.prompts import load_scenarios

CALLS = {
    "terminal": ("send_keystrokes", {"keystrokes": "ls -la\n", "duration": 2}),
    "web": ("browser_action", {"action": "click('12')"}),
    "android": ("phone_action", {"action": {"action": "tap", "element": "Sign in"}}),
    "os": ("run_python", {"code": "import pyautogui\npyautogui.click(10, 20)"}),
    "search": ("web_search", {"queries": ["harrowmere tides", "harrowmere ferry"]}),
    "swe": ("execute_bash", {"command": "ls"}),
}


@pytest.mark.parametrize("name", list(DOMAINS))
def test_every_domain_offers_tools_with_json_schemas(name: str) -> None:
    domain = get_domain(name)
    scenario = load_scenarios(name)[0][0]
    tools = domain.tools(scenario)
    assert tools
    for tool in tools:
        assert tool.name and tool.description
        assert tool.input_schema.get("type") == "object"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_of_a_domain_tool_is_its_action(name: str) -> None:
    domain = get_domain(name)
    scenario = load_scenarios(name)[0][0]
    tool, arguments = CALLS[name]
    action = domain.action_for_tool(tool, arguments, scenario)
    assert action.domain == name
    assert domain.render_turn(1, action, None).startswith("### Turn 1")


def test_the_terminal_call_keeps_the_keystrokes_and_duration() -> None:
    domain = get_domain("terminal")
    scenario = load_scenarios("terminal")[0][0]
    action = domain.action_for_tool("send_keystrokes", {"keystrokes": "C-c"}, scenario)
    assert action.payload[0]["keystrokes"] == "C-c"
    timed = domain.action_for_tool(*CALLS["terminal"], scenario)
    assert timed.payload == [{"keystrokes": "ls -la\n", "duration": 2.0}]


def test_mcp_offers_the_scenario_s_own_tools() -> None:
    domain = get_domain("mcp")
    scenario = load_scenarios("mcp")[0][0]
    names = [t.name for t in domain.tools(scenario)]
    assert "list_directory" in names
    action = domain.action_for_tool("list_directory", {"path": "/home/maya/notes"}, scenario)
    assert action.payload == {"name": "list_directory", "arguments": {"path": "/home/maya/notes"}}


@pytest.mark.parametrize(
    ("name", "tool", "arguments", "problem"),
    [
        ("terminal", "rm_rf", {}, "unknown tool 'rm_rf'; available tools: send_keystrokes"),
        ("web", "browser_action", {"action": "explode('1')"}, "explode"),
        ("os", "run_python", {}, "code is required"),
        ("mcp", "list_directory", {"path": 5}, "path"),
        ("android", "phone_action", [], "the arguments must be an object"),
    ],
)
def test_bad_calls_say_why_as_the_app_does(
    name: str, tool: str, arguments: object, problem: str
) -> None:
    domain = get_domain(name)
    scenario = load_scenarios(name)[0][0]
    with pytest.raises(ActionError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        domain.action_for_tool(tool, arguments, scenario)


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = {
    "too deep": (_nested(150), "the arguments are not usable: nested too deeply"),
    "a huge number": (10**5000, "the arguments are not usable: a number too large"),
    "not a number": (float("nan"), "the arguments are not usable: nan is not a JSON number"),
    "too long": ("x" * 200_001, "the arguments are 200,0"),
}


@pytest.mark.parametrize(("value", "said"), list(HOSTILE.values()), ids=list(HOSTILE))
@pytest.mark.parametrize("name", list(DOMAINS))
def test_hostile_arguments_get_one_message_from_every_front_end(
    name: str, value: object, said: str
) -> None:
    from agentworld_tui.agents.env.actions import ToolCall, make_action
    from agentworld_tui.agents.mcp import toolset as toolsets

    domain = get_domain(name)
    scenario = load_scenarios(name)[0][0]
    tool = domain.tools(scenario)[0]
    arguments = {(tool.required or ["x"])[0]: value}
    refusals = []
    for attempt in (
        lambda: toolsets.for_scenario(domain, scenario).action(tool.name, arguments),
        lambda: make_action(domain, scenario, ToolCall(tool.name, arguments)),
        lambda: domain.action_for_tool(tool.name, arguments, scenario),
    ):
        with pytest.raises(ActionError) as refused:
            attempt()
        refusals.append((str(refused.value), refused.value.field))
    assert refusals[0] == refusals[1] == refusals[2]
    assert refusals[0][0].startswith(said) and refusals[0][1] == "arguments"
