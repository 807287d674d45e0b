"""The simulation instruction of a Search tab: a target query and the reference answer
whose facts the simulated web must hold (a fictional but self-consistent world)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label

from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.ui.widgets.field import Field


class SimulationForm(Vertical):
    DEFAULT_CSS = """
    SimulationForm { height: 12; border: round $accent; padding: 0 1; }
    SimulationForm #target-query { height: 1; border: none; padding: 0; }
    SimulationForm #reference-answer { height: 1fr; }
    SimulationForm #simulation-buttons { height: 1; }
    SimulationForm #simulation-buttons Button { margin: 0 1 0 0; width: auto; min-width: 6; }
    """
    BINDINGS = [Binding("escape", "close", "Close", show=False, priority=True)]

    class Applied(Message):
        def __init__(self, target_query: str, reference_answer: str) -> None:
            super().__init__()
            self.target_query = target_query
            self.reference_answer = reference_answer

    class Closed(Message):
        pass

    def compose(self) -> ComposeResult:
        self.border_title = "Simulation instruction · sent with every turn from the next one"
        yield Label("Target query:")
        yield Field(placeholder="the question the simulated web should answer", id="target-query")
        yield Label("Reference answer (its facts must hold in every result and page):")
        yield Editor(id="reference-answer", soft_wrap=True)
        with Horizontal(id="simulation-buttons"):
            yield Button("Apply", id="simulation-apply", compact=True, variant="primary")
            yield Button("Remove", id="simulation-remove", compact=True)
            yield Button("Cancel", id="simulation-cancel", compact=True)

    def open(self, target_query: str, reference_answer: str) -> None:
        self.query_one("#target-query", Input).value = target_query
        self.query_one("#reference-answer", Editor).text = reference_answer
        self.display = True
        self.query_one("#target-query", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#reference-answer", Editor).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "simulation-apply":
            query = self.query_one("#target-query", Input).value
            answer = self.query_one("#reference-answer", Editor).text
            self.post_message(self.Applied(query, answer))
        elif event.button.id == "simulation-remove":
            self.post_message(self.Applied("", ""))
        else:
            self.action_close()

    def action_close(self) -> None:
        self.display = False
        self.post_message(self.Closed())
