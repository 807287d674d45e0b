"""The model's reasoning for the current turn, streaming, in a panel a key folds away."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from agentworld_tui.ui.widgets.line_view import LineView


class ReasoningPanel(Vertical):
    DEFAULT_CSS = """
    ReasoningPanel {
        width: 40%;
        min-width: 30;
        border-left: solid $primary-darken-2;
    }
    ReasoningPanel > #reasoning-title {
        height: 1;
        background: $boost;
        padding: 0 1;
        text-style: bold;
    }
    ReasoningPanel > LineView {
        color: $text-muted;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text("Reasoning"), id="reasoning-title")
        yield LineView(wrap=True, id="reasoning-view")

    @property
    def view(self) -> LineView:
        return self.query_one("#reasoning-view", LineView)

    def set_title(self, text: str) -> None:
        # A one-line title: its size never depends on the text, so no screen layout.
        self.query_one("#reasoning-title", Static).update(Text(text), layout=False)
