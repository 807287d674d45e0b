"""A pane for any domain: write the action as the domain writes it, Ctrl+S sends it.

Domains with richer editors subclass this; the text form always works, so a new domain
gets a usable tab from its module alone.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding

from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.action import ActionError


class ActionEditor(Editor):
    BINDINGS = [
        Binding("ctrl+s", "send", "Send", tooltip="Send the action", show=False, priority=True)
    ]

    def action_send(self) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, GenericPane)), None)
        if pane is not None:
            pane.send_text()


class GenericPane(DomainPane):
    DEFAULT_CSS = """
    GenericPane ActionEditor { height: 8; border: round $primary-darken-2; }
    GenericPane ActionEditor:focus { border: round $primary; }
    """

    def compose_editor(self) -> ComposeResult:
        language = self.domain.editor_language
        editor = ActionEditor(
            language=None if language == "text" else language, id="action-editor", soft_wrap=True
        )
        editor.border_title = f"{self.domain.title} action · Ctrl+S sends"
        yield editor

    @property
    def editor(self) -> ActionEditor:
        return self.query_one("#action-editor", ActionEditor)

    def focus_editor(self) -> None:
        self.editor.focus()

    def send_text(self) -> None:
        text = self.editor.text
        try:
            action = self.domain.parse_action(text, self.session.scenario)
        except ActionError as exc:
            where = f" ({exc.field})" if exc.field else ""
            self.show_error(f"{exc}{where}")
            return
        self.send(action)
