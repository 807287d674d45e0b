"""Search: a research agent's web_search, web_extractor and dict_memory calls.

A scenario may carry a *simulation instruction* (a target query and a reference answer):
the simulated pages must then hold the reference answer's facts, which is how fictional
but self-consistent worlds are built. The instruction is captured into each action when it
is parsed and written into every turn, so it reaches the model on every request (also when
early turns are trimmed from the context) and a saved session records what each turn was
told.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from agentworld_tui.domains.tool_call import (
    Tool,
    ToolCallDomain,
    call_json,
    check_call,
    tool_call_action,
)
from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

SIMULATION_SECTION = "Simulation Instruction"

_QUERIES = {
    "type": ["array", "string"],
    "items": {"type": "string", "minLength": 1},
    "minItems": 1,
    "minLength": 1,
}
"""Either key takes one query or a list: agents written for either spelling are read."""
SEARCH_TOOLS: tuple[Tool, ...] = (
    Tool(
        "web_search",
        "Search the web. Runs each query and returns the top ten results for each: title, "
        "URL, date and a snippet. Give several queries as a batch in queries, or one in query.",
        {
            "type": "object",
            "properties": {
                "queries": {
                    **_QUERIES,
                    "description": "Search queries run as a batch, each independently.",
                },
                "query": {**_QUERIES, "description": "One search query."},
            },
            "anyOf": [{"required": ["queries"]}, {"required": ["query"]}],
            "additionalProperties": False,
        },
    ),
    Tool(
        "web_extractor",
        "Open a web page and return its main content as Markdown text.",
        {
            "type": "object",
            "properties": {
                "url": {
                    "type": ["string", "array"],
                    "minLength": 1,
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": "The page to open (or a list of pages).",
                },
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
        "A key-value notebook that persists across the agent's steps. add and update store "
        "value under key (or every entry of dict); retrieve and remove act on key (or every "
        "key in key_list); retrieve without a key, or retrieve_all, returns every entry; "
        "remove_all empties the notebook.",
        {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["add", "update", "retrieve", "remove", "retrieve_all", "remove_all"],
                },
                "key": {"type": "string", "minLength": 1},
                "value": {"description": "The value to store (text, or any JSON value)."},
                "dict": {
                    "type": "object",
                    "minProperties": 1,
                    "description": "Several entries at once: {key: value, ...}.",
                },
                "key_list": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": "Several keys at once.",
                },
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    ),
)

MEMORY_OPERATION_KEYS = ("action", "operation", "mode")
"""The names agents give dict_memory's operation; the turn keeps the one sent."""
_MEMORY_OPERATIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    "add": (("key", "value"), ("dict",)),
    "update": (("key", "value"), ("dict",)),
    "retrieve": ((), ("key",), ("key_list",)),
    "remove": (("key",), ("key_list",)),
    "retrieve_all": ((),),
    "remove_all": ((),),
    "key_list": ((),),
    "dict": ((),),
}
"""For each operation, the sets of arguments it may take (exactly one of them). key_list and
dict are read as operations too (list the keys, show the notebook), where an agent names
the operation after what it returns."""


def _forms(forms: tuple[tuple[str, ...], ...]) -> str:
    written = [" and ".join(f) if f else "nothing" for f in forms]
    return ", or ".join(written)


def check_memory_call(arguments: dict[str, Any]) -> dict[str, Any]:
    """dict_memory's arguments with the operation under ``action``, for the schema check;
    ActionError when the operation and its arguments do not go together."""
    given = [k for k in MEMORY_OPERATION_KEYS if k in arguments]
    if len(given) > 1:
        raise ActionError(
            f"dict_memory names its operation twice ({' and '.join(given)})",
            field=f"arguments.{given[1]}",
        )
    operations = ", ".join(_MEMORY_OPERATIONS)
    if not given:
        raise ActionError(
            f"dict_memory needs action: one of {operations}", field="arguments.action"
        )
    key = given[0]
    rest = {k: v for k, v in arguments.items() if k != key}
    operation = arguments[key]
    if not isinstance(operation, str) or operation not in _MEMORY_OPERATIONS:
        raise ActionError(
            f"dict_memory {key} must be one of {operations}; got {json.dumps(operation)[:40]}",
            field=f"arguments.{key}",
        )
    forms = _MEMORY_OPERATIONS[operation]
    if set(rest) not in [set(f) for f in forms]:
        fitting = [f for f in forms if set(rest) <= set(f)]
        if fitting:
            needs = [[k for k in f if k not in rest] for f in fitting]
            first = needs[0][0]
            message = f"dict_memory {operation} needs " + ", or ".join(
                " and ".join(n) for n in needs
            )
            if len(forms) > len(fitting):
                message += f" (it takes {_forms(forms)})"
        else:
            known = {k for f in forms for k in f}
            first = next((k for k in rest if k not in known), next(iter(rest)))
            names = list(rest)
            listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            message = f"dict_memory {operation} takes {_forms(forms)}, not {listed}"
        raise ActionError(message, field=f"arguments.{first}")
    if operation in ("key_list", "dict"):
        return {"action": "retrieve_all"}
    return {"action": operation, **rest}


def _check_search(arguments: dict[str, Any]) -> None:
    if "queries" in arguments and "query" in arguments:
        raise ActionError(
            "web_search takes queries (a batch) or query (one), not both",
            field="arguments.query",
        )
    if "queries" not in arguments and "query" not in arguments:
        raise ActionError(
            "web_search needs queries (a list of searches) or query (one search)",
            field="arguments.queries",
        )


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


class SearchDomain(ToolCallDomain):
    name = "search"
    title = "Search"
    lexer = "markdown"
    replaces_state = False
    pane = "agentworld_tui.ui.panes.search:SearchPane"
    usual_tools = SEARCH_TOOLS

    def call_action(self, call: dict[str, Any], scenario: Scenario) -> Action:
        """The usual tools' calls get web_search's and dict_memory's own rules too; the
        action carries the scenario's simulation instruction."""
        if self.own_tools(scenario) is None:
            args = call["arguments"]
            if call["name"] == "web_search":
                _check_search(args)
            elif call["name"] == "dict_memory":
                args = check_memory_call(args)
            check_call({"name": call["name"], "arguments": args}, list(SEARCH_TOOLS))
        else:
            super().call_action(call, scenario)
        instruction = simulation_instruction(scenario)
        extra = {"simulation_instruction": instruction} if instruction else {}
        return tool_call_action(self.name, call, **extra)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        instruction = str(action.payload.get("simulation_instruction", ""))
        return turn_markdown(
            number,
            call_json(action.payload),
            state=state,
            sections={SIMULATION_SECTION: instruction},
        )

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {
            **super().prompt_values(scenario),
            "simulation_instruction": simulation_instruction(scenario),
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "markdown"
