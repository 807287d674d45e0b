"""What every domain provides; the implementations live in ``agentworld_tui.domains``."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
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
    replaces_state: bool
    """Whether each observation is the whole next state (a page, a phone screen, a desktop
    tree) that replaces the last, rather than output that adds to it (a terminal)."""
    editor_language: str
    """The language an action is edited in ("json", "python", "text")."""

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


class DomainRegistry(Mapping[str, Domain]):
    """The domains by name, in tab order. A domain's module is imported when the domain is
    first asked for: the app shows one tab first and builds the others after its first
    frame, and the tab bar needs only the titles."""

    def __init__(self) -> None:
        self._where: dict[str, tuple[str, str]] = {}
        self._loaded: dict[str, Domain] = {}

    def register(self, name: str, where: str, title: str) -> None:
        """Add a domain: ``where`` is "module:Class", imported when the domain is first
        asked for ("package.module:Class"; a leading dot means in agentworld_tui.domains)."""
        self._where[name] = (where, title)
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __getitem__(self, name: str) -> Domain:
        domain = self._loaded.get(name)
        if domain is None:
            module, _, cls = self._where[name][0].partition(":")
            if module.startswith("."):
                module = f"agentworld_tui.domains{module}"
            found = importlib.import_module(module)
            domain = self._loaded[name] = getattr(found, cls)()
        return domain

    def __contains__(self, name: object) -> bool:
        return name in self._where  # without importing the domain

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def title(self, name: str) -> str:
        """The tab's title, without importing the domain."""
        return self._where[name][1]


DOMAINS = DomainRegistry()
"""Every domain by name, in tab order (``agentworld_tui.domains`` registers the shipped
ones; a plug-in or a test registers its own)."""


def get_domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown domain {name!r}; choose from {', '.join(DOMAINS)}") from None
