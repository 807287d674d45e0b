"""What an agent receives for an observation: an MCP tool result.

The observation is the tool's output as the world model predicted it, handed over as it
is (never the reasoning). When that output is itself an MCP result, a ``{"content": [...],
"isError": ...}`` object or a whole JSON-RPC answer, it is passed as such: a predicted
error result stays an error result, a predicted protocol error stays a protocol error.
A tool that declares an output schema gets a JSON object observation as its structured
content too, as real servers send it; an observation that does not fit that schema is the
error result a real server gives for output that breaks its own schema (clients refuse a
result without the structured content they were promised).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from agentworld_tui.domains.json_schema import read_json

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
    structured: dict[str, Any] | None = None
    if tool is not None and tool.output_schema is not None:
        problem = _output_problem(tool.output_schema, data)
        if problem:
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text=f"Output validation error: {problem}"),
                    types.TextContent(type="text", text=observation),
                ],
                is_error=True,
            )
        structured = data
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=observation)],
        structured_content=structured,
        is_error=False,
    )


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


def _output_problem(schema: dict[str, Any], data: dict[str, Any] | None) -> str:
    """Why ``data`` is not the structured content ``schema`` asks for ("" when it is)."""
    if data is None:
        return "the tool declares an output schema but the result is not a JSON object"
    from jsonschema.validators import (  # type: ignore[import-untyped]
        Draft202012Validator,
        validator_for,
    )

    try:
        validator = validator_for(schema, default=Draft202012Validator)(schema)
        error = next(iter(validator.iter_errors(data)), None)
    except Exception:  # a schema it cannot check against: the client checks it if it can
        return ""
    if error is None:
        return ""
    where = ".".join(str(p) for p in error.absolute_path) or "the result"
    return f"{where}: {error.message}"


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
