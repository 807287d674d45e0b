"""What a simulated MCP server offers: its tools as agents see them, and the domain and
scenario whose world model answers their calls.

Tools come from a tools/list JSON (a bare list, a saved ``{"tools": [...]}`` or JSON-RPC
answer), an MCP scenario ``.toml``, a real server's listing (``capture``), or a domain's
own agent tools (``Domain.tools``). They are declared to agents exactly as given
(title, annotations, output schema and all); a schema that is not valid JSON Schema is
refused up front, naming the tool, since a client would fail on it later anyway.

A call is checked before any model time is spent on it, once: by the domain
(``Domain.action_for_tool``), whose tool-call domains validate the arguments against the tool's
input schema with the ``jsonschema`` library and whose other domains apply their own
action rules, with the messages the app and the environments give.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import mcp_types as types
from jsonschema import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import (  # type: ignore[import-untyped]
    Draft202012Validator,
    validator_for,
)
from pydantic import ValidationError

from agentworld_tui.domains import get_domain
from agentworld_tui.domains.base import shown_name
from agentworld_tui.domains.json_schema import read_json
from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file
from agentworld_tui.domains.tool_call import (
    Tool,
    ToolCallDomain,
    tool_from_dict,
)
from agentworld_tui.reality.routing import ToolInfo
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.prompts import load_scenarios

MAX_TOOLS = 1000
"""More tools than any real server lists; a longer list would not fit the system prompt."""


class ToolsetError(ValueError):
    """Tools that cannot be served; the message names the tool and the problem."""


class UnknownTool(LookupError):
    """A call of a tool the server does not list (a protocol error in MCP)."""


@dataclass(frozen=True)
class Toolset:
    """The tools served, and what simulates them."""

    domain: Domain
    scenario: Scenario
    declared: tuple[types.Tool, ...]
    """The tools as tools/list gives them to agents."""
    source: str
    """Where they came from, for messages and session names."""
    server_name: str = "agentworld"
    server_version: str = ""
    instructions: str | None = None

    def tool(self, name: str) -> types.Tool | None:
        return next((t for t in self.declared if t.name == name), None)

    def action(self, name: str, arguments: Mapping[str, Any] | None) -> Action:
        """The action a call stands for; UnknownTool for a tool not listed, ActionError
        (the message an agent is shown) for arguments the tool refuses. The arguments are
        checked once, by the domain (``Domain.action_for_tool``), with the messages the
        app and the environments give; the check is bounded in time
        (``json_schema.checking_within``)."""
        if self.tool(name) is None:
            listed = ", ".join(t.name for t in self.declared) or "none"
            raise UnknownTool(
                f"Unknown tool: {shown_name(name, quoted=False)}. The tools are: {listed}"
            )
        return self.domain.action_for_tool(name, dict(arguments or {}), self.scenario)


# -- declaring tools --------------------------------------------------------------------
def schema_problem(schema: Any, what: str = "inputSchema") -> str:
    """Why ``schema`` cannot be a tool's schema ("" when it can)."""
    if not isinstance(schema, dict):
        return f"its {what} must be a JSON object"
    if what == "inputSchema" and schema.get("type") != "object":
        return f'its {what} must have "type": "object" (MCP tools take an object of arguments)'
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "the top level"
        return f"its {what} is not valid JSON Schema at {where}: {exc.message}"
    except RecursionError:
        return f"its {what} is nested too deeply"
    return ""


