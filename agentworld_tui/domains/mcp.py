"""MCP: an agent calls the tools of an MCP server; the world model answers as the server.

The system prompt carries the tool definitions. Where the scenario gives a tool list, a
call is checked against it (unknown tool, arguments against the input schema) before it is
sent; where it gives none, any well-formed call goes out as written, and the model infers
the tool from its name.
"""

from __future__ import annotations

import json

from agentworld_tui.domains.json_schema import read_json
from agentworld_tui.domains.tool_call import (
    Tool,
    ToolListError,
    call_from_data,
    call_json,
    check_call,
    load_tools,
    parse_tool_call,
    scenario_tools,
    tool_call_action,
    tool_definitions,
    tools_from_data,
    tools_from_json,
    with_tools,
)
from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

__all__ = [
    "McpDomain",
    "Tool",
    "ToolListError",
    "load_tools",
    "scenario_tools",
    "tools_from_data",
    "tools_from_json",
    "with_tools",
]

NO_TOOL_LIST = (
    "No tool list was given. Infer what each called tool does from its name and its "
    "arguments, and answer the way a real server offering such a tool would."
)


def is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return False
    try:
        read_json(stripped)
    except json.JSONDecodeError:
        return False
    return True


class McpDomain:
    name = "mcp"
    title = "MCP"
    lexer = "json"
    replaces_state = False
    editor_language = "json"

    def tools(self, scenario: Scenario) -> list[Tool] | None:
        """The scenario's tools, or None; a malformed list is an ActionError for the pane."""
        try:
            return scenario_tools(scenario)
        except ToolListError as exc:
            raise ActionError(f"the scenario's tool list is unusable: {exc}") from None

    def make_action(self, name: str, arguments: object, scenario: Scenario) -> Action:
        """A call built by the pane from the picked tool and the arguments editor."""
        call = call_from_data({"name": name, "arguments": arguments})
        tools = self.tools(scenario)
        if tools is not None:
            check_call(call, tools)
        return tool_call_action(self.name, call)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        call = parse_tool_call(text)
        return self.make_action(call["name"], call["arguments"], scenario)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(number, call_json(action.payload), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        try:
            tools = scenario_tools(scenario)
        except ToolListError:
            tools = None
        return {
            "scenario": scenario.description,
            "tools": tool_definitions(tools) if tools else NO_TOOL_LIST,
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "json" if is_json(observation) else "text"
