"""Reality twins: the real counterparts of simulated environments, and how far a
prediction is from what reality answered.

Below the front-ends, beside the simulator: it knows actions and domains, never a
front-end. ``TwinSpec`` says what twin to start (every front-end builds one) and starts
it; ``make_twin`` gives the twin of a domain; ``TwinRunner`` is how every front-end drives
one; ``divergence`` compares a prediction with reality; ``episode_figures`` sums up an
episode. Shadow mode, which runs a twin beside the world model turn by turn, is the
simulator's (``simulator.shadow``). ``routing`` decides which calls reach reality,
``traces`` keeps what reality answered, and ``grounding`` shows the world model similar
real answers.
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
from agentworld_tui.reality.spec import (
    DELIVER_SIDES,
    TWIN_DOMAINS,
    Deliver,
    TwinSpec,
    TwinStartError,
    has_twin,
    make_twin,
)
from agentworld_tui.reality.twin import Twin, TwinRunner

__all__ = [
    "DELIVER_SIDES",
    "THRESHOLD",
    "TWIN_DOMAINS",
    "BackendProbe",
    "CheckResult",
    "Deliver",
    "Divergence",
    "EpisodeFigures",
    "RealObservation",
    "RunFigures",
    "Sandbox",
    "SandboxError",
    "SandboxOptions",
    "Twin",
    "TwinRunner",
    "TwinSpec",
    "TwinStartError",
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
