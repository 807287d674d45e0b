"""The text editor every action, state and reference is written in: Textual's TextArea,
with select-all and clear on keys the app does not take (TextArea's own select-all, F7,
is the branches key). Text it is given (a state from a file, an agent's observation) is
sanitized as it comes in."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import TextArea

from agentworld_tui.world.sanitize import sanitize


class Editor(TextArea):
    BINDINGS = [
        Binding("ctrl+a", "select_all", "Select all", tooltip="Select all the text", show=False),
        Binding("ctrl+l", "clear", "Clear", tooltip="Clear the editor", show=False),
    ]

    def __init__(self, text: str = "", **kwargs: Any) -> None:
        super().__init__(sanitize(text), **kwargs)

    def load_text(self, text: str) -> None:
        """The ``text`` property's setter comes here too."""
        super().load_text(sanitize(text))

    def action_clear(self) -> None:
        """Empty the editor (Ctrl+Z brings the text back)."""
        self.select_all()
        self.delete(self.selection.start, self.selection.end)
