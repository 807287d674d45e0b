"""Search: a research agent's web_search, web_extractor and dict_memory calls.

A scenario may carry a *simulation instruction* (a target query and a reference answer):
the simulated pages must then hold the reference answer's facts, which is how fictional
but self-consistent worlds are built. The instruction is captured into each action when it
is parsed and written into every turn, so it reaches the model on every request (also when
early turns are trimmed from the context) and a saved session records what each turn was
told.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from agentworld_tui.domains.tool_call import (
    Tool,
    ToolListError,
    call_from_data,
    call_json,
    check_call,
    parse_tool_call,
    scenario_tools,
    tool_call_action,
    tool_definitions,
)
from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

SIMULATION_SECTION = "Simulation Instruction"

SEARCH_TOOLS: tuple[Tool, ...] = (
    Tool(
        "web_search",
        "Search the web. Runs each query and returns the top results for each: title, "
        "URL, date and a snippet.",
        {
            "type": "object",
            "properties": {
                "query": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": "One or more search queries, run independently.",
                }
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "web_extractor",
        "Open a web page and return its main content as Markdown text.",
        {
            "type": "object",
            "properties": {
                "url": {"type": "string", "minLength": 1, "description": "The page to open."},
                "goal": {
                    "type": "string",
                    "description": "What the agent looks for on the page (optional).",
                },
            },
            "required": ["url"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "dict_memory",
        "A key-value notebook that persists across the agent's steps.",
        {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "update", "retrieve", "remove"]},
                "key": {"type": "string", "minLength": 1},
                "value": {"type": "string"},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    ),
)

_MEMORY_NEEDS = {"add": ("key", "value"), "update": ("key", "value"), "remove": ("key",)}


def simulation_instruction(scenario: Scenario) -> str:
    """The scenario's simulation instruction as written into a turn ("" when it has none).

    Scenarios give ``target_query`` and ``reference_answer`` (and may add free
    ``simulation_notes``); a ready ``simulation_instruction`` text is taken as is.
    """
    extras = scenario.extras
    ready = str(extras.get("simulation_instruction", "") or "").strip()
    if ready:
        return ready
    query = str(extras.get("target_query", "") or "").strip()
    answer = str(extras.get("reference_answer", "") or "").strip()
    notes = str(extras.get("simulation_notes", "") or "").strip()
    if not (query or answer or notes):
        return ""
    lines = []
    if query:
        lines.append(f"Target query: {query}")
    if answer:
        lines.append(f"Reference answer: {answer}")
    if notes:
        lines.append(f"Notes: {notes}")
    lines.append(
        "Simulate a web in which the reference answer is true: the search results and "
        "pages that bear on the target query must state its facts, consistently across "
        "every turn, without quoting this instruction."
    )
    return "\n".join(lines)


def with_simulation(scenario: Scenario, target_query: str, reference_answer: str) -> Scenario:
    """The scenario with its simulation instruction replaced (empty strings remove it)."""
    extras = {
        k: v
        for k, v in scenario.extras.items()
        if k not in ("simulation_instruction", "target_query", "reference_answer")
    }
    if target_query.strip():
        extras["target_query"] = target_query.strip()
    if reference_answer.strip():
        extras["reference_answer"] = reference_answer.strip()
    return replace(scenario, extras=extras)


@dataclass(frozen=True)
class SearchResult:
    """One numbered result of a web_search observation."""

    number: int
    title: str
    url: str = ""
    date: str = ""
    snippet: str = ""


_RESULT_START = re.compile(r"^\s*(\d{1,3})[.)]\s+(.*\S)\s*$")
_MD_LINK = re.compile(r"^\[(?P<title>[^\]]+)\]\((?P<url>[^)\s]+)\)\s*(?P<rest>.*)$")
_FIELD = re.compile(r"^\s*[-*]?\s*(URL|Link|Source|Date|Published|Snippet)\s*:\s*(.*)$", re.I)
_URL = re.compile(r"https?://\S+")


def search_results(observation: str) -> list[SearchResult]:
    """The numbered results of a web_search answer, for a readable list.

    Accepts ``1. [Title](url)`` or ``1. Title`` with ``URL:``/``Date:``/``Snippet:`` lines
    or a bare snippet under it; an observation without numbered results gives an empty
    list (show it as Markdown then).
    """
    results: list[SearchResult] = []
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            results.append(
                SearchResult(
                    current["number"],
                    current["title"],
                    current["url"],
                    current["date"],
                    " ".join(current["snippet"]).strip(),
                )
            )

    for line in observation.splitlines():
        start = _RESULT_START.match(line)
        if start:
            close()
            head = start.group(2).strip()
            title, url = head, ""
            link = _MD_LINK.match(head)
            if link:
                title, url = link.group("title").strip(), link.group("url")
            title = title.strip("*").strip()
            current = {
                "number": int(start.group(1)),
                "title": title,
                "url": url,
                "date": "",
                "snippet": [],
            }
            continue
        if current is None or not line.strip():
            continue
        field = _FIELD.match(line)
        if field:
            key, value = field.group(1).lower(), field.group(2).strip()
            if key in ("url", "link", "source"):
                found = _URL.search(value)
                current["url"] = found.group(0).rstrip(").,>") if found else value
            elif key in ("date", "published"):
                current["date"] = value
            else:
                current["snippet"].append(value)
        elif not current["url"] and _URL.fullmatch(line.strip()):
            current["url"] = line.strip()
        elif not line.lstrip().startswith("#"):
            current["snippet"].append(line.strip())
    close()
    return [r for r in results if r.title]


class SearchDomain:
    name = "search"
    title = "Search"
    lexer = "markdown"

    def tools(self, scenario: Scenario) -> list[Tool]:
        """The scenario's own tool list where it gives one, else the three search tools."""
        try:
            tools = scenario_tools(scenario)
        except ToolListError as exc:
            raise ActionError(f"the scenario's tool list is unusable: {exc}") from None
        return tools if tools is not None else list(SEARCH_TOOLS)

    def make_action(self, name: str, arguments: object, scenario: Scenario) -> Action:
        call = call_from_data({"name": name, "arguments": arguments})
        check_call(call, self.tools(scenario))
        if call["name"] == "dict_memory":
            operation = call["arguments"].get("action")
            for needed in _MEMORY_NEEDS.get(str(operation), ()):
                if needed not in call["arguments"]:
                    raise ActionError(
                        f"dict_memory {operation} needs {needed}", field=f"arguments.{needed}"
                    )
        instruction = simulation_instruction(scenario)
        extra = {"simulation_instruction": instruction} if instruction else {}
        return tool_call_action(self.name, call, **extra)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        call = parse_tool_call(text)
        return self.make_action(call["name"], call["arguments"], scenario)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        instruction = str(action.payload.get("simulation_instruction", ""))
        return turn_markdown(
            number,
            call_json(action.payload),
            state=state,
            sections={SIMULATION_SECTION: instruction},
        )

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        try:
            tools = self.tools(scenario)
        except ActionError:
            tools = list(SEARCH_TOOLS)
        return {
            "scenario": scenario.description,
            "tools": tool_definitions(tools),
            "simulation_instruction": simulation_instruction(scenario),
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "markdown"
