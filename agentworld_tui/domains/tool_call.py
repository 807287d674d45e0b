"""Tool calls and tool lists, shared by the domains whose agents call tools (MCP, Search, SWE).

A call is written ``{"name": ..., "arguments": {...}}``. A tool list may come from a
scenario, from pasted JSON, or from an MCP server's saved ``tools/list`` answer; the
definitions are accepted in the MCP spelling (``inputSchema``) and in the two other common
ones (``input_schema``, or OpenAI's ``{"type": "function", "function": {..., "parameters"}}``).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentworld_tui.domains.base import (
    ACT,
    DomainBase,
    argument_text,
    check_tool_name,
    json_value,
)
from agentworld_tui.domains.json_schema import (
    MAX_DEPTH,
    CheckTimeout,
    read_json,
    schema_problems,
    value_problem,
)
from agentworld_tui.domains.turn import turn_markdown, unfenced
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool as Tool

MAX_CALL_CHARS = 200_000


class ToolListError(ValueError):
    """A tool list that cannot be read; the message says where and why."""


def tool_from_dict(data: Any, where: str = "tool") -> Tool:
    if not isinstance(data, dict):
        raise ToolListError(f"{where} must be an object with a name")
    if data.get("type") == "function" and isinstance(data.get("function"), dict):
        data = data["function"]
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolListError(f"{where} has no name")
    schema = data.get("inputSchema", data.get("input_schema", data.get("parameters", {})))
    if schema is None:
        schema = {}
    if not isinstance(schema, dict):
        raise ToolListError(f"tool {name!r}: its input schema must be an object")
    description = data.get("description") or ""
    output = data.get("outputSchema", data.get("output_schema"))
    if output is not None and not isinstance(output, dict):
        raise ToolListError(f"tool {name!r}: its output schema must be an object")
    return Tool(name.strip(), str(description), schema, output)


def tools_from_data(data: Any) -> list[Tool]:
    """Tools from a list of definitions, ``{"tools": [...]}``, or a JSON-RPC ``tools/list``
    response (``{"result": {"tools": [...]}}``); any of these may also come as JSON text."""
    if isinstance(data, str):
        return tools_from_json(data)
    if isinstance(data, dict):
        if isinstance(data.get("error"), dict):
            message = data["error"].get("message", "unknown error")
            raise ToolListError(f"the saved tools/list answer is an error: {message}")
        if isinstance(data.get("result"), dict):
            data = data["result"]
        if "tools" not in data:
            raise ToolListError(
                'expected a list of tools, {"tools": [...]}, or a tools/list result'
            )
        data = data["tools"]
    if not isinstance(data, list):
        raise ToolListError("the tools must be a list")
    tools = [tool_from_dict(item, f"tool {i}") for i, item in enumerate(data, 1)]
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ToolListError(f"tool {tool.name!r} is defined twice")
        seen.add(tool.name)
    return tools


def tools_from_json(text: str) -> list[Tool]:
    """Tools from pasted JSON or a saved ``tools/list`` file's text."""
    try:
        data = read_json(text)
    except json.JSONDecodeError as exc:
        raise ToolListError(
            f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return tools_from_data(data)


def load_tools(path: str | Path) -> list[Tool]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolListError(f"cannot read {path}: {exc}") from None
    try:
        return tools_from_json(text)
    except ToolListError as exc:
        raise ToolListError(f"{path}: {exc}") from None


def looks_like_tool_list(data: Any) -> bool:
    """Whether parsed JSON is meant as a tool list (rather than, say, a state)."""
    if isinstance(data, dict):
        result = data.get("result")
        if isinstance(result, dict) and "tools" in result:
            return True
        return isinstance(data.get("tools"), list)
    return isinstance(data, list) and bool(data) and all(_is_tool_definition(d) for d in data)


def _is_tool_definition(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") == "function":
        return True
    return "name" in item and any(k in item for k in ("inputSchema", "input_schema", "parameters"))


def scenario_tools(scenario: Scenario) -> list[Tool] | None:
    """The scenario's tool list, or None where it gives none (calls are then sent as is)."""
    raw = scenario.extras.get("tools")
    if raw is None:
        return None
    return tools_from_data(raw)


def with_tools(scenario: Scenario, tools: list[Tool]) -> Scenario:
    """The same scenario with its tool list replaced (a pasted or loaded list)."""
    extras = {**scenario.extras, "tools": [t.to_dict() for t in tools]}
    return replace(scenario, extras=extras)


def tool_definitions(tools: list[Tool]) -> str:
    """The definitions as the system prompt gives them: one JSON object per tool."""
    return "\n".join(json.dumps(t.to_dict(), ensure_ascii=False) for t in tools)


_TOOL_CALL_TAGS = re.compile(r"\A\s*<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>\s*)?\Z", re.S)
NAME_KEYS = ("name", "tool", "tool_name")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_WRAPPER_TYPES = ("function", "tool_use", "tool_call")
_IGNORED_KEYS = ("id", "call_id", "_meta")


def call_body(text: str) -> str:
    """The JSON of a call without what agents wrap it in: a Markdown fence, or the
    ``<tool_call>`` tags of Qwen-style chat templates."""
    stripped = unfenced(text.strip()).strip()
    tagged = _TOOL_CALL_TAGS.match(stripped)
    return unfenced(tagged.group("body")).strip() if tagged else stripped


def parse_tool_call(text: str) -> dict[str, Any]:
    """``{"name": ..., "arguments": {...}}`` from its JSON text; arguments may be omitted
    (no arguments) or given as a JSON string, as some agents write them. The other common
    spellings of a call are read too (see ``call_from_data``)."""
    stripped = call_body(text)
    if not stripped:
        raise ActionError('empty action: write {"name": ..., "arguments": {...}}', field="name")
    if len(stripped) > MAX_CALL_CHARS:
        raise ActionError(
            f"the call is {len(stripped):,} characters; the limit is {MAX_CALL_CHARS:,}"
        )
    try:
        data = read_json(stripped)
    except json.JSONDecodeError as exc:
        raise ActionError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            field="arguments",
        ) from None
    return call_from_data(data)


def _unwrapped(data: dict[str, Any]) -> dict[str, Any]:
    """The ``{name, arguments}`` part of the envelopes agents send a call in: an MCP
    ``tools/call`` request, an OpenAI tool call (``{"type": "function", "function": ...}``)."""
    if "method" in data:
        if data["method"] != "tools/call":
            raise ActionError(
                f"a JSON-RPC request is an action only as tools/call, not {data['method']!r}",
                field="method",
            )
        extra = sorted(set(data) - {"jsonrpc", "id", "method", "params"})
        if extra:
            raise ActionError(
                f"unexpected key {extra[0]!r} in the tools/call request", field=extra[0]
            )
        params = data.get("params")
        if not isinstance(params, dict):
            raise ActionError(
                "the tools/call request needs params: {name, arguments}", field="params"
            )
        return params
    if isinstance(data.get("function"), dict):
        extra = sorted(set(data) - {"function", "type", "id", "index"})
        if extra:
            raise ActionError(f"unexpected key {extra[0]!r} beside function", field=extra[0])
        return dict(data["function"])
    return data


def call_from_data(data: Any) -> dict[str, Any]:
    """A call from parsed JSON: ``{"name", "arguments"}``, also with the arguments under
    ``parameters``/``args``/``input`` or the name under ``tool``/``tool_name``, as an MCP
    ``tools/call`` request, an OpenAI or Anthropic tool call, or a list of one call."""
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        if len(data) > 1:
            raise ActionError(f"one tool call per turn; the list holds {len(data)} calls")
        data = data[0]
    if not isinstance(data, dict):
        raise ActionError('a tool call is a JSON object: {"name": ..., "arguments": {...}}')
    data = _unwrapped(data)
    known = {*NAME_KEYS, *ARGUMENT_KEYS, *_IGNORED_KEYS}
    if data.get("type") in _WRAPPER_TYPES:
        known.add("type")
    extra = sorted(set(data) - known)
    if extra:
        raise ActionError(
            f"unexpected key {extra[0]!r}: a tool call has only name and arguments",
            field=extra[0],
        )
    names = [k for k in NAME_KEYS if k in data]
    given = [k for k in ARGUMENT_KEYS if k in data]
    for keys, what in ((names, "name"), (given, "arguments")):
        if len(keys) > 1:
            raise ActionError(
                f"the call gives its {what} twice ({' and '.join(keys)})", field=keys[1]
            )
    name = data[names[0]] if names else None
    if not isinstance(name, str) or not name.strip():
        raise ActionError("the call needs a tool name", field="name")
    arguments = data[given[0]] if given else {}
    if isinstance(arguments, str):
        try:
            arguments = read_json(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"arguments given as text are not JSON: {exc.msg}", field="arguments"
            ) from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ActionError("arguments must be a JSON object", field="arguments")
    problem = value_problem(arguments, MAX_DEPTH - 1)
    if problem:
        raise ActionError(f"the arguments are not usable: {problem}", field="arguments")
    return {"name": name.strip(), "arguments": arguments}


def check_call(call: dict[str, Any], tools: list[Tool]) -> None:
    """Refuse a call to an unknown tool, or with arguments that break the tool's schema:
    the one check of a call's arguments, wherever it comes from."""
    tool = check_tool_name(call["name"], tools)
    try:
        problems = schema_problems(call["arguments"], tool.input_schema)
    except RecursionError:
        raise ActionError(
            f"{tool.name}: the arguments are nested too deeply to check", field="arguments"
        ) from None
    except CheckTimeout as exc:
        raise ActionError(too_costly(tool.name, exc.seconds), field="arguments") from None
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ActionError(f"{tool.name}: {first}{more}", field=first.path)


def too_costly(tool: str, seconds: float) -> str:
    """Why a call was refused whose arguments could not be checked in time."""
    return (
        f"{tool}: the arguments could not be checked within {seconds:g} s (a pattern or a "
        "uniqueness rule of its schema costs too much for them)"
    )


def call_label(call: dict[str, Any], width: int = 60) -> str:
    """``name(key=value, ...)``, cut to ``width`` characters."""
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call["arguments"].items()
    )
    label = f"{call['name']}({args})"
    return label if len(label) <= width else label[: width - 1] + "…"


