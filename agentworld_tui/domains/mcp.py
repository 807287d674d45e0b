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
    ToolCallDomain,
    ToolListError,
    load_tools,
    scenario_tools,
    tools_from_data,
    tools_from_json,
    with_tools,
)
from agentworld_tui.world.action import Action

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


class McpDomain(ToolCallDomain):
    name = "mcp"
    title = "MCP"
    lexer = "json"
    replaces_state = False
    pane = "agentworld_tui.ui.panes.mcp:McpPane"
    no_tool_list = NO_TOOL_LIST

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "json" if is_json(observation) else "text"
