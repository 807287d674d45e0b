"""Terminal: keystrokes into a shell, the next screen back.

An action is a list of ``{"keystrokes": ..., "duration": seconds}`` entries. A command runs
only when its keystrokes end in a newline; tmux-style keys (``C-c``, ``Escape``...) are sent
as keystrokes of their own; empty keystrokes with a duration wait for more output; an empty
list says the task is complete. The turn writes the list as JSON, as the benchmark does.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from agentworld_tui.domains.base import DomainBase, json_value
from agentworld_tui.domains.json_schema import looks_like_json, read_json
from agentworld_tui.domains.turn import unfenced
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.tool import Tool

CONTROL_KEYS = ("C-c", "C-d", "C-z", "C-l")
KEY_NAMES = re.compile(
    r"(?:C-M-|M-C-|C-|M-|S-)(?:[A-Za-z0-9]|Space|Enter|Tab|Up|Down|Left|Right|[\[\]\\^_@?])"
    r"|Escape|Enter|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End"
    r"|PageUp|PageDown|PgUp|PgDn|PPage|NPage|IC|DC|Insert|Delete|F(?:[1-9]|1[0-2])"
)
"""Keys as tmux's send-keys names them; a line that is only one of these is that key."""
COMMAND_DURATION = 1.0
KEY_DURATION = 0.5
MAX_KEYSTROKES = 100_000
MAX_DURATION = 600.0
DURATION_KEYS = ("duration", "timeout_sec")
"""Terminus-2 agents write duration; the first Terminus wrote timeout_sec (and is_blocking)."""
COMPLETE_LABEL = "(no keystrokes: task complete)"


def is_key(keystrokes: str) -> bool:
    return KEY_NAMES.fullmatch(keystrokes) is not None


def entry(keystrokes: str, duration: float | None = None) -> dict[str, Any]:
    if duration is None:
        duration = KEY_DURATION if is_key(keystrokes) else COMMAND_DURATION
    return {"keystrokes": keystrokes, "duration": float(duration)}


def command(line: str) -> dict[str, Any]:
    """A typed line, run: its keystrokes end in a newline."""
    return entry(line if line.endswith("\n") else line + "\n")


def wait(seconds: float) -> dict[str, Any]:
    return entry("", seconds)


def _label(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return COMPLETE_LABEL
    parts = []
    for e in entries:
        keys = e["keystrokes"]
        if not keys:
            parts.append(f"(wait {e['duration']:g}s)")
        elif is_key(keys):
            parts.append(keys)
        else:
            parts.append(keys.replace("\n", " ⏎").strip())
    return "  ".join(parts)


def _duration(value: Any, i: int) -> float:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value.strip().removesuffix("s"))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError(f"entry {i}: duration must be a number of seconds", field="duration")
    if not 0 <= value <= MAX_DURATION:
        raise ActionError(
            f"entry {i}: duration must be between 0 and {MAX_DURATION:g} s", field="duration"
        )
    return float(value)


def _entry(item: Any, i: int) -> dict[str, Any]:
    """One entry in the benchmark's shape, from the shapes agents write: an object with
    keystrokes and a duration (either may be left out), or the keystrokes as bare text."""
    if isinstance(item, str):
        return entry(item)
    if not isinstance(item, dict):
        raise ActionError(f"entry {i} must be an object with keystrokes and duration")
    unknown = sorted(set(item) - {"keystrokes", "is_blocking", *DURATION_KEYS})
    if unknown:
        raise ActionError(
            f"entry {i}: unknown key {unknown[0]!r}; an entry has keystrokes and duration",
            field=unknown[0],
        )
    given = [k for k in DURATION_KEYS if k in item]
    if len(given) > 1:
        raise ActionError(f"entry {i}: give duration once, not also timeout_sec", field="duration")
    keys = item.get("keystrokes", "")
    if not isinstance(keys, str):
        raise ActionError(f"entry {i}: keystrokes must be text", field="keystrokes")
    if not keys and not given:
        raise ActionError(f"entry {i}: give keystrokes, or a duration to wait", field="keystrokes")
    duration = _duration(item[given[0]], i) if given else entry(keys)["duration"]
    if not keys and duration == 0:
        raise ActionError(f"entry {i}: empty keystrokes need a duration to wait")
    return {"keystrokes": keys, "duration": duration}


