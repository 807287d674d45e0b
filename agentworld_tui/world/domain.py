"""What every domain provides; the implementations live in ``agentworld_tui.domains``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentworld_tui.world.action import Action
from agentworld_tui.world.tool import Tool


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


@runtime_checkable
class Domain(Protocol):
    """One kind of environment the world model simulates: all that every front-end (the
    app, ``predict``, export, the MCP server, the environments, judging) needs of it.
    ``agentworld_tui.domains.base.DomainBase`` gives each member a default."""

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

    @property
    def pane(self) -> str | None:
        """The app's tab for it, "package.module:Class" of a pane the app imports; None for
        the generic pane (an editor in ``editor_language``). Named, never imported here:
        domains know no UI."""
        ...

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """Validate an action as the user wrote it; raises ActionError with the reason."""
        ...

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """Validate an action given as its JSON value (what ``parse_action`` reads from JSON
        text: a keystroke list, a tool call object, a phone action), as a pane builds it or
        an agent hands it over; raises ActionError with the reason."""
        ...

    def tools(self, scenario: Scenario) -> list[Tool]:
        """The tools an agent acting here is offered (the MCP server, the environments,
        rollouts); raises ActionError where the scenario's own tool list is unusable."""
        ...

    def action_for_tool(self, name: str, arguments: object, scenario: Scenario) -> Action:
        """The action a call of one of ``tools`` stands for; raises ActionError, with the
        messages the app gives, when the call is not one the domain accepts."""
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
        self._sources: list[Callable[[], Iterable[tuple[str, str]]]] = []

    def register(self, name: str, where: str, title: str = "") -> None:
        """Add a domain: ``where`` is "module:Class", imported when the domain is first
        asked for ("package.module:Class"; a leading dot means in agentworld_tui.domains).
        Without a ``title``, the tab's is the domain's own (imported when asked for)."""
        self._where[name] = (where, title)
        self._loaded.pop(name, None)

    def discover(self, source: Callable[[], Iterable[tuple[str, str]]]) -> None:
        """Add the domains ``source`` finds, ``(name, "module:Class")`` pairs, after those
        registered already; it runs once, the first time the registry is read, so that
        finding them costs nothing to a program that never asks."""
        self._sources.append(source)

    def unregister(self, name: str) -> None:
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def _found(self) -> dict[str, tuple[str, str]]:
        while self._sources:
            for name, where in self._sources.pop(0)():
                self._where.setdefault(name, (where, ""))
        return self._where

    def __getitem__(self, name: str) -> Domain:
        domain = self._loaded.get(name)
        if domain is None:
            module, _, cls = self._found()[name][0].partition(":")
            if module.startswith("."):
                module = f"agentworld_tui.domains{module}"
            found = importlib.import_module(module)
            domain = self._loaded[name] = getattr(found, cls)()
        return domain

    def __contains__(self, name: object) -> bool:
        return name in self._found()  # without importing the domain

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())

    def title(self, name: str) -> str:
        """The tab's title, without importing the domain where it was registered with one."""
        return self._found()[name][1] or self[name].title


DOMAINS = DomainRegistry()
"""Every domain by name, in tab order (``agentworld_tui.domains`` registers the shipped
ones; a plug-in or a test registers its own)."""


def get_domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown domain {name!r}; choose from {', '.join(DOMAINS)}") from None
