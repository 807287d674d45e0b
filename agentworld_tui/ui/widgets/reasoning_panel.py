"""The model's reasoning for the current turn, streaming, in a panel a key folds away."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from agentworld_tui.ui.widgets.line_view import LineView


class ReasoningPanel(Horizontal):
    """The panel takes its place in the pane but paints nothing itself (``backdrop``, see
    app.tcss), nor does the column that holds the title and the view: the panel's border
    is a widget of its own, one column wide. A screen update paints every widget whose
    area it touches, so a bordered panel as tall as the pane was painted again for every
    frame of the screen beside it, and a bordered frame around the view for every frame of
    the view (a third of what a frame that scrolls the view costs). Likewise the title has
    a one-row container of its own, which the view's frames below it do not touch."""

    DEFAULT_CSS = """
    ReasoningPanel {
        width: 40%;
        min-width: 30;
    }
    ReasoningPanel > #reasoning-side {
        width: 1;
    }
    ReasoningPanel #reasoning-edge {
        border-left: solid $primary-darken-2;
    }
    ReasoningPanel #reasoning-head {
        height: 1;
    }
    ReasoningPanel #reasoning-title {
        height: 1;
        background: $boost;
        padding: 0 1;
        text-style: bold;
    }
    ReasoningPanel LineView {
        color: $text-muted;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="backdrop")

    def compose(self) -> ComposeResult:
        # The border, in a column of its own: a widget is painted for every update that
        # touches its container's area, so the panel must not be its container.
        with Vertical(id="reasoning-side", classes="backdrop"):
            yield Widget(id="reasoning-edge")
        with Vertical(id="reasoning-frame", classes="backdrop"):
            with Vertical(id="reasoning-head", classes="backdrop"):  # see the class's doc
                yield Static(Text("Reasoning"), id="reasoning-title")
            yield LineView(wrap=True, id="reasoning-view")

    @property
    def view(self) -> LineView:
        return self.query_one("#reasoning-view", LineView)

    def set_title(self, text: str) -> None:
        # A one-line title: its size never depends on the text, so no screen layout.
        self.query_one("#reasoning-title", Static).update(Text(text), layout=False)
