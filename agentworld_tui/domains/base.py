"""What a domain does unless it says otherwise.

A domain is a class with the members of the ``Domain`` protocol (``world/domain.py``).
Deriving from ``DomainBase`` leaves one method to write, ``parse_action``; the others have
defaults that any domain can live with: the generic pane, one ``act`` tool whose input is
the action as the domain writes it, a JSON value read as its JSON text, the turn written
with the action as JSON. Every front-end reaches a domain through these members only, so a
domain registered from anywhere (``DOMAINS.register``) gets a tab, ``predict``, export, an
MCP server and the environments without a line changed elsewhere.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from agentworld_tui.domains.json_schema import MAX_DEPTH, value_problem
from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool

ACT = Tool(
    "act",
    "Take one action in the environment, written as the environment writes actions, and "
    "get what it shows next.",
    {
        "type": "object",
        "properties": {"action": {"type": "string"}},
        "required": ["action"],
    },
)
"""The tool of a domain that declares none of its own."""
MAX_ARGUMENT_CHARS = 200_000
"""A tool call's arguments as JSON, at most: far more than any tool takes, and bounded so
that checking them stays quick."""


class DomainBase(ABC):
    """The defaults of the ``Domain`` protocol; a domain sets ``name`` and ``title`` and
    writes ``parse_action``, and overrides what it knows better."""

    name: str
    title: str
    lexer: str = "text"
    replaces_state: bool = False
    editor_language: str = "text"
    pane: str | None = None

    @abstractmethod
    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """Validate an action as the user wrote it; raises ActionError with the reason."""

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """A JSON value is read as its JSON text."""
        return self.parse_action(json_text(value), scenario)

    def tools(self, scenario: Scenario) -> list[Tool]:
        return [ACT]

    def action_for_tool(self, name: str, arguments: object, scenario: Scenario) -> Action:
        """Refuse what no tool takes (a tool the domain does not offer, arguments that are
        not a JSON object or are too big) with the same messages for every domain and every
        front-end (the MCP server, the environments, rollouts), then ``tool_action``."""
        if not isinstance(arguments, dict):
            raise ActionError("the arguments must be an object", field="arguments")
        check_tool_name(name, self.tools(scenario))
        json_value(
            arguments,
            MAX_ARGUMENT_CHARS,
            "the arguments are",
            max_depth=MAX_DEPTH - 1,  # one level is the call around them
            field="arguments",
        )
        return self.tool_action(name, arguments, scenario)

    def tool_action(self, name: str, arguments: dict[str, Any], scenario: Scenario) -> Action:
        """The action of a call of one of ``tools`` (``act``: the action as written)."""
        return self.parse_action(argument_text(arguments, "action"), scenario)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(number, json.dumps(action.payload, ensure_ascii=False), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {"scenario": scenario.description}

    def observation_lexer(self, action: Action, observation: str) -> str:
        return self.lexer


def shown_name(name: str, limit: int = 80, *, quoted: bool = True) -> str:
    """A tool name as a message gives it: cut, since an unknown one may be any size."""
    cut = name if len(name) <= limit else name[: limit - 1] + "…"
    shown = repr(cut) if quoted else cut
    return shown + (f" ({len(name):,} characters)" if len(name) > limit else "")


def check_tool_name(name: str, tools: list[Tool]) -> Tool:
    """The tool called ``name``; ActionError naming the tools there are when none is."""
    found = next((tool for tool in tools if tool.name == name), None)
    if found is None:
        available = ", ".join(tool.name for tool in tools) or "none"
        raise ActionError(
            f"unknown tool {shown_name(name)}; available tools: {available}", field="name"
        )
    return found


def argument_text(arguments: dict[str, Any], key: str) -> str:
    """A tool argument that holds an action's text (a value given instead is its JSON)."""
    value = arguments.get(key)
    if isinstance(value, str):
        return value
    if value is None:
        raise ActionError(f"{key} is required", field=key)
    return json_text(value)


def json_text(value: object, *, compact: bool = False) -> str:
    """The JSON text of a value handed over as Python objects; ActionError where it has none.
    ``compact`` leaves out the spaces after separators: the shortest text of the value."""
    separators = (",", ":") if compact else None
    try:
        return json.dumps(value, ensure_ascii=False, separators=separators)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ActionError(f"the action cannot be written as JSON: {exc}") from None


def json_value(
    value: object,
    max_chars: int,
    what: str = "the action is",
    *,
    max_depth: int = MAX_DEPTH,
    field: str = "",
) -> object:
    """An action handed over as Python objects, held to what its JSON text would be held
    to: a JSON value (no NaN, no number too long, not nested deeper than ``max_depth``),
    ``max_chars`` long at most."""
    problem = value_problem(value, max_depth)
    if problem:
        raise ActionError(f"{what} not usable: {problem}", field=field)
    size = len(json_text(value, compact=True))  # never longer than the text it was read from
    if size > max_chars:
        raise ActionError(
            f"{what} {size:,} characters of JSON; the limit is {max_chars:,}", field=field
        )
    return value
