"""SWE: shell commands and file edits in a repository, with outputs coloured by file type.

The tool list gives ``execute_bash`` and ``str_replace_editor``; the buttons start the
common calls (run a command, view, create, replace), and a file viewed is highlighted by
its extension.
"""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button

from agentworld_tui.domains.swe import EDITOR, SHELL
from agentworld_tui.ui.panes.tool_call import ToolCallPane

TEMPLATES: dict[str, tuple[str, dict[str, object]]] = {
    "shell": (SHELL, {"command": ""}),
    "view": (EDITOR, {"command": "view", "path": "/testbed/"}),
    "create": (EDITOR, {"command": "create", "path": "/testbed/", "file_text": ""}),
    "replace": (
        EDITOR,
        {"command": "str_replace", "path": "/testbed/", "old_str": "", "new_str": ""},
    ),
}


class SwePane(ToolCallPane):
    DEFAULT_CSS = """
    SwePane #templates { height: 1; }
    SwePane #templates Button { margin: 0 1 0 0; width: auto; min-width: 6; }
    """

    def compose_editor(self) -> ComposeResult:
        with Horizontal(id="templates"):
            yield Button("Shell", id="template-shell", compact=True)
            yield Button("View file", id="template-view", compact=True)
            yield Button("Create file", id="template-create", compact=True)
            yield Button("Replace text", id="template-replace", compact=True)
        yield from super().compose_editor()

    def use_template(self, key: str) -> None:
        """Fill the editor with a common call, to complete and send."""
        name, arguments = TEMPLATES[key]
        self.pick(name)
        self.arguments.text = json.dumps(arguments, ensure_ascii=False, indent=2)
        self.arguments.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id or ""
        if button.startswith("template-"):
            event.stop()
            self.use_template(button.removeprefix("template-"))
