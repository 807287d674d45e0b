"""The JSON arguments of a tool call; Ctrl+S asks the pane to check and send it."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message

from agentworld_tui.ui.widgets.editor import Editor


class ArgumentsEditor(Editor):
    BINDINGS = [
        Binding(
            "ctrl+s", "send", "Send", tooltip="Check and send the call", show=False, priority=True
        )
    ]

    DEFAULT_CSS = """
    ArgumentsEditor { height: 1fr; border: round $primary-darken-2; }
    ArgumentsEditor:focus { border: round $primary; }
    ArgumentsEditor.-invalid { border: round $error; }
    """

    class Send(Message):
        """The user asked to send the call as it stands."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("{}", language="json", id=id, soft_wrap=True, tab_behavior="indent")
        self.border_title = "Arguments (JSON) · Ctrl+S sends"

    def action_send(self) -> None:
        self.post_message(self.Send())
