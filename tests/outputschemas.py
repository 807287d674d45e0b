"""Tools that declare an output schema, in the shapes real servers use: the reference
filesystem server's (every tool's result is ``{"content": <text>}``) and the reference
"everything" server's structured tool (numbers and text side by side), and the other
shapes a schema takes (nested objects, arrays of objects, enums, nullable fields, closed
objects, ``$ref``). Written here by hand; each with a conforming result a model could give
and the JSON object it stands for."""

from __future__ import annotations

from typing import Any

CONTENT = {
    "type": "object",
    "properties": {"content": {"type": "string"}},
    "required": ["content"],
    "additionalProperties": False,
}


def _tool(
    name: str, output: dict[str, Any], properties: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": {"type": "object", "properties": properties or {}},
        "outputSchema": output,
    }


TOOLS: list[dict[str, Any]] = [
    _tool("read_text_file", CONTENT, {"path": {"type": "string"}}),
    _tool("list_directory", CONTENT, {"path": {"type": "string"}}),
    _tool(
        "get_structured_content",
        {
            "type": "object",
            "properties": {
                "temperature": {"type": "number", "description": "degrees Celsius"},
                "conditions": {"type": "string"},
                "humidity": {"type": "number", "minimum": 0, "maximum": 100},
            },
            "required": ["temperature", "conditions", "humidity"],
        },
        {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"]}},
    ),
    _tool(
        "search_issues",
        {
            "type": "object",
            "properties": {
                "total": {"type": "integer", "minimum": 0},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer"},
                            "state": {"type": "string", "enum": ["open", "closed"]},
                            "assignee": {"type": ["string", "null"]},
                            "labels": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["id", "state"],
                    },
                },
                "next": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
            },
            "required": ["total", "items"],
        },
    ),
    _tool(
        "get_user",
        {
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"],
                }
            },
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "active": {"type": "boolean"},
                "home": {"$ref": "#/$defs/address"},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["name", "active", "home"],
        },
    ),
]

RESULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_text_file": ('{"content": "# Notes\\nbuy milk\\n"}', {"content": "# Notes\nbuy milk\n"}),
    "list_directory": (
        '```json\n{"content": "[FILE] a.txt\\n[DIR] src"}\n```',
        {"content": "[FILE] a.txt\n[DIR] src"},
    ),
    "get_structured_content": (
        '{"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65}',
        {"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65},
    ),
    "search_issues": (
        '{"total": 2, "items": [{"id": 7, "state": "open", "assignee": null, "labels": ["bug"]},'
        ' {"id": 9, "state": "closed"}], "next": null}',
        {
            "total": 2,
            "items": [
                {"id": 7, "state": "open", "assignee": None, "labels": ["bug"]},
                {"id": 9, "state": "closed"},
            ],
            "next": None,
        },
    ),
    "get_user": (
        'Here is the user:\n{"name": "Ada", "active": true, "home": {"city": "London"}, '
        '"tags": {"team": "core"}}',
        {"name": "Ada", "active": True, "home": {"city": "London"}, "tags": {"team": "core"}},
    ),
}
