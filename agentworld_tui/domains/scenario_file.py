"""A starting point read from a file: a plain state, a scenario, or a tool list.

Used by ``agentworld predict --state FILE`` and by the panes' "open" and "paste" actions,
so a file means the same thing everywhere:

- ``.toml``: a ``[[scenario]]`` table (the first, or the one named), or top-level scenario
  keys (``state``, ``description``, ``tools``, ``instruction``...), as in
  prompts/<domain>/scenarios.toml;
- ``.json``: a tool list (a list of definitions, ``{"tools": [...]}``, or an MCP server's
  saved ``tools/list`` response), or a scenario object (``{"state": ..., ...}``);
- anything else, and JSON that is neither: the state itself, as text.

Pasted text has no name: it is read as TOML when it starts with ``[[scenario]]``, as JSON
when it starts with a bracket, else as the state.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path
from typing import Any

from agentworld_tui.domains.json_schema import read_json
from agentworld_tui.domains.tool_call import ToolListError, looks_like_tool_list, tools_from_data
from agentworld_tui.world.domain import Scenario

_SCENARIO_KEYS = ("name", "title", "description", "state")
MAX_STATE_BYTES = 5_000_000


class ScenarioFileError(ValueError):
    """A file that cannot be used as a starting point; the message says why."""


def _from_table(table: dict[str, Any], default_name: str) -> Scenario:
    extras = {k: v for k, v in table.items() if k not in (*_SCENARIO_KEYS, "extras")}
    if isinstance(table.get("extras"), dict):
        extras = {**table["extras"], **extras}
    if "tools" in extras:
        try:
            extras["tools"] = kept_tools(extras["tools"])
        except ToolListError as exc:
            raise ScenarioFileError(f"its tool list is unusable: {exc}") from None
    name = str(table.get("name") or default_name)
    return Scenario(
        name=name,
        title=str(table.get("title") or name),
        description=str(table.get("description") or ""),
        state=str(table.get("state") or ""),
        extras=extras,
    )


def scenario_from_text(
    text: str, suffix: str = "", name: str = "custom", pick: str = ""
) -> Scenario:
    """A scenario from a file's text; ``suffix`` (".toml", ".json"...) says how to read it,
    ``pick`` names one ``[[scenario]]`` of several."""
    suffix = suffix.lower() or _guess_suffix(text)
    if suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioFileError(f"not valid TOML: {exc}") from None
        tables = data.get("scenario")
        if isinstance(tables, list):
            usable = [t for t in tables if isinstance(t, dict)]
            if not usable:
                raise ScenarioFileError("its [[scenario]] list is empty")
            if pick:
                chosen = [t for t in usable if t.get("name") == pick]
                if not chosen:
                    names = ", ".join(str(t.get("name", "?")) for t in usable)
                    raise ScenarioFileError(f"no scenario named {pick!r}; it has: {names}")
                return _from_table(chosen[0], name)
            return _from_table(usable[0], name)
        if isinstance(tables, dict):
            return _from_table(tables, name)
        if not data:
            raise ScenarioFileError("the file holds no scenario keys")
        return _from_table(data, name)
    if suffix == ".json":
        parsed: Any = None
        with contextlib.suppress(json.JSONDecodeError):
            parsed = read_json(text)
        if parsed is not None and looks_like_tool_list(parsed):
            try:
                tools = kept_tools(parsed)
            except ToolListError as exc:
                raise ScenarioFileError(str(exc)) from None
            return Scenario(name, "Tool list", state="", extras={"tools": tools})
        if isinstance(parsed, dict) and ("state" in parsed or "extras" in parsed):
            return _from_table(parsed, name)
    return Scenario(name, "Custom state", state=text)


def kept_tools(data: Any) -> list[dict[str, Any]]:
    """A tool list as a scenario keeps it: each tool in the MCP spelling, with the MCP
    annotations its definition gives (routing rules read them; the world model's prompt
    leaves them out). Raises ToolListError."""
    tools = tools_from_data(data)
    hints: dict[str, dict[str, Any]] = {}
    for item in _definitions(data):
        if isinstance(item, dict) and isinstance(item.get("annotations"), dict):
            name = item.get("name")
            if isinstance(name, str):
                hints.setdefault(name.strip(), dict(item["annotations"]))
    kept: list[dict[str, Any]] = []
    for tool in tools:
        definition = tool.to_dict()
        if tool.name in hints:
            definition["annotations"] = hints[tool.name]
        kept.append(definition)
    return kept


def _definitions(data: Any) -> list[Any]:
    """The definitions of a tool list ``tools_from_data`` accepted, as they are written."""
    if isinstance(data, str):
        data = read_json(data)
    if isinstance(data, dict):
        data = data.get("result", data) if isinstance(data.get("result"), dict) else data
        data = data.get("tools", [])
    return data if isinstance(data, list) else []


def _guess_suffix(text: str) -> str:
    """For pasted text, which has no file name: TOML scenarios and JSON are recognised."""
    head = text.lstrip()
    if head.startswith("[[scenario]]"):
        return ".toml"
    if head[:1] in "[{":
        return ".json"
    return ".txt"


def load_scenario_file(path: str | Path, pick: str = "") -> Scenario:
    """The starting point a file gives; ScenarioFileError says why it cannot be used."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_STATE_BYTES:
            raise ScenarioFileError(
                f"{file} is {size:,} bytes; a starting state is at most {MAX_STATE_BYTES:,}"
            )
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"cannot read {file}: {exc}") from None
    try:
        return scenario_from_text(text, file.suffix, name=file.stem or "custom", pick=pick)
    except ScenarioFileError as exc:
        raise ScenarioFileError(f"{file}: {exc}") from None
