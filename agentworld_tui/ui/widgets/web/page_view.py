"""The current page's accessibility tree, where an element can be picked: click its row,
or move between element rows with the arrow keys and press Enter."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip

from agentworld_tui.ui.widgets.line_view import LineView

_CURSOR = Style(reverse=True)


class PageView(LineView):
    BINDINGS = [
        Binding("down", "next_element", "Next element", show=False),
        Binding("up", "previous_element", "Previous element", show=False),
        Binding(
            "enter", "pick", "Pick element", tooltip="Fill an action for the element", show=False
        ),
    ]

    class Picked(Message):
        """A row of the page was chosen (a click, or Enter on the cursor row)."""

        def __init__(self, line: int) -> None:
            super().__init__()
            self.line = line

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.element_lines: list[int] = []
        """Rows that hold an element with an id; empty while the view shows no page."""
        self.cursor: int | None = None

    def set_elements(self, lines: list[int]) -> None:
        self.element_lines = lines
        if self.cursor not in lines:
            self.cursor = None
        self.forget_rows()
        self.refresh()

    def _move(self, step: int) -> None:
        if not self.element_lines:
            self.scroll_relative(y=step, animate=False)
            return
        if self.cursor is None:
            index = 0 if step > 0 else len(self.element_lines) - 1
        else:
            current = self.element_lines.index(self.cursor)
            index = max(0, min(len(self.element_lines) - 1, current + step))
        self.cursor = self.element_lines[index]
        self.follow = False
        self.scroll_to_region_row(self.cursor)
        self.refresh()

    def scroll_to_region_row(self, row: int) -> None:
        top = self.scroll_offset.y
        height = self.scrollable_content_region.height
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif height and row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False)

    def action_next_element(self) -> None:
        self._move(1)

    def action_previous_element(self) -> None:
        self._move(-1)

    def action_pick(self) -> None:
        if self.cursor is not None:
            self.post_message(self.Picked(self.cursor))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.wrap or self.is_bar_column(offset.x):
            return
        line = self.scroll_offset.y + offset.y
        if line in self.element_lines:
            self.cursor = line
            self.refresh()
        self.post_message(self.Picked(line))

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.cursor is not None and self.scroll_offset.y + y == self.cursor:
            width = self._text_width()  # the scrollbar's cell keeps its colour
            return Strip.join([strip.crop(0, width).apply_style(_CURSOR), strip.crop(width)])
        return strip
