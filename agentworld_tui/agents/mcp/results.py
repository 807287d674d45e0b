"""What an agent receives for an observation: an MCP tool result.

The observation is the tool's output as the world model predicted it, handed over as it
is (never the reasoning). When that output is itself an MCP result, a ``{"content": [...],
"isError": ...}`` object or a whole JSON-RPC answer, it is passed as such: a predicted
error result stays an error result, a predicted protocol error stays a protocol error.
A tool that declares an output schema gets its result as structured content that
conforms, with the same JSON as text beside it (as the spec asks): the JSON object is read
from the observation (also from a Markdown fence, or from text around it), and a string
where the schema wants a number or true/false is read as one. An observation that still
does not fit is told apart (``output_problem``): the server asks the model again, and
says so on the turn when it could not get a fitting one (clients refuse a result without
the structured content they were promised).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from agentworld_tui.domains.json_schema import (
    CHECK_SECONDS,
    CheckTimeout,
    checking_within,
    read_json,
    schema_problems,
)
from agentworld_tui.domains.turn import unfenced

MAX_JSON_STARTS = 50
"""Places a JSON object is looked for in an observation that is not one."""

_RESULT_KEYS = {"content", "isError", "structuredContent", "_meta"}


def observation_result(
    observation: str, tool: types.Tool | None = None
) -> types.CallToolResult | types.ErrorData:
    """The tool result for ``observation``, or the protocol error it predicts."""
    data = _json_object(observation)
    if data is not None:
        if data.get("jsonrpc") == "2.0":
            if isinstance(data.get("error"), dict):
                error = _error(data["error"])
                if error is not None:
                    return error
            if isinstance(data.get("result"), dict):
                data = data["result"]
        envelope = _envelope(data)
        if envelope is not None:
            return envelope
    if tool is not None and tool.output_schema is not None:
        structured, text, problem = structured_output(observation, tool.output_schema)
        if structured is None:
            return unfit_result(observation, problem)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=False,
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=observation)], is_error=False
    )


def real_result(
    text: str, tool: types.Tool | None = None, *, tool_error: bool = False
) -> types.CallToolResult | types.ErrorData:
    """The tool result for reality's answer (``McpTwin``'s text: the structured content
    as JSON where the real tool gave one, else its content's text), handed over as the
    real server gave it: an error result stays one, a JSON-RPC error is that protocol
    error, structured content goes as such where it fits the declared output schema.
    Text that merely looks like a result envelope stays text. An answer that does not fit
    the declared schema (a tools file that is not the real server's) is an error result
    saying so, with reality's text: a client refuses a result without the structured
    content it was promised."""
    if tool_error:
        data = _json_object(text)
        if (
            data is not None
            and data.get("jsonrpc") == "2.0"
            and isinstance(data.get("error"), dict)
        ):
            error = _error(data["error"])
            if error is not None:
                return error
        return error_result(text)
    if tool is not None and tool.output_schema is not None:
        structured, shown, problem = structured_output(text, tool.output_schema)
        if structured is None:
            why = f"The real server's result did not fit the tool's output schema: {problem}"
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text=why),
                    types.TextContent(type="text", text=text),
                ],
                is_error=True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=shown)],
            structured_content=structured,
            is_error=False,
        )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=False)


def unfit_result(observation: str, problem: str, asked: int = 1) -> types.CallToolResult:
    """The error result for an observation that does not fit the tool's output schema:
    why, then the observation as it is."""
    times = f" (asked {asked} times)" if asked > 1 else ""
    why = f"The simulated server's result did not fit the tool's output schema{times}: {problem}"
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=why),
            types.TextContent(type="text", text=observation),
        ],
        is_error=True,
    )


def output_problem(observation: str, tool: types.Tool | None) -> str:
    """Why ``observation`` cannot be the structured result ``tool`` promises ("" when it
    can, or when the tool promises none, or the observation is a result or error of its
    own)."""
    if tool is None or tool.output_schema is None:
        return ""
    data = _json_object(observation)
    if data is not None and (data.get("jsonrpc") == "2.0" or _envelope(data) is not None):
        return ""
    return structured_output(observation, tool.output_schema)[2]


def structured_output(
    observation: str, schema: dict[str, Any]
) -> tuple[dict[str, Any] | None, str, str]:
    """(the structured content, its text, "") for an observation that holds a JSON object
    fitting ``schema``, or (None, "", why not)."""
    stripped = observation.strip()
    found = _json_object(stripped) or _json_object(unfenced(stripped)) or _object_inside(stripped)
    if found is None:
        return None, "", "the result is not a JSON object"
    for candidate in (found, _coerced(found, schema)):
        problem = _schema_problem(schema, candidate)
        if not problem:
            same = candidate is found and _json_object(stripped) == candidate
            text = stripped if same else json.dumps(candidate, ensure_ascii=False)
            return candidate, text, ""
    return None, "", _schema_problem(schema, found)


def error_result(message: str) -> types.CallToolResult:
    """A tool error as a real server reports a refused call: a result with isError."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def result_record(result: types.CallToolResult | types.ErrorData) -> dict[str, Any]:
    """What the agent received, as the session file keeps it."""
    if isinstance(result, types.ErrorData):
        return {"error": result.model_dump(mode="json", exclude_none=True)}
    return {"result": result.model_dump(by_alias=True, mode="json", exclude_none=True)}


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = read_json(stripped)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _object_inside(text: str) -> dict[str, Any] | None:
    """The first JSON object in text that is more than one (prose around a result)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(MAX_JSON_STARTS):
        if start < 0:
            return None
        try:
            value, _end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError, ValueError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _coerced(value: Any, schema: Any) -> Any:
    """``value`` with the strings the schema wants as numbers or true/false read as such
    (``"12"`` for an integer), following properties and items."""
    if not isinstance(schema, dict):
        return value
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if isinstance(value, str) and "string" not in kinds:
        text = value.strip()
        if "integer" in kinds and text.lstrip("-").isdigit() and len(text) < 20:
            return int(text)
        if "number" in kinds:
            try:
                number = float(text)
            except ValueError:
                number = None
            if number is not None and number == number and abs(number) != float("inf"):
                return number
        if "boolean" in kinds and text in ("true", "false"):
            return text == "true"
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        return {k: _coerced(v, properties.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_coerced(item, schema.get("items")) for item in value]
    return value


def _schema_problem(schema: dict[str, Any], data: dict[str, Any]) -> str:
    """Why ``data`` is not the structured content ``schema`` asks for ("" when it is)."""
    try:
        with checking_within(CHECK_SECONDS):
            problems = schema_problems(data, schema, "result")
    except (CheckTimeout, RecursionError):
        return ""  # too costly to check here: the client checks it if it can
    if not problems:
        return ""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"


def _envelope(data: dict[str, Any]) -> types.CallToolResult | None:
    if not isinstance(data.get("content"), list) or not set(data) <= _RESULT_KEYS:
        return None
    try:
        return types.CallToolResult.model_validate(data, by_alias=True)
    except ValidationError:
        return None


def _error(data: dict[str, Any]) -> types.ErrorData | None:
    try:
        return types.ErrorData.model_validate(data)
    except ValidationError:
        return None
