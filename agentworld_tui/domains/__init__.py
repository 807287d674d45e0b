"""The domains the world model simulates, in tab order."""

from __future__ import annotations

from agentworld_tui.domains.android import AndroidDomain
from agentworld_tui.domains.mcp import McpDomain
from agentworld_tui.domains.os_desktop import OsDomain
from agentworld_tui.domains.search import SearchDomain
from agentworld_tui.domains.swe import SweDomain
from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.domains.web import WebDomain
from agentworld_tui.world.domain import Domain

DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        TerminalDomain(),
        McpDomain(),
        WebDomain(),
        AndroidDomain(),
        SearchDomain(),
        SweDomain(),
        OsDomain(),
    )
}


def get_domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown domain {name!r}; choose from {', '.join(DOMAINS)}") from None
