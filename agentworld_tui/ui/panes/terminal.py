"""Terminal: a prompt line to type keystrokes on, and the simulated screen above it.

Enter sends the line as keystrokes ending in a newline; control keys go as ``C-c`` etc.;
F5 waits for more output; F2 queues the line so several keystroke entries go as one action.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Label, Static

from agentworld_tui.domains.terminal import TerminalDomain, command, entry, wait
from agentworld_tui.ui.highlight import PROMPT, highlight_terminal
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.session import Turn


class KeystrokeInput(Field):
    """The prompt line: control keys become keystroke entries instead of editing keys."""

    BINDINGS = [
        Binding("ctrl+c", "control('C-c')", "Send C-c", show=False, priority=True),
        Binding("ctrl+d", "control('C-d')", "Send C-d", show=False, priority=True),
        Binding("ctrl+z", "control('C-z')", "Send C-z", show=False, priority=True),
        Binding("ctrl+l", "control('C-l')", "Send C-l", show=False, priority=True),
        Binding("f2", "queue_line", "Queue line", tooltip="Add the line to the next action"),
        Binding("f5", "wait", "Wait", tooltip="Send a wait action (empty keystrokes)"),
    ]

    class Control(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class QueueLine(Message):
        pass

    class Wait(Message):
        pass

    class PastedLines(Message):
        """Text of several lines was pasted: all but the last are whole commands."""

        def __init__(self, lines: list[str]) -> None:
            super().__init__()
            self.lines = lines

    def on_paste(self, event: events.Paste) -> None:
        """A paste of several lines is not cut to its first: its whole lines are queued as
        commands for the next action and the last one stays on the line to edit."""
        lines = event.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if len(lines) < 2:
            return  # one line: the Input inserts it as it does
        event.stop()
        event.prevent_default()
        head, last = [self.value + lines[0], *lines[1:-1]], lines[-1]
        self.value = last
        self.cursor_position = len(last)
        self.post_message(self.PastedLines(head))

    def action_control(self, key: str) -> None:
        self.post_message(self.Control(key))

    def action_queue_line(self) -> None:
        self.post_message(self.QueueLine())

    def action_wait(self) -> None:
        self.post_message(self.Wait())


class TerminalPane(DomainPane):
    DEFAULT_CSS = """
    TerminalPane #prompt-row { height: 1; }
    TerminalPane #prompt-row Label { width: auto; padding: 0 1; color: $success; }
    TerminalPane #prompt-row Input { border: none; height: 1; padding: 0; width: 1fr; }
    TerminalPane #queued { height: auto; color: $warning; padding: 0 1; }
    """

    domain: TerminalDomain
    echo_kept = False  # its screen echoes the command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queued: list[dict[str, Any]] = []

    def compose_editor(self) -> ComposeResult:
        yield Static(id="queued", classes="hidden")
        with Horizontal(id="prompt-row", classes="backdrop"):
            yield Label("⟩")
            yield KeystrokeInput(placeholder="type a command, Enter to run", id="keystrokes")

    @property
    def line(self) -> KeystrokeInput:
        return self.query_one("#keystrokes", KeystrokeInput)

    def focus_editor(self) -> None:
        self.line.focus()

    # -- building actions -----------------------------------------------------------------
    def _send_entries(self, entries: list[dict[str, Any]]) -> None:
        try:
            action = self.domain.make_action(self.queued + entries, self.session.scenario)
        except ActionError as exc:
            self.show_error(str(exc))
            return
        if self.send(action):
            self.queued.clear()
            self.line.value = ""
            self._show_queue()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._send_entries([command(event.value)])

    def on_keystroke_input_control(self, event: KeystrokeInput.Control) -> None:
        event.stop()
        entries = [command(self.line.value)] if self.line.value else []
        self._send_entries([*entries, entry(event.key)])

    def on_keystroke_input_wait(self, event: KeystrokeInput.Wait) -> None:
        event.stop()
        self._send_entries([wait(self.host.wait_seconds)])

    def on_keystroke_input_pasted_lines(self, event: KeystrokeInput.PastedLines) -> None:
        event.stop()
        self.queued.extend(command(line) for line in event.lines)
        self._show_queue()

    def on_keystroke_input_queue_line(self, event: KeystrokeInput.QueueLine) -> None:
        event.stop()
        self.queued.append(command(self.line.value))
        self.line.value = ""
        self._show_queue()

    def _show_queue(self) -> None:
        queued = self.query_one("#queued", Static)
        if self.queued:
            queued.update(Text(f"queued for the next action: {self._labels()}  (Enter sends)"))
        queued.set_class(not self.queued, "hidden")

    def _labels(self) -> str:
        return " · ".join(
            e["keystrokes"].rstrip("\n") or f"(wait {e['duration']:g}s)" for e in self.queued
        )

    # -- how the screen looks ---------------------------------------------------------------
    def highlight_observation(self, text: str) -> list[Text]:
        return highlight_terminal(text)

    def turn_start_line(self) -> int:
        """A bare prompt on the last line is part of the next turn: the model's output
        begins with the same prompt and the command echoed on it."""
        view = self.screen_view
        count = view.line_count
        if count and self._bare_prompt(view.line(count - 1).plain):
            return count - 1
        return count

    @staticmethod
    def _bare_prompt(line: str) -> bool:
        match = PROMPT.match(line.rstrip())
        return match is not None and not match.group("command")

    def show_echo(self, turn: Turn) -> None:
        view = self.screen_view
        start = self._turn_start[turn.number]
        payload = turn.action.payload
        if isinstance(payload, list) and all(isinstance(e, dict) for e in payload):
            typed = "  ".join(
                str(e.get("keystrokes", "")).rstrip("\n") or f"(wait {e.get('duration', 0):g}s)"
                for e in payload
            )
        else:  # an imported action in another shape
            typed = turn.action.label or str(payload)
        if start < view.line_count:
            prompt = view.line(start).copy()
            view.truncate(start)
            prompt.rstrip()
            prompt.append(" " + typed, style="dim")
            view.append_lines([prompt])
        else:
            view.append_lines([Text(f"› {typed}", style="dim")])
