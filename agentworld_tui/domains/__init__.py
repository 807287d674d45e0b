"""The domains the world model simulates, registered in tab order.

Each is a module here (and a folder of prompts in prompts/<name>/); the registry itself
lives in the world (``world.domain.DOMAINS``) so that files can name their domain without
the world importing any of them. A domain from elsewhere registers with
``DOMAINS.register(name, "package.module:Class", title)``.
"""

from __future__ import annotations

from agentworld_tui.world.domain import DOMAINS, DomainRegistry, get_domain

__all__ = ["DOMAINS", "SHIPPED", "DomainRegistry", "get_domain"]

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
