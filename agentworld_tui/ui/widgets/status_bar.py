"""The bottom line: which model, where it runs, and how the current turn is going."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from agentworld_tui.ui.textual_private import repaint


@dataclass
class StatusInfo:
    """What the status line shows: the model, the context and the current turn's counters."""

    model: str = "no model"
    where: str = ""
    n_ctx: int = 0
    context_used: int = 0
    generated: int = 0
    reasoning_tokens: int = 0
    reasoning_budget: int = 0
    tokens_per_second: float = 0.0
    elapsed: float = 0.0
    phase: str = ""
    """What is happening now: loading, evaluating the prompt, reasoning, answering..."""
    queued: list[str] = field(default_factory=list)
    omitted_turns: int = 0


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


def status_parts(info: StatusInfo) -> tuple[tuple[str, str], ...]:
    """The line's fields, each with its style."""
    parts: list[tuple[str, str]] = [(info.model, "bold")]
    if info.where:
        parts.append((info.where, ""))
    if info.n_ctx:
        parts.append((f"ctx {_k(info.context_used)}/{_k(info.n_ctx)}", ""))
    if info.phase:
        parts.append((info.phase, "bold cyan"))
    if info.generated or info.tokens_per_second:
        parts.append((f"{info.tokens_per_second:.1f} tok/s", ""))
        parts.append((f"{info.generated:,} tok", ""))
        parts.append((f"{info.elapsed:.1f}s", ""))
    budget = f"/{info.reasoning_budget:,}" if info.reasoning_budget else ""
    if info.reasoning_tokens or budget:
        parts.append((f"reasoning {info.reasoning_tokens:,}{budget}", ""))
    if info.omitted_turns:
        parts.append((f"{info.omitted_turns} old turns left out", "yellow"))
    if info.queued:
        parts.append((f"queued: {', '.join(info.queued)}", "magenta"))
    return tuple(parts)


SEPARATOR = " │ "
_STYLES: dict[str, Style] = {}
_CONTROLS = dict.fromkeys([*range(32), 127], " ")
"""A field is shown on one line: a newline or a tab in it (a model's name as a server
reports it) would reach the terminal as it is."""


def _style(name: str) -> Style:
    style = _STYLES.get(name)
    if style is None:
        style = _STYLES[name] = Style.parse(name)
    return style


class StatusBar(Widget):
    """One line with a blank cell at each end, cut with an ellipsis when it is too long.

    The bar draws the line itself: a ``Static`` turns its text into Textual's content and
    builds it through the widget's styling pass, about a millisecond here for each new
    line, and while a turn streams the counters change every second."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $panel;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._parts: tuple[tuple[str, str], ...] = ()
        self._row: tuple[object, Strip] | None = None
        """The line as drawn, and the width, fields and line filters it was drawn for."""
        self._style: Style | None = None
        """The widget's own style, looked up once per style change."""

    def show(self, info: StatusInfo) -> None:
        parts = tuple((value.translate(_CONTROLS), style) for value, style in status_parts(info))
        if parts != self._parts:
            self._parts = parts
            # Drawn with the screen's next update, without messages (see
            # ``update_clock.repaint``): while text streams, in the same update as the text.
            repaint(self)

    def render(self) -> Text:
        """The fields as text, without the padding (the line is drawn by ``render_lines``)."""
        text = Text()
        for i, (value, style) in enumerate(self._parts):
            if i:
                text.append(SEPARATOR, "dim")
            text.append(value, style)
        return text

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style = None
        self._row = None

    def render_lines(self, crop: Region) -> list[Strip]:
        width = self.size.width
        key = (width, self._parts, *self.get_line_filters())
        if self._row is None or self._row[0] != key:
            self._row = (key, self._draw(width))
        strips = [self._row[1]] * len(crop.line_range)
        if crop.column_span != (0, width):
            strips = [strip.crop(*crop.column_span) for strip in strips]
        return strips

    def render_line(self, y: int) -> Strip:
        """The line as drawn (for Textual's lookups of what lies under the pointer)."""
        return self.render_lines(Region(0, y, self.size.width, 1))[0]

    def _draw(self, width: int) -> Strip:
        if self._style is None:
            self._style = self.rich_style
        base = self._style
        room = width - 2
        if room < 1:
            return Strip.blank(max(0, width), Style(bgcolor=base.bgcolor))
        segments: list[Segment] = []
        for i, (value, style) in enumerate(self._parts):
            if i:
                segments.append(Segment(SEPARATOR, base + _style("dim")))
            segments.append(Segment(value, base + _style(style) if style else base))
        line = Strip(segments)
        if line.cell_length > room:
            line = line.crop(0, room - 1)
            end = list(line)[-1].style if line.cell_length else base
            line = Strip([*line, Segment("…", end)])
        blank = Style(bgcolor=base.bgcolor)  # as Textual pads: the background alone
        cells = [Segment(" ", blank), *line.extend_cell_length(room, blank), Segment(" ", blank)]
        background = self.background_colors[1]
        for line_filter in self.get_line_filters():
            cells = line_filter.apply(cells, background)
        return Strip(cells).crop(0, width)
