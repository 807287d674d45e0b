"""A turn's output as the model wrote it: reasoning, tags and all, beside what was
extracted from it, for when the extraction left something out."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Turn


class RawOutputScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RawOutputScreen { align: center middle; }
    RawOutputScreen > Vertical {
        width: 96%; height: 92%; border: thick $primary; background: $surface; padding: 0 1;
    }
    RawOutputScreen #raw-note { height: auto; color: $warning; }
    RawOutputScreen LineView { height: 1fr; }
    """
    BINDINGS = [Binding("escape,ctrl+u,q", "dismiss", "Close")]

    def __init__(self, turn: Turn) -> None:
        super().__init__()
        self.turn = turn

    def compose(self) -> ComposeResult:
        turn = self.turn
        with Vertical():
            yield Label(Text(f"Turn {turn.number}: the model's output as generated · Esc closes"))
            note = turn.extraction or "Nothing of the answer was left out."
            yield Static(Text(sanitize(note)), id="raw-note")
            yield LineView(wrap=True, id="raw")

    def on_mount(self) -> None:
        turn = self.turn
        text = turn.raw
        if not text:  # saved before raw output was kept: what there is of it
            parts = [turn.reasoning and f"<think>{turn.reasoning}</think>", turn.observation]
            text = "\n".join(p for p in parts if p)
        self.query_one("#raw", LineView).append(sanitize(text))
