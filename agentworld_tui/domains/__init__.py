"""The domains the world model simulates, in tab order."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from agentworld_tui.world.domain import Domain


class DomainRegistry(Mapping[str, Domain]):
    """The domains by name, in tab order. A domain's module is imported when the domain is
    first asked for: the app shows one tab first and builds the others after its first
    frame, and the tab bar needs only the titles."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = where
        self._loaded: dict[str, Domain] = {}

    def __getitem__(self, name: str) -> Domain:
        domain = self._loaded.get(name)
        if domain is None:
            module, _, cls = self._where[name][0].partition(":")
            found = importlib.import_module(f"agentworld_tui.domains.{module}")
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


DOMAINS = DomainRegistry(
    {
        "terminal": ("terminal:TerminalDomain", "Terminal"),
        "mcp": ("mcp:McpDomain", "MCP"),
        "web": ("web:WebDomain", "Web"),
        "android": ("android:AndroidDomain", "Android"),
        "search": ("search:SearchDomain", "Search"),
        "swe": ("swe:SweDomain", "SWE"),
        "os": ("os_desktop:OsDomain", "OS"),
    }
)


def get_domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown domain {name!r}; choose from {', '.join(DOMAINS)}") from None
