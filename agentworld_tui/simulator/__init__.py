"""The simulator service that every front-end drives: no UI, no command line.

``Simulator`` runs turns on one engine for many sessions; ``TurnRun`` is one turn on its
way, taken as ``TurnUpdate`` batches on the session's own thread. ``shadow`` runs a real
twin beside a turn; ``routing`` sends each call to reality, the world model or both.
"""

from agentworld_tui.simulator.run import Home, Saver, TurnRun, TurnUpdate, home_on
from agentworld_tui.simulator.service import BUSY, Simulator, SimulatorError
from agentworld_tui.simulator.turn import generate, outcome, record, run_turn

__all__ = [
    "BUSY",
    "Home",
    "Saver",
    "Simulator",
    "SimulatorError",
    "TurnRun",
    "TurnUpdate",
    "generate",
    "home_on",
    "outcome",
    "record",
    "run_turn",
]
