"""Terminal: keystrokes into a shell, the next screen back.

An action is a list of ``{"keystrokes": ..., "duration": seconds}`` entries. A command runs
only when its keystrokes end in a newline; tmux-style keys (``C-c``...) are sent as
keystrokes of their own; empty keystrokes with a duration wait for more output.
"""

from __future__ import annotations

import json
from typing import Any

from agentworld_tui.domains.turn import turn_markdown
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario

CONTROL_KEYS = ("C-c", "C-d", "C-z", "C-l")
COMMAND_DURATION = 1.0
KEY_DURATION = 0.5
MAX_KEYSTROKES = 100_000
MAX_DURATION = 600.0


def entry(keystrokes: str, duration: float | None = None) -> dict[str, Any]:
    if duration is None:
        duration = KEY_DURATION if keystrokes in CONTROL_KEYS else COMMAND_DURATION
    return {"keystrokes": keystrokes, "duration": float(duration)}


def command(line: str) -> dict[str, Any]:
    """A typed line, run: its keystrokes end in a newline."""
    return entry(line if line.endswith("\n") else line + "\n")


def wait(seconds: float) -> dict[str, Any]:
    return entry("", seconds)


def _label(entries: list[dict[str, Any]]) -> str:
    parts = []
    for e in entries:
        keys = e["keystrokes"]
        if not keys:
            parts.append(f"(wait {e['duration']:g}s)")
        elif keys in CONTROL_KEYS:
            parts.append(keys)
        else:
            parts.append(keys.replace("\n", " ⏎").strip())
    return "  ".join(parts)


class TerminalDomain:
    name = "terminal"
    title = "Terminal"
    lexer = "text"

    def make_action(self, entries: list[dict[str, Any]]) -> Action:
        """Validate keystroke entries built by the pane or parsed from JSON."""
        if not isinstance(entries, list) or not entries:
            raise ActionError("nothing to send: type a command, or press a control key")
        clean: list[dict[str, Any]] = []
        total = 0
        for i, item in enumerate(entries, 1):
            if not isinstance(item, dict):
                raise ActionError(f"entry {i} must be an object with keystrokes and duration")
            keys = item.get("keystrokes")
            duration = item.get("duration", COMMAND_DURATION)
            if not isinstance(keys, str):
                raise ActionError(f"entry {i}: keystrokes must be text", field="keystrokes")
            if isinstance(duration, bool) or not isinstance(duration, int | float):
                raise ActionError(
                    f"entry {i}: duration must be a number of seconds", field="duration"
                )
            if not 0 <= duration <= MAX_DURATION:
                raise ActionError(
                    f"entry {i}: duration must be between 0 and {MAX_DURATION:g} s",
                    field="duration",
                )
            if not keys and duration == 0:
                raise ActionError(f"entry {i}: empty keystrokes need a duration to wait")
            total += len(keys)
            clean.append({"keystrokes": keys, "duration": float(duration)})
        if total > MAX_KEYSTROKES:
            raise ActionError(
                f"the keystrokes are {total:,} characters; the limit is {MAX_KEYSTROKES:,}"
            )
        return Action(self.name, clean, _label(clean))

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """Keystrokes as typed: a command line (run), a control key, or the JSON list."""
        stripped = text.strip()
        if not stripped:
            raise ActionError("empty action: type a command, or a key such as C-c")
        if stripped.startswith("["):
            try:
                data = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise ActionError(
                    f"invalid JSON keystrokes: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                ) from exc
            return self.make_action(data)
        if stripped in CONTROL_KEYS:
            return self.make_action([entry(stripped)])
        return self.make_action([command(text.rstrip("\n"))])

    def render_turn(self, number: int, action: Action, state: str | None) -> str:
        return turn_markdown(number, json.dumps(action.payload, ensure_ascii=False), state=state)

    def prompt_values(self, scenario: Scenario) -> dict[str, str]:
        return {"scenario": scenario.description}

    def observation_lexer(self, action: Action, observation: str) -> str:
        return self.lexer
