"""Keys and commands, generated from the bindings so it never goes stale."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80; max-width: 90%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    """
    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(title="agentworld: keys", expand=True, show_edge=False)
        table.add_column("Key", style="bold cyan", no_wrap=True)
        table.add_column("What it does")
        for key, description in self.keys:
            table.add_row(key, description)
        table.add_row("Ctrl+P", "Command palette: every action by name")
        with VerticalScroll():
            yield Static(table)
            yield Static(
                "Type an agent's action; the world model predicts what the environment "
                "shows next. Its reasoning streams on the right.",
                markup=False,
            )
