"""Where a tool list comes from besides the scenario: a pasted list, or an MCP server's
``tools/list`` answer saved to a file. The panel reads it and hands back the tools."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Static

from agentworld_tui.domains.tool_call import Tool, ToolListError, load_tools, tools_from_json
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.ui.widgets.field import Field


class ToolSource(Vertical):
    DEFAULT_CSS = """
    ToolSource { height: 16; border: round $accent; padding: 0 1; }
    ToolSource #source-path { height: 1; border: none; padding: 0; }
    ToolSource #source-paste { height: 1fr; }
    ToolSource #source-buttons { height: 1; }
    ToolSource #source-buttons Button { margin: 0 1 0 0; width: auto; min-width: 6; }
    ToolSource #source-error { color: $error; height: auto; }
    ToolSource #source-note { color: $warning; height: auto; }
    """
    BINDINGS = [Binding("escape", "close", "Close", show=False, priority=True)]

    class Loaded(Message):
        def __init__(self, tools: list[Tool], source: str) -> None:
            super().__init__()
            self.tools = tools
            self.source = source

    class Closed(Message):
        pass

    def compose(self) -> ComposeResult:
        self.border_title = "Load tools · a tools/list file, or paste the JSON"
        yield Label("File (a saved tools/list result, or a JSON list of tools):")
        yield Field(placeholder="/path/to/tools.json, Enter loads it", id="source-path")
        yield Label("or paste the tool definitions:")
        yield Editor(language="json", id="source-paste")
        yield Static(id="source-note")
        yield Static(id="source-error")
        with Horizontal(id="source-buttons"):
            yield Button("Load file", id="source-load-file", compact=True)
            yield Button("Use pasted", id="source-use-paste", compact=True, variant="primary")
            yield Button("Cancel", id="source-cancel", compact=True)

    def open(self, note: str = "") -> None:
        self.display = True
        self.query_one("#source-note", Static).update(Text(note))
        self.show_problem("")
        self.query_one("#source-path", Input).focus()

    def show_problem(self, message: str) -> None:
        self.query_one("#source-error", Static).update(Text(message))

    def load_file(self) -> None:
        path = self.query_one("#source-path", Input).value.strip()
        if not path:
            self.show_problem("write the path of a file first")
            return
        try:
            tools = load_tools(Path(path).expanduser())
        except ToolListError as exc:
            self.show_problem(str(exc))
            return
        self.post_message(self.Loaded(tools, path))

    def use_paste(self) -> None:
        text = self.query_one("#source-paste", Editor).text
        if not text.strip():
            self.show_problem("paste a tool list first")
            return
        try:
            tools = tools_from_json(text)
        except ToolListError as exc:
            self.show_problem(str(exc))
            return
        self.post_message(self.Loaded(tools, "pasted"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.load_file()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "source-load-file":
            self.load_file()
        elif event.button.id == "source-use-paste":
            self.use_paste()
        else:
            self.action_close()

    def action_close(self) -> None:
        self.display = False
        self.post_message(self.Closed())
