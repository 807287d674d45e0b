"""Reality twins: the real counterparts of simulated environments, and how far a
prediction is from what reality answered.

Below the front-ends, beside the simulator: it knows actions and domains, never a
front-end. ``make_twin`` gives the twin of a domain; ``TwinRunner`` is how every front-end
drives one; ``divergence`` compares a prediction with reality; ``episode_figures`` sums up
an episode. ``routing`` decides which calls reach reality, ``traces`` keeps what reality
answered, and ``grounding`` shows the world model similar real answers.
"""

from __future__ import annotations

from agentworld_tui.reality.divergence import THRESHOLD, Divergence, divergence, mask
from agentworld_tui.reality.figures import (
    EpisodeFigures,
    RunFigures,
    episode_figures,
    run_figures,
    step_divergence,
)
from agentworld_tui.reality.observation import CheckResult, RealObservation, TwinStatus
from agentworld_tui.reality.sandbox import (
    BackendProbe,
    Sandbox,
    SandboxError,
    SandboxOptions,
    clear_probes,
    probe_backends,
)
from agentworld_tui.reality.twin import Twin, TwinRunner

TWIN_DOMAINS = ("terminal", "swe", "mcp")
"""The domains that have a twin. Web, Android, OS (and Search) have none: their real
counterparts (a browser, a phone, a desktop) are not something this project drives."""

__all__ = [
    "THRESHOLD",
    "TWIN_DOMAINS",
    "BackendProbe",
    "CheckResult",
    "Divergence",
    "EpisodeFigures",
    "RealObservation",
    "RunFigures",
    "Sandbox",
    "SandboxError",
    "SandboxOptions",
    "Twin",
    "TwinRunner",
    "TwinStatus",
    "clear_probes",
    "divergence",
    "episode_figures",
    "has_twin",
    "make_twin",
    "mask",
    "probe_backends",
    "run_figures",
    "step_divergence",
]


def has_twin(domain: str) -> bool:
    return domain in TWIN_DOMAINS


def make_twin(
    domain: str,
    *,
    sandbox: SandboxOptions | None = None,
    command: list[str] | None = None,
    url: str = "",
) -> Twin:
    """The twin of ``domain``: a terminal or SWE twin in a sandbox made by ``sandbox``
    (seeded from its folder), or an MCP twin of the server ``command`` starts or ``url``
    names. Nothing starts until ``start``; an unknown domain is a ValueError."""
    if domain == "terminal":
        from agentworld_tui.reality.terminal_twin import TerminalTwin

        return TerminalTwin(sandbox or SandboxOptions(workdir="/app"))
    if domain == "swe":
        from agentworld_tui.reality.swe_twin import SweTwin

        return SweTwin(sandbox or SandboxOptions(workdir="/testbed"))
    if domain == "mcp":
        from agentworld_tui.reality.mcp_twin import McpTwin

        return McpTwin(command=command, url=url)
    raise ValueError(f"the {domain} domain has no twin; twins exist for {', '.join(TWIN_DOMAINS)}")