def _entries_from_json(data: Any) -> list[Any]:
    """The entry list of a JSON action: the list itself, one entry object, or a
    Terminus-2 answer (``{"analysis", "plan", "commands": [...], "task_complete"}``)."""
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        raise ActionError("a JSON action is a list of {keystrokes, duration} entries")
    if "commands" in data:
        unknown = sorted(set(data) - {"commands", "analysis", "plan", "task_complete"})
        if unknown:
            raise ActionError(f"unknown key {unknown[0]!r} beside commands", field=unknown[0])
        commands = data["commands"]
        if not isinstance(commands, list):
            raise ActionError("commands must be a list of {keystrokes, duration} entries")
        return commands
    if not {"keystrokes", *DURATION_KEYS} & set(data):
        raise ActionError(
            'a JSON object here is one entry, {"keystrokes": ..., "duration": ...}; to type '
            "JSON text, send it as the keystrokes",
            field="keystrokes",
        )
    return [data]


KEYSTROKES_TOOL = Tool(
    "send_keystrokes",
    "Type into the terminal and get the screen after. Keystrokes ending in a newline run "
    "a command; tmux key names such as C-c, C-d or Escape send that key; empty keystrokes "
    "with a duration wait for more output.",
    {
        "type": "object",
        "properties": {
            "keystrokes": {"type": "string", "description": "what to type"},
            "duration": {
                "type": "number",
                "minimum": 0,
                "description": "seconds to wait before the screen is read (default 1)",
            },
        },
        "required": ["keystrokes"],
    },
)


class TerminalDomain(DomainBase):
    name = "terminal"
    title = "Terminal"
    lexer = "text"
    replaces_state = False
    editor_language = "json"
    pane = "agentworld_tui.ui.panes.terminal:TerminalPane"

    def make_action(self, value: object, scenario: Scenario) -> Action:
        """Keystroke entries as the pane builds them, or any JSON form ``parse_action``
        reads: the entry list, one entry, a Terminus-2 answer, ``[]`` for a finished task."""
        entries = _entries_from_json(json_value(value, 2 * MAX_KEYSTROKES))
        if not entries:
            return self.task_complete()
        clean = [_entry(item, i) for i, item in enumerate(entries, 1)]
        total = sum(len(e["keystrokes"]) for e in clean)
        if total > MAX_KEYSTROKES:
            raise ActionError(
                f"the keystrokes are {total:,} characters; the limit is {MAX_KEYSTROKES:,}"
            )
        return Action(self.name, clean, _label(clean))

    def task_complete(self) -> Action:
        """The empty list: the agent sends no keystrokes and says the task is done."""
        return Action(self.name, [], COMPLETE_LABEL)

    def parse_action(self, text: str, scenario: Scenario) -> Action:
        """Keystrokes as typed (a command line, run; a key such as C-c) or as JSON: the
        entry list, one entry, a Terminus-2 answer, ``[]`` for a finished task."""
        stripped = unfenced(text.strip()).strip()
        if not stripped:
            raise ActionError("empty action: type a command, or a key such as C-c")
        if looks_like_json(stripped):
            if len(stripped) > 2 * MAX_KEYSTROKES:
                raise ActionError(f"the action is longer than {2 * MAX_KEYSTROKES:,} characters")
            try:
                data = read_json(stripped)
            except json.JSONDecodeError as exc:
                raise ActionError(
                    f"invalid JSON keystrokes: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                ) from None
            return self.make_action(data, scenario)
        if is_key(stripped):
            return self.make_action([entry(stripped)], scenario)
        line = stripped if stripped != text.strip() else text.rstrip("\n")
        return self.make_action([command(line)], scenario)

    def tools(self, scenario: Scenario) -> list[Tool]:
        return [KEYSTROKES_TOOL]

    def tool_action(self, name: str, arguments: dict[str, Any], scenario: Scenario) -> Action:
        given: dict[str, Any] = {"keystrokes": arguments.get("keystrokes", "")}
        if "duration" in arguments:
            given["duration"] = arguments["duration"]
        return self.make_action([given], scenario)
