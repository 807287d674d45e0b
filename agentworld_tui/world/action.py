"""An agent's action, as a domain validated it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ActionError(ValueError):
    """A bad action: the message says what is wrong, for display next to the field."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Action:
    """A validated action.

    ``payload`` is JSON-able and is what the domain writes into the turn; ``label`` is a
    short human summary for lists and headings.
    """

    domain: str
    payload: Any
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "payload": self.payload, "label": self.label}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Action:
        return cls(str(data["domain"]), data["payload"], str(data.get("label", "")))
