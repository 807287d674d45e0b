"""A tool an agent can call: what the MCP server lists, the environments offer and the
tool-call domains check calls against. Every domain declares its tools (``Domain.tools``),
so the type lives in the world, below the domains."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    """The JSON Schema of the tool's structured result, where it declares one."""

    def to_dict(self) -> dict[str, Any]:
        """The MCP spelling, as the system prompt shows it and scenarios store it."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.output_schema is not None:
            data["outputSchema"] = self.output_schema
        return data

    @property
    def parameters(self) -> list[str]:
        props = self.input_schema.get("properties")
        return list(props) if isinstance(props, dict) else []

    @property
    def required(self) -> list[str]:
        """The required fields; where the schema requires one of several forms (anyOf,
        oneOf), those of the first, the form a call is started from."""
        req = self.input_schema.get("required")
        if not isinstance(req, list):
            req = None
            for key in ("anyOf", "oneOf"):
                options = self.input_schema.get(key)
                first = options[0] if isinstance(options, list) and options else None
                if isinstance(first, dict) and isinstance(first.get("required"), list):
                    req = first["required"]
                    break
        return [r for r in req if isinstance(r, str)] if req else []

    def skeleton(self) -> dict[str, Any]:
        """Arguments to start editing from: each required field with an empty value."""
        props = self.input_schema.get("properties")
        props = props if isinstance(props, dict) else {}
        return {name: _empty_value(props.get(name)) for name in self.required}


def _empty_value(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return ""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"array": [], "object": {}, "integer": 0, "number": 0, "boolean": False}.get(
        str(kind), ""
    )
