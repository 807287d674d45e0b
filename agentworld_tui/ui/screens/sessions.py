"""Saved sessions: resume the last one on start, and a browser to open, rename, delete."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.world.library import SavedSession, SessionLibrary
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.workspace import WorkspaceError

_DIALOG_CSS = """
    {name} {{ align: center middle; }}
    {name} > Vertical {{
        width: {width}; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }}
    {name} .buttons {{ height: auto; align-horizontal: right; margin-top: 1; }}
    {name} .buttons Button {{ margin-left: 1; }}
    {name} .problem {{ color: $error; height: auto; }}
"""


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = _DIALOG_CSS.format(name="ConfirmScreen", width=70)
    BINDINGS = [Binding("escape", "no", "No"), Binding("y", "yes", "Yes")]

    def __init__(
        self, question: str, yes: str = "Yes", no: str = "No", *, default: bool = False
    ) -> None:
        """``default``: whether Enter answers yes (for a question whose yes loses nothing)."""
        super().__init__()
        self.question, self.yes_label, self.no_label = question, yes, no
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(sanitize(self.question)))
            with Horizontal(classes="buttons"):
                yield Button(self.no_label, id="no")
                yield Button(self.yes_label, id="yes", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#yes" if self.default else "#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class RenameScreen(ModalScreen[str | None]):
    DEFAULT_CSS = _DIALOG_CSS.format(name="RenameScreen", width=60)
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("New name")
            yield Field(self.current, id="name")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def describe(saved: SavedSession) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(saved.updated))
    name = one_line(saved.name)
    if saved.problem:
        return f"{name} · cannot be opened: {sanitize(saved.problem)}"
    turns = f"{saved.turns} turn{'s' * (saved.turns != 1)}"
    return f"{name} · {turns} in {saved.tabs} tab{'s' * (saved.tabs != 1)} · {when}"


class SessionBrowser(ModalScreen[Path | None]):
    """Lists saved sessions; Enter opens, r renames, d deletes (after a confirmation)."""

    DEFAULT_CSS = (
        _DIALOG_CSS.format(name="SessionBrowser", width=110)
        + "SessionBrowser DataTable { height: auto; max-height: 24; }"
    )
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("r", "rename", "Rename"),
        Binding("d", "delete", "Delete"),
    ]

    def __init__(
        self,
        library: SessionLibrary,
        *,
        on_renamed: Callable[[Path, str], None] | None = None,
    ) -> None:
        """``on_renamed(path, name)`` is told of each rename (the open session follows)."""
        super().__init__()
        self.library = library
        self.on_renamed = on_renamed
        self.saved: list[SavedSession] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Saved sessions · Enter opens · r renames · d deletes", style="bold"))
            yield DataTable(id="sessions", cursor_type="row")
            yield Static("", id="problem", classes="problem")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Name", "Turns", "Tabs", "Updated", "State")
        self.refresh_rows()
        table.focus()

    def refresh_rows(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.saved = self.library.entries()
        for saved in self.saved:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(saved.updated))
            state = Text(sanitize(saved.problem) or "ok", style="red" if saved.problem else "green")
            name = Text(one_line(saved.name))
            table.add_row(name, str(saved.turns), str(saved.tabs), when, state)
        if not self.saved:
            self.query_one("#problem", Static).update("No saved sessions yet.")

    def _current(self) -> SavedSession | None:
        table = self.query_one(DataTable)
        if not self.saved or table.cursor_row < 0:
            return None
        return self.saved[min(table.cursor_row, len(self.saved) - 1)]

    def on_data_table_row_selected(self) -> None:
        saved = self._current()
        if saved is None:
            return
        if saved.problem:
            self.query_one("#problem", Static).update(Text(sanitize(saved.problem)))
            return
        self.dismiss(saved.path)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_rename(self) -> None:
        saved = self._current()
        if saved is None or saved.problem:
            return

        def done(name: str | None) -> None:
            if not name:
                return
            try:
                renamed = self.library.rename(saved.path, name)
            except WorkspaceError as exc:
                self.query_one("#problem", Static).update(Text(sanitize(str(exc))))
            else:
                if self.on_renamed is not None:
                    self.on_renamed(saved.path, renamed.name)
            self.refresh_rows()

        self.app.push_screen(RenameScreen(sanitize(saved.name)), done)

    def action_delete(self) -> None:
        saved = self._current()
        if saved is None:
            return

        def done(yes: bool | None) -> None:
            if not yes:
                return
            try:
                self.library.delete(saved.path)
            except WorkspaceError as exc:
                self.query_one("#problem", Static).update(Text(sanitize(str(exc))))
            self.refresh_rows()

        name = one_line(saved.name)
        self.app.push_screen(ConfirmScreen(f"Delete “{name}”? This cannot be undone."), done)
