"""An agent's action in any of the forms a domain takes, made into a validated Action, and
the tools an agent is offered in the form its model's API takes.

A domain's native forms are its text (a command line, a browser call, Python code, a JSON
tool call) and that text's JSON value (a keystroke entry list, a tool call object, a phone
action). An agent may also call the environment's tools (``Domain.tools``). Each form goes
to the domain member made for it (``parse_action``, ``make_action``, ``action_for_tool``),
so a refused action carries the message the app shows for it, whatever the domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.tool import Tool


@dataclass(frozen=True)
class ToolCall:
    """A call of one of the environment's agent tools (``Environment.tools``)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


ActionInput = str | dict[str, Any] | list[Any] | Action | ToolCall
"""What ``Environment.step`` takes."""


def make_action(domain: Domain, scenario: Scenario, value: object) -> Action:
    """The validated action ``value`` stands for; raises ActionError (the app's message)."""
    if isinstance(value, Action):
        if value.domain != domain.name:
            raise ActionError(f"a {value.domain} action cannot be taken in a {domain.name} session")
        return value
    if isinstance(value, ToolCall):
        return domain.action_for_tool(value.name, value.arguments, scenario)
    if isinstance(value, str):
        return domain.parse_action(value, scenario)
    if isinstance(value, dict | list):
        return domain.make_action(value, scenario)
    raise ActionError(
        f"an action is text, a JSON object or list, or a tool call; got {type(value).__name__}"
    )


def openai_tool(tool: Tool) -> dict[str, Any]:
    """One tool as an OpenAI function tool."""
    schema = tool.input_schema if tool.input_schema else {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }
