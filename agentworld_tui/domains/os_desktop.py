"""OS: a computer-use agent drives a desktop with Python code; the state is its
accessibility tree.

An action is a block of Python (pyautogui calls, app helpers, subprocess...). It is
checked to be valid Python by compiling it, and is never executed: the world model only reads
it. ``WAIT``, ``DONE`` and ``FAIL`` are accepted as the special actions computer-use agents
send. The task instruction travels with every turn, next to the action, so the model
always knows what the user asked even when early turns are trimmed from the context.

(The module is not called ``os`` so that it never shadows the standard library.)
"""

from __future__ import annotations

import re
from typing import Any

from agentworld_tui.domains.base import DomainBase, argument_text
from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool

SPECIAL_ACTIONS = ("WAIT", "DONE", "FAIL")
INSTRUCTION_SECTION = "Task Instruction"
MAX_CODE_CHARS = 50_000
_FENCE = re.compile(r"^\s*(`{3,})[\w+-]*\s*\n(?P<code>.*?)\n\s*\1\s*$", re.S)


def task_instruction(scenario: Scenario) -> str:
    return str(scenario.extras.get("instruction", scenario.extras.get("task", "")) or "").strip()


def check_code(text: str) -> str:
    """The code, without a surrounding Markdown fence, if it is valid Python."""
    fenced = _FENCE.match(text)
    code = fenced.group("code") if fenced else text
    code = code.strip("\n").rstrip()
    if not code.strip():
        raise ActionError("empty action: write Python code, or WAIT, DONE or FAIL", field="code")
    if len(code) > MAX_CODE_CHARS:
        raise ActionError(
            f"the code is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}",
            field="code",
        )
    if code.strip() in SPECIAL_ACTIONS:
        return code.strip()
    try:
        # Compiling (never running) also catches what the parser lets through, such as a
        # repeated keyword argument.
        compile(code, "<action>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno}" + (f", column {exc.offset})" if exc.offset else ")")
        message = exc.msg
        if "integer string conversion" in message:
            message = "an integer has more digits than Python reads (4,300)"
        elif "cannot contain null bytes" in message:
            message = "the code holds a NUL character"
        if exc.lineno is None:
            where = ""
        raise ActionError(f"not valid Python{where}: {message}", field="code") from None
    except (RecursionError, MemoryError):
        raise ActionError(
            "not valid Python: the code is nested too deeply to compile", field="code"
        ) from None
    except ValueError as exc:
        raise ActionError(f"not valid Python: {exc}", field="code") from None
    return code


def _label(code: str) -> str:
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    first = lines[0] if lines else code
    if len(lines) > 1:
        first += f"  (+{len(lines) - 1} lines)"
    return first if len(first) <= 60 else first[:59] + "…"


DESKTOP_TOOL = Tool(
    "run_python",
    "Run Python on the desktop (pyautogui click/moveTo/write/press/hotkey, app helpers, "
    "subprocess) and get the desktop's next accessibility tree.",
    {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the Python to run"}},
        "required": ["code"],
    },
)


class OsDomain(DomainBase):
    name = "os"
    title = "OS"
    lexer = "text"
    replaces_state = True
    editor_language = "python"
    pane = "agentworld_tui.ui.panes.os:OsPane"

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """The code as written (or WAIT, DONE, FAIL), with the scenario's task instruction."""
        clean = check_code(text)
        payload = {"code": clean}
        instruction = task_instruction(scenario)
        if instruction:
            payload["instruction"] = instruction
        return Action(self.name, payload, _label(clean))

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """The code as text, or the action's JSON form ``{"code": ...}``."""
        code = value.get("code") if isinstance(value, dict) else value
        if not isinstance(code, str):
            raise ActionError('an OS action is Python code, or {"code": "..."}', field="code")
        return self.parse_action(code, scenario)

    def tools(self, scenario: Scenario) -> list[Tool]:
        return [DESKTOP_TOOL]

    def tool_action(self, name: str, arguments: dict[str, Any], scenario: Scenario) -> Action:
        return self.parse_action(argument_text(arguments, "code"), scenario)

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(
            number,
            str(action.payload["code"]),
            action_lang="python",
            state=state,
            sections={INSTRUCTION_SECTION: str(action.payload.get("instruction", ""))},
        )

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        instruction = task_instruction(scenario)
        return {
            "scenario": scenario.description,
            "instruction": f"The user's task for the agent: {instruction}" if instruction else "",
        }

    def observation_lexer(self, action: Action, observation: str) -> str:
        return "xml" if observation.lstrip().startswith("<") else "text"
