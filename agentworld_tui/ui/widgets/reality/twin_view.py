"""One twinned turn: the world model's prediction and reality's answer side by side, or the
diff between them (a key toggles), under a head line with the turn's figures.

It shows the last twinned turn of the tab (or one picked in the session summary); while a
turn runs, reality's answer appears as soon as it comes, and the prediction, which streams
into the transcript above, joins it when the turn is recorded. Everything drawn is
sanitized text, never markup."""

from __future__ import annotations

import difflib
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.ui.widgets.reality.record import STYLES, RealityRecord
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Turn

Mode = Literal["sides", "diff"]
MAX_DIFF_LINES = 2000
"""Lines of each side the diff compares; the rest is left out with a note (a diff's cost
grows faster than the text)."""
MAX_DIFF_CHARS = 200_000
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
KEY_HINT = "Shift+F10 side by side / diff · Shift+F11 summary"


def bounded_lines(text: str) -> tuple[list[str], bool]:
    """The lines a diff compares, and whether some were left out."""
    cut = len(text) > MAX_DIFF_CHARS
    lines = text[:MAX_DIFF_CHARS].splitlines()
    if len(lines) > MAX_DIFF_LINES:
        return lines[:MAX_DIFF_LINES], True
    return lines, cut


def diff_lines(predicted: str, real: str) -> list[Text]:
    """A unified diff from the prediction to reality, coloured by line kind: ``-`` only
    predicted, ``+`` only in reality."""
    before, cut_before = bounded_lines(sanitize(predicted))
    after, cut_after = bounded_lines(sanitize(real))
    lines = list(difflib.unified_diff(before, after, "predicted", "reality", lineterm="", n=2))
    shown: list[Text] = []
    for line in lines:
        text = Text(line)
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        if style:
            text.stylize(style)  # a span: LineView draws spans, not a Text's own style
        shown.append(text)
    if not lines:
        shown.append(Text("The prediction equals reality, line for line.", style="green"))
    if cut_before or cut_after:
        shown.append(
            Text(f"[only the first {MAX_DIFF_LINES:,} lines of each side are compared]", "dim")
        )
    return shown


class TwinView(Vertical):
    DEFAULT_CSS = """
    TwinView { height: 1fr; }
    TwinView #twin-head { height: auto; max-height: 3; padding: 0 1; background: $boost; }
    TwinView #twin-sides { height: 1fr; }
    TwinView .twin-side { width: 1fr; }
    TwinView .twin-title { height: 1; padding: 0 1; text-style: bold; color: $text-muted; }
    TwinView #twin-diff { height: 1fr; }
    TwinView.-diff #twin-sides { display: none; }
    TwinView.-sides #twin-diff { display: none; }
    TwinView.-sides #twin-diff-title { display: none; }
    """

    def __init__(self, *, mode: Mode = "sides", id: str | None = None) -> None:
        super().__init__(id=id, classes=f"-{mode}")
        self.mode: Mode = mode
        self.turn: Turn | None = None
        """The turn shown (None: none yet)."""
        self.running = False
        """Whether the turn shown is still running."""
        self._real_text: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="twin-head")
        with Horizontal(id="twin-sides"):
            with Vertical(classes="twin-side"):
                yield Static(Text("Predicted"), id="twin-predicted-title", classes="twin-title")
                yield LineView(id="twin-predicted")
            with Vertical(classes="twin-side"):
                yield Static(Text("Reality"), id="twin-real-title", classes="twin-title")
                yield LineView(id="twin-real")
        yield Static(
            Text("Diff: - predicted only, + reality only"),
            id="twin-diff-title",
            classes="twin-title",
        )
        yield LineView(id="twin-diff")

    def on_mount(self) -> None:
        self._draw()

    # -- parts --------------------------------------------------------------------------
    def _view(self, name: str) -> LineView:
        return self.query_one(f"#twin-{name}", LineView)

    def _head(self, text: Text) -> None:
        self.query_one("#twin-head", Static).update(text)

    # -- what is shown ------------------------------------------------------------------
    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        self.set_class(mode == "sides", "-sides")
        self.set_class(mode == "diff", "-diff")
        if self.is_mounted:
            self._draw()

    def toggle(self) -> Mode:
        self.set_mode("diff" if self.mode == "sides" else "sides")
        return self.mode

    def show_turn(self, turn: Turn | None) -> None:
        """A recorded turn (None: there is none yet)."""
        self.turn = turn
        self.running = False
        self._real_text = None
        if self.is_mounted:
            self._draw()

    def show_running(self, turn: Turn) -> None:
        """A turn has begun: both sides are working on it."""
        self.turn = turn
        self.running = True
        self._real_text = None
        if self.is_mounted:
            self._draw()

    def show_real(self, text: str, status: str, error: str) -> None:
        """Reality answered the running turn (before the world model did, or after)."""
        if not self.running:
            return
        self._real_text = text if status == "ok" else f"[reality {status}: {error}]\n{text}"
        if self.is_mounted:
            self._draw()

    # -- drawing ------------------------------------------------------------------------
    def _draw(self) -> None:
        predicted, real, diff = self._view("predicted"), self._view("real"), self._view("diff")
        for view in (predicted, real, diff):
            view.clear()
        self.query_one("#twin-real-title", Static).update(Text("Reality"))
        turn = self.turn
        if turn is None:
            self._head(
                Text(
                    "No twinned turn yet: each action goes to the world model and to reality. "
                    + KEY_HINT,
                    style="dim",
                )
            )
            return
        label = one_line(turn.action.label)[:80]
        if self.running:
            head = Text(f"Turn {turn.number} · {label} · ", style="bold")
            came = "reality answered" if self._real_text is not None else "waiting for reality"
            head.append(f"predicting (in the transcript above) · {came}", style="yellow")
            self._head(head)
            if self._real_text is not None:
                real.append(sanitize(self._real_text))
                if self.mode == "diff":
                    diff.append_lines([Text("The diff comes when the prediction is in.", "dim")])
            return
        record = RealityRecord.of(turn)
        head = Text(f"Turn {turn.number} · {label} · ", style="bold")
        if record is None:
            head.append(
                "simulation only: not sent to reality (no twin, or one that did not follow "
                "these turns)",
                style="yellow",
            )
            self._head(head)
            predicted.append(sanitize(turn.observation))
            return
        head.append(record.figures(), style=STYLES[record.kind])
        head.append(f" · delivered: {record.delivered}")
        if record.route is not None:
            head.append(f" · answered: {record.route.answered}", style="cyan")
        if record.grounding is not None:
            head.append(f"\n{record.grounding.label()}", style="cyan")
        if record.route is not None and record.route.reason:
            head.append(f"\nwhy: {one_line(record.route.reason)}", style="dim")
        self._head(head)
        real_title = "Reality" + (f" · {record.real_label()}" if record.real_label() else "")
        self.query_one("#twin-real-title", Static).update(Text(real_title))
        predicted.append(sanitize(turn.observation))
        if turn.note:
            predicted.append_lines([Text(f"[{one_line(turn.note)}]", style="yellow")])
        if record.real_text is not None and record.real_text:
            real.append(sanitize(record.real_text))
        if not record.answered:
            why = one_line(record.error) if record.error else "no answer"
            real.append_lines([Text(f"[reality {record.status or 'not asked'}: {why}]", "yellow")])
        if record.answered and self.mode == "diff":
            diff.append_lines(diff_lines(turn.observation, record.real_text or ""))
        elif self.mode == "diff":
            diff.append_lines([Text("Reality gave no answer to compare with.", "yellow")])
