"""An agent's action in any of the forms a domain takes, made into a validated Action, and
the tools an agent is offered in the form its model's API takes.

A domain's native forms are its text (a command line, a browser call, Python code, a JSON
tool call) and that text's JSON value (a keystroke entry list, a tool call object, a phone
action). An agent may also call the environment's tools (``domains/agent_tools``). Every
form goes through the domain's own checks, so a refused action carries the message the app
shows for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentworld_tui.domains.agent_tools import agent_action
from agentworld_tui.domains.tool_call import Tool
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario


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
        return agent_action(domain, scenario, value.name, value.arguments)
    if isinstance(value, str):
        return domain.parse_action(value, scenario)
    if isinstance(value, dict | list):
        return _from_value(domain, scenario, value)
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


def _from_value(domain: Domain, scenario: Scenario, value: dict[str, Any] | list[Any]) -> Action:
    if isinstance(value, dict):
        if domain.name == "web" and isinstance(value.get("name"), str):
            arguments = value.get("arguments", {})
            if not isinstance(arguments, dict):
                raise ActionError("the arguments must be an object", field="arguments")
            made = domain.make_action(value["name"], arguments)  # type: ignore[attr-defined]
            assert isinstance(made, Action)
            return made
        if domain.name == "os" and isinstance(value.get("code"), str):
            return domain.parse_action(value["code"], scenario)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ActionError(f"the action cannot be written as JSON: {exc}") from None
    return domain.parse_action(text, scenario)
