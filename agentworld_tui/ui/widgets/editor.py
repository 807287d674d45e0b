"""The text editor every action, state and reference is written in: Textual's TextArea,
with select-all and clear on keys the app does not take (TextArea's own select-all, F7,
is the branches key)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import TextArea


class Editor(TextArea):
    BINDINGS = [
        Binding("ctrl+a", "select_all", "Select all", tooltip="Select all the text", show=False),
        Binding("ctrl+l", "clear", "Clear", tooltip="Clear the editor", show=False),
    ]

    def action_clear(self) -> None:
        """Empty the editor (Ctrl+Z brings the text back)."""
        self.select_all()
        self.delete(self.selection.start, self.selection.end)