def declare(raw: Mapping[str, Any], where: str) -> types.Tool:
    """One tool definition as MCP declares it, from the MCP spelling or the other common
    ones (``input_schema``, OpenAI's ``{"type": "function", "function": {...}}``)."""
    data = dict(raw)
    if data.get("type") == "function" and isinstance(data.get("function"), dict):
        function = dict(data["function"])
        data = {k: v for k, v in function.items() if k != "parameters"}
        data["inputSchema"] = function.get("parameters") or {"type": "object"}
    elif "inputSchema" not in data:
        schema = data.pop("input_schema", data.pop("parameters", None))
        data["inputSchema"] = schema if schema is not None else {"type": "object"}
    try:
        tool_from_dict(data, where)  # the app's own reading: a name, a schema object
    except ValueError as exc:
        raise ToolsetError(str(exc)) from None
    name = str(data["name"]).strip()
    data["name"] = name
    for key in ("inputSchema", "outputSchema"):
        if key in data and data[key] is not None:
            problem = schema_problem(data[key], key)
            if problem:
                raise ToolsetError(f"tool {name!r}: {problem}")
    try:
        return types.Tool.model_validate(data, by_alias=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"]) or "the definition"
        raise ToolsetError(f"tool {name!r}: {at}: {first['msg']}") from None


def declare_all(raw: Iterable[Any], source: str) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    seen: set[str] = set()
    for number, item in enumerate(raw, 1):
        if number > MAX_TOOLS:
            raise ToolsetError(f"{source}: more than {MAX_TOOLS} tools")
        if not isinstance(item, Mapping):
            raise ToolsetError(f"{source}: tool {number} must be an object with a name")
        try:
            tool = declare(item, f"tool {number}")
        except ToolsetError as exc:
            raise ToolsetError(f"{source}: {exc}") from None
        if tool.name in seen:
            raise ToolsetError(f"{source}: tool {tool.name!r} is defined twice")
        seen.add(tool.name)
        tools.append(tool)
    if not tools:
        raise ToolsetError(f"{source}: the tool list is empty")
    return tuple(tools)


def listed_tools(data: Any, source: str) -> list[Any]:
    """The tool definitions in a parsed tools/list file, as they are written."""
    if isinstance(data, dict):
        if isinstance(data.get("error"), dict):
            message = data["error"].get("message", "unknown error")
            raise ToolsetError(f"{source}: the saved tools/list answer is an error: {message}")
        if isinstance(data.get("result"), dict):
            data = data["result"]
        if "tools" not in data:
            raise ToolsetError(
                f'{source}: expected a list of tools, {{"tools": [...]}} or a tools/list answer'
            )
        data = data["tools"]
    if not isinstance(data, list):
        raise ToolsetError(f"{source}: the tools must be a list")
    return data


def _scenario_with(declared: tuple[types.Tool, ...], scenario: Scenario) -> Scenario:
    """The scenario the MCP domain's prompt is written from, with the declared tools
    (name, description, input and output schemas) as its tool list."""
    prompt_tools = [
        Tool(t.name, t.description or "", dict(t.input_schema), t.output_schema).to_dict()
        for t in declared
    ]
    return replace(scenario, extras={**scenario.extras, "tools": prompt_tools})


def from_definitions(
    raw: Iterable[Any],
    source: str,
    *,
    scenario: Scenario | None = None,
    server_name: str = "",
    server_version: str = "",
    instructions: str | None = None,
    domain: Domain | None = None,
) -> Toolset:
    """A toolset from tool definitions (a file's, a captured server's, a scenario's), served
    as they are written; the MCP domain answers unless a tool-call ``domain`` is given."""
    declared = declare_all(raw, source)
    base = scenario or Scenario("tools", f"Tools from {source}")
    return Toolset(
        domain or get_domain("mcp"),
        _scenario_with(declared, base),
        declared,
        source,
        server_name=server_name or "agentworld",
        server_version=server_version,
        instructions=instructions,
    )


def from_file(path: str | Path, pick: str = "") -> Toolset:
    """Tools from a tools/list JSON file or an MCP scenario ``.toml``."""
    file = Path(path)
    where = str(file)
    if file.suffix.lower() == ".toml":
        try:
            scenario = load_scenario_file(file, pick)
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (ScenarioFileError, OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ToolsetError(str(exc)) from None
        raw = _toml_tools(data, scenario)
        if raw is None:
            raise ToolsetError(f"{where}: the scenario has no tools")
        return from_definitions(raw, where, scenario=scenario)
    try:
        if file.stat().st_size > 20_000_000:
            raise ToolsetError(f"{where}: a tool list is at most 20,000,000 bytes")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolsetError(f"cannot read {where}: {exc}") from None
    try:
        data = read_json(text)
    except json.JSONDecodeError as exc:
        raise ToolsetError(
            f"{where}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return from_definitions(listed_tools(data, where), where, scenario=Scenario(file.stem, where))


def _toml_tools(data: dict[str, Any], scenario: Scenario) -> list[Any] | None:
    tables = data.get("scenario")
    if isinstance(tables, list):
        chosen = [t for t in tables if isinstance(t, dict) and t.get("name") == scenario.name]
        table = chosen[0] if chosen else next((t for t in tables if isinstance(t, dict)), {})
    elif isinstance(tables, dict):
        table = tables
    else:
        table = data
    raw = table.get("tools")
    if isinstance(raw, list):
        return raw
    given = scenario.extras.get("tools")
    return given if isinstance(given, list) else None


def for_domain(name: str, scenario: str = "") -> Toolset:
    """A domain as an MCP server: its agent tools, from a shipped scenario (by name, the
    first by default) or a scenario file."""
    try:
        domain = get_domain(name)
    except KeyError as exc:
        raise ToolsetError(str(exc.args[0])) from None
    return for_scenario(domain, _pick_scenario(domain.name, scenario))


def for_scenario(domain: Domain, scenario: Scenario) -> Toolset:
    """The tools an agent acting in ``domain`` from ``scenario`` is offered (a tab of the
    app served as it is). A tool-call domain's scenario that lists tools has them served as
    written (titles, annotations and output schemas kept); one that lists none serves the
    domain's usual tools, and a domain without usual tools cannot be served without a list."""
    if isinstance(domain, ToolCallDomain):
        raw = scenario.extras.get("tools")
        if isinstance(raw, list):
            source = f"{domain.name} scenario {scenario.name}"
            return from_definitions(raw, source, scenario=scenario, domain=domain)
        if not domain.usual_tools:
            raise ToolsetError(
                f"the {scenario.name!r} scenario has no tools: give a tools file, or a "
                "scenario with tools"
            )
    try:
        tools = domain.tools(scenario)
    except ActionError as exc:
        raise ToolsetError(f"the {scenario.name!r} scenario: {exc}") from None
    declared = declare_all((t.to_dict() for t in tools), f"the {domain.name} tools")
    return Toolset(
        domain,
        scenario,
        declared,
        f"{domain.name} scenario {scenario.name}",
        server_name=f"agentworld-{domain.name}",
    )


def _pick_scenario(domain: str, wanted: str) -> Scenario:
    if wanted and (Path(wanted).suffix.lower() in (".toml", ".json", ".txt") or "/" in wanted):
        try:
            return load_scenario_file(wanted)
        except ScenarioFileError as exc:
            raise ToolsetError(str(exc)) from None
    scenarios, _problems = load_scenarios(domain)
    if not wanted:
        return scenarios[0] if scenarios else Scenario("blank", "Blank")
    for scenario in scenarios:
        if scenario.name == wanted:
            return scenario
    names = ", ".join(s.name for s in scenarios) or "none"
    raise ToolsetError(f"no {domain} scenario named {wanted!r}; the scenarios are: {names}")


def tool_infos(toolset: Toolset) -> tuple[ToolInfo, ...]:
    """The tools as routing rules see them: their names and MCP annotations, as
    declared (a captured server's, a tools file's)."""
    return tuple(
        ToolInfo.from_definition(t.model_dump(by_alias=True, mode="json", exclude_none=True))
        for t in toolset.declared
    )
