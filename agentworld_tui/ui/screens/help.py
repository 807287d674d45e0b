"""Keys and commands, generated from the bindings so it never goes stale."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static


def key_name(key: str) -> str:
    """``ctrl+pageup,alt+left`` as the help shows it: ``Ctrl+PageUp / Alt+Left``."""
    parts = []
    for one in key.split(","):
        words = [w.capitalize() if len(w) > 1 else w.upper() for w in one.split("+")]
        parts.append("+".join(words).replace("Pageup", "PageUp").replace("Pagedown", "PageDown"))
    return " / ".join(parts)


def key_table(
    bindings: Iterable[Binding | tuple[str, ...]], pane: Widget | None
) -> list[tuple[str, str]]:
    """Every key with a description: the app's, then those of the widgets of the tab on
    show (each key once)."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    sources: list[Iterable[Binding | tuple[str, ...]]] = [bindings]
    if pane is not None:
        for widget in pane.query("*"):
            sources.append(type(widget).BINDINGS)
    for group in sources:
        for binding in group:
            if not isinstance(binding, Binding) or not binding.description:
                continue
            key = key_name(binding.key)
            if key in seen:
                continue
            seen.add(key)
            rows.append((key, binding.tooltip or binding.description))
    return rows


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
