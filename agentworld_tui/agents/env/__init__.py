"""The simulator as an environment for agents: Python (sync and asyncio), pools of many,
OpenEnv over HTTP and WebSockets, Gymnasium, and rollouts of a policy model.

    from agentworld_tui.agents.env import Environment, GenerationParams

    params = GenerationParams(max_tokens=4096)  # the default lets a step run to 32,768 tokens
    with Environment("terminal", engine="http://127.0.0.1:8000/v1", params=params) as env:
        first = env.reset()
        step = env.step("df -h\\n")
        print(step.observation.text, step.cost.generated_tokens)

An environment may run beside a real twin (``twin=TwinSpec("terminal", seed="~/project")``):
each step goes to the world model and the twin, the agent receives reality's answer (or
the prediction, ``deliver="sim"``), the step says how far the two were apart, and
``end_episode`` runs the check in the twin (docs/reality.md). With ``routes=`` (a rule
file, ``"default"``, or a ``RuleSet``) each step goes real, sim or shadow as the rules say;
with ``traces=`` (a ``TraceStore`` or its path) the world model is shown similar earlier
real answers; each step says where it was answered and why (``step.route``).

The OpenEnv server (``openenv_server``) and the Gymnasium adapter (``gym``) need the
``openenv`` and ``gym`` extras; nothing here imports them, Textual, or llama.cpp (which
comes in only when a local model is used).
"""

from agentworld_tui.agents.env.actions import ActionInput, ToolCall, make_action, openai_tool
from agentworld_tui.agents.env.environment import Environment
from agentworld_tui.agents.env.pool import EnvironmentPool, StepOutcome
from agentworld_tui.agents.env.results import Cost, EnvError, Observation, StepResult, TwinStep
from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy, is_transient
from agentworld_tui.agents.env.session_file import SessionFile, save_sessions
from agentworld_tui.agents.env.simulators import engine_spec, load_simulator, open_simulator
from agentworld_tui.agents.env.steps import PendingStep
from agentworld_tui.agents.env.twins import TwinBusy, TwinError, TwinSlots
from agentworld_tui.agents.schedule import (
    Decision,
    Rule,
    Schedule,
    ScheduleError,
    load_schedule,
    parse_schedule,
)
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.reality.figures import EpisodeFigures
from agentworld_tui.reality.routing import RuleSet
from agentworld_tui.reality.spec import TwinSpec
from agentworld_tui.reality.traces import TraceStore
from agentworld_tui.world.action import ActionError

__all__ = [
    "ActionError",
    "ActionInput",
    "Cost",
    "Decision",
    "EnvError",
    "Environment",
    "EnvironmentPool",
    "EpisodeFigures",
    "GenerationParams",
    "Observation",
    "PendingStep",
    "RetryPolicy",
    "RetryingEngine",
    "Rule",
    "RuleSet",
    "Schedule",
    "ScheduleError",
    "SessionFile",
    "StepOutcome",
    "StepResult",
    "ToolCall",
    "TraceStore",
    "TwinBusy",
    "TwinError",
    "TwinSlots",
    "TwinSpec",
    "TwinStep",
    "engine_spec",
    "is_transient",
    "load_schedule",
    "load_simulator",
    "make_action",
    "open_simulator",
    "openai_tool",
    "parse_schedule",
    "save_sessions",
]
