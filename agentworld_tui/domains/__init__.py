"""The domains the world model simulates, registered in tab order.

Each is a module here (and a folder of prompts in prompts/<name>/); the registry itself
lives in the world (``world.domain.DOMAINS``) so that files can name their domain without
the world importing any of them. A domain from elsewhere registers with
``DOMAINS.register(name, "package.module:Class", title)`` in a program, or, for every
program (the app and each ``agentworld`` command included), by the entry point its package
declares in the ``agentworld_tui.domains`` group: ``name = "package.module:Class"``.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentworld_tui.world.domain import DOMAINS, DomainRegistry, get_domain

__all__ = ["DOMAINS", "PLUGIN_GROUP", "SHIPPED", "DomainRegistry", "get_domain"]

PLUGIN_GROUP = "agentworld_tui.domains"

SHIPPED: tuple[tuple[str, str, str], ...] = (
    ("terminal", ".terminal:TerminalDomain", "Terminal"),
    ("mcp", ".mcp:McpDomain", "MCP"),
    ("web", ".web:WebDomain", "Web"),
    ("android", ".android:AndroidDomain", "Android"),
    ("search", ".search:SearchDomain", "Search"),
    ("swe", ".swe:SweDomain", "SWE"),
    ("os", ".os_desktop:OsDomain", "OS"),
)
for _name, _where, _title in SHIPPED:
    if _name not in DOMAINS:
        DOMAINS.register(_name, _where, _title)


def _installed() -> Iterator[tuple[str, str]]:
    """The domains installed packages declare as entry points."""
    from importlib.metadata import entry_points  # only once the registry is read

    for point in entry_points(group=PLUGIN_GROUP):
        if ":" in point.value:
            yield point.name, point.value


DOMAINS.discover(_installed)
