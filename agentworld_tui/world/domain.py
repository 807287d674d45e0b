"""What every domain provides; the implementations live in ``agentworld_tui.domains``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agentworld_tui.world.action import Action


@dataclass(frozen=True)
class Scenario:
    """A ready starting point: the environment's first state and what it is about."""

    name: str
    title: str
    description: str = ""
    state: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    """Domain-specific values (tool definitions, a task instruction...)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "state": self.state,
            "extras": self.extras,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        return cls(
            name=str(data.get("name", "custom")),
            title=str(data.get("title", data.get("name", "Custom"))),
            description=str(data.get("description", "")),
            state=str(data.get("state", "")),
            extras=dict(data.get("extras", {})),
        )


class Domain(Protocol):
    """One kind of environment the world model simulates."""

    name: str
    """Identifier used in files, prompts/<name>/ and ``--domain``."""
    title: str
    lexer: str
    """Pygments lexer name for showing observations ("text" for none)."""

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """Validate an action as the user wrote it; raises ActionError with the reason."""
        ...

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        """The user message for one turn (Markdown, as the benchmark writes turns)."""
        ...

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        """Values for the system prompt's placeholders."""
        ...

    def observation_lexer(self, action: Action, observation: str) -> str:
        """Pygments lexer for this observation: it may depend on the action (the file an
        editor showed) or on the text (JSON or plain); ``lexer`` is the usual one."""
        ...