def call_json(call: dict[str, Any]) -> str:
    """The call as written into a turn."""
    return json.dumps(
        {"name": call["name"], "arguments": call["arguments"]}, ensure_ascii=False, indent=2
    )


def tool_call_action(domain: str, call: dict[str, Any], **extra: Any) -> Action:
    payload = {"name": call["name"], "arguments": call["arguments"], **extra}
    return Action(domain, payload, call_label(call))


class ToolCallDomain(DomainBase):
    """A domain whose agent calls tools (MCP, Search, SWE): an action is one call,
    ``{"name": ..., "arguments": {...}}``, checked against the tools in use (the
    scenario's own list, else the domain's ``usual_tools``) by ``check_call``, so that a
    call gets the same message from the pane, ``predict``, the MCP server and the
    environments. A domain with its own rules for its usual tools adds them in
    ``call_action``."""

    editor_language = "json"
    usual_tools: tuple[Tool, ...] = ()
    """The tools where the scenario lists none; with none either, any call goes out."""
    no_tool_list = ""
    """What the system prompt says in place of the tools where there are none."""

    def own_tools(self, scenario: Scenario) -> list[Tool] | None:
        """The scenario's own tool list, None where it gives none."""
        try:
            return scenario_tools(scenario)
        except ToolListError as exc:
            raise ActionError(f"the scenario's tool list is unusable: {exc}") from None

    def listed_tools(self, scenario: Scenario) -> list[Tool] | None:
        """The tools calls are checked against (the pane's list); None where there are
        none and any well-formed call goes out as written."""
        own = self.own_tools(scenario)
        if own is not None:
            return own
        return list(self.usual_tools) if self.usual_tools else None

    def tools(self, scenario: Scenario) -> list[Tool]:
        """The listed tools; without a list, the ``act`` tool that takes a call's JSON."""
        return self.listed_tools(scenario) or [ACT]

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """A call as the pane builds it or an agent hands it over, in any spelling
        ``call_from_data`` reads."""
        call = call_from_data(json_value(value, MAX_CALL_CHARS, "the call is"))
        return self.call_action(call, scenario)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        return self.call_action(parse_tool_call(text), scenario)

    def tool_action(self, name: str, arguments: dict[str, Any], scenario: Scenario) -> Action:
        if self.listed_tools(scenario) is None:  # the act tool: a call written out
            return self.parse_action(argument_text(arguments, "action"), scenario)
        return self.make_action({"name": name, "arguments": arguments}, scenario)

    def call_action(self, call: dict[str, Any], scenario: Scenario) -> Action:
        """The action of a call read from any form, checked against the tools in use."""
        tools = self.listed_tools(scenario)
        if tools is not None:
            check_call(call, tools)
        return tool_call_action(self.name, call)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(number, call_json(action.payload), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        try:
            tools = self.listed_tools(scenario)
        except ActionError:
            tools = list(self.usual_tools)
        return {
            "scenario": scenario.description,
            "tools": tool_definitions(tools) if tools else self.no_tool_list,
        }
