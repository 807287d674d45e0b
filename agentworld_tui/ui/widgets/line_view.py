"""A scrolling view of many lines that only lays out what is on screen.

Used for the simulated screens and the reasoning panel: text is appended as it streams
(only the changed line is touched), a finished block can be replaced by its highlighted
form, and a 100k-line answer or a 1 MB line costs no more than the rows being shown.
Lines are Rich ``Text`` built from plain strings: model output is never parsed as markup.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

MAX_LINE_CHARS = 5_000
"""Longer lines are shown cut, with a note of how much is hidden."""


def _wrap_offsets(text: str, width: int) -> list[tuple[int, int]]:
    """Row boundaries for ``text`` wrapped at ``width`` cells, preferring spaces."""
    if len(text) <= width or width < 8:
        return [(0, len(text))]
    rows: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = start + width
        if end >= len(text):
            rows.append((start, len(text)))
            break
        cut = text.rfind(" ", start + 1, end + 1)
        cut = end if cut <= start else cut + 1
        rows.append((start, cut))
        start = cut
    return rows


class LineView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LineView {
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(
        self,
        *,
        wrap: bool = False,
        max_line_chars: int = MAX_LINE_CHARS,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.wrap = wrap
        self.max_line_chars = max_line_chars
        self.follow = True
        """Keep the end in view while text arrives, until the user scrolls up."""
        self._lines: list[Text] = [Text()]
        self._serial = 0
        self._versions: list[int] = [0]
        """A number unique to each line's current content, for the render cache."""
        self._rows: list[tuple[int, int, int]] = [(0, 0, 0)]
        """Visual rows when wrapping: (line index, start, end)."""
        self._row_start: list[int] = [0]
        """First visual row of each line (wrap mode)."""
        self._width = 0
        self._wrap_width = 0
        self._cache: LRUCache[tuple[int, int, int, int, int, int], Strip] = LRUCache(2048)
        self._base_style: Style | None = None
        """The widget's own style, looked up once per style change rather than per row."""
        self._drawn_rows = 0
        self._pass: tuple[int, int, int] | None = None
        """Rows the content covered at the last layout (what a shorter text must blank)."""

    # -- content ------------------------------------------------------------------------
    @property
    def line_count(self) -> int:
        n = len(self._lines)
        return n - 1 if n and not self._lines[-1].plain else n

    @property
    def text(self) -> str:
        return "\n".join(line.plain for line in self._lines)

    def line(self, index: int) -> Text:
        return self._lines[index]

    def clear(self) -> None:
        self.truncate(0)

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` lines (the rest is replaced later, e.g. a re-streamed
        or re-highlighted block)."""
        del self._lines[count:]
        del self._versions[count:]
        if not self._lines or self._lines[-1].plain:
            self._lines.append(Text())
            self._versions.append(self._next())
        self._relayout(count)

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    def append(self, text: str, style: Style | str = "") -> None:
        """Append streamed text; newlines start new lines."""
        if not text:
            return
        first = len(self._lines) - 1
        parts = text.split("\n")
        self._lines[-1].append(parts[0], style)
        self._versions[-1] = self._next()
        for part in parts[1:]:
            self._lines.append(Text(part, style=style))
            self._versions.append(self._next())
        if "\t" in text:
            for index in range(first, len(self._lines)):
                self._lines[index].expand_tabs(8)
        # Only the end of the first line changed: its earlier rows stay as they were.
        self._relayout(first, grown="\t" not in parts[0])

    def append_lines(self, lines: list[Text]) -> None:
        """Append whole lines, starting on a fresh line."""
        if not lines:
            return
        first = len(self._lines) - 1
        if self._lines[-1].plain:
            self._lines.append(Text())
            self._versions.append(self._next())
            first += 1
        self._lines[-1:] = [*lines, Text()]
        self._versions[-1:] = [self._next() for _ in range(len(lines) + 1)]
        self._relayout(first)

    # -- layout -------------------------------------------------------------------------
    def _line_cells(self, line: Text) -> int:
        plain = line.plain
        if len(plain) > self.max_line_chars:
            return self.max_line_chars + 30
        return cell_len(plain) if not plain.isascii() else len(plain)

    def _relayout(self, first: int, *, grown: bool = False, follow: bool | None = None) -> None:
        """Recompute rows for lines from ``first`` on (appends touch only the tail).

        ``grown`` says line ``first`` only had text added at its end, so with wrapping
        only its last row is wrapped again. Only the rows that changed are repainted, and
        a new virtual size never asks the whole screen for a new layout: the view's own
        size does not depend on its content.
        """
        if follow is None:
            follow = self.follow and self.is_vertical_scroll_end
        if self.wrap:
            width = max(1, self._wrap_width or self.scrollable_content_region.width or 80)
            changed = self._rewrap(first, width, grown)
            drawn = len(self._rows)
            rows = drawn - 1 if drawn > 1 and not self._lines[-1].plain else drawn
            size = Size(width, rows)
        else:
            for line in self._lines[first:]:
                self._width = max(self._width, self._line_cells(line))
            changed = first
            drawn = len(self._lines)
            size = Size(self._width, self.line_count)
        # Rows from the first changed one down to the end of the old or the new content.
        end = max(drawn, self._drawn_rows)
        self._drawn_rows = drawn
        if size != self.virtual_size:
            self._set_virtual_size(size)
            content_width = self.scrollable_content_region.width
            if self.wrap and content_width and content_width != size.width:
                # A scrollbar came or went: wrap everything again at the new width.
                self._wrap_all(content_width, follow)
                return
        if follow and self.max_scroll_y > self.scroll_y:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            top = max(changed, int(self.scroll_y))
            bottom = min(end, int(self.scroll_y) + self.scrollable_content_region.height)
            if top < bottom:
                self.refresh_lines(top, bottom - top)

    def _rewrap(self, first: int, width: int, grown: bool) -> int:
        """Wrap lines from ``first`` on; returns the first visual row that changed."""
        line_rows = len(self._rows) - self._row_start[first] if first < len(self._row_start) else 0
        plain = self._lines[first].plain if first < len(self._lines) else ""
        if grown and line_rows and len(plain) <= self.max_line_chars:
            # Greedy wrapping: rows before the line's last one cannot change when text is
            # added at its end, so wrapping resumes where the last row began.
            row = len(self._rows) - 1
            resume = self._rows[row][1]
            del self._rows[row:]
            del self._row_start[first + 1 :]
            for start, end in _wrap_offsets(plain[resume:], width):
                self._rows.append((first, resume + start, resume + end))
            rest = first + 1
        else:
            row = self._row_start[first] if first < len(self._row_start) else len(self._rows)
            del self._rows[row:]
            del self._row_start[first:]
            rest = first
        for index in range(rest, len(self._lines)):
            self._row_start.append(len(self._rows))
            text = self._display_plain(self._lines[index])
            for start, end in _wrap_offsets(text, width):
                self._rows.append((index, start, end))
        return row

    def _set_virtual_size(self, size: Size) -> None:
        """Set the scrollable size without a screen layout (which the reactive would ask
        for); only a scrollbar that appears or goes changes the view's layout."""
        bars = (self.show_horizontal_scrollbar, self.show_vertical_scrollbar)
        self.set_reactive(LineView.virtual_size, size)
        self._scroll_update(size)
        if (self.show_horizontal_scrollbar, self.show_vertical_scrollbar) != bars:
            self.refresh(layout=True)

    def _display_plain(self, line: Text) -> str:
        plain = line.plain
        if len(plain) > self.max_line_chars:
            hidden = len(plain) - self.max_line_chars
            return plain[: self.max_line_chars] + f" … [{hidden:,} more characters]"
        return plain

    def on_resize(self) -> None:
        if self.wrap:
            width = self.scrollable_content_region.width
            if width and width != self._wrap_width:
                self._wrap_all(width, self.follow and self.is_vertical_scroll_end)

    def _wrap_all(self, width: int, follow: bool) -> None:
        """Wrap every line again at ``width``; ``follow`` is measured before the rows
        change (a narrower view has more rows, and the end must stay in view if it was)."""
        self._wrap_width = width
        self._row_start.clear()
        self._rows.clear()
        self._relayout(0, follow=follow)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None
        self._cache.clear()

    def on_mouse_scroll_up(self) -> None:
        self.follow = False

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new >= self.max_scroll_y:
            self.follow = True

    # -- rendering ----------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        """One screen update: the scroll offset and width are looked up once, not per row."""
        self._pass = (*self.scroll_offset, self.scrollable_content_region.width)
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def render_line(self, y: int) -> Strip:
        if self._pass is not None:
            scroll_x, scroll_y, width = self._pass
        else:
            scroll_x, scroll_y = self.scroll_offset
            width = self.scrollable_content_region.width
        row = scroll_y + y
        base = self._base_style
        if base is None:
            base = self._base_style = self.rich_style
        if self.wrap:
            if row >= len(self._rows):
                return Strip.blank(width, base)
            index, start, end = self._rows[row]
        else:
            if row >= len(self._lines):
                return Strip.blank(width, base)
            index, start, end = row, 0, -1
        key = (index, self._versions[index], start, end, scroll_x, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(index, start, end, scroll_x, width, base)
            self._cache[key] = strip
        return strip.apply_offsets(scroll_x, row)

    def _render_row(
        self, index: int, start: int, end: int, scroll_x: int, width: int, base: Style
    ) -> Strip:
        line = self._lines[index]
        if len(line.plain) > self.max_line_chars:
            hidden = len(line.plain) - self.max_line_chars
            line = line[: self.max_line_chars]
            line.append(f" … [{hidden:,} more characters]", "dim italic")
        if end >= 0:
            line = line[start:end]
        elif scroll_x:
            line = line[scroll_x : scroll_x + width + 4]
            scroll_x = 0
        # Text.render leaves out the line's own style (console.render would add it).
        own = self.app.console.get_style(line.style, default="") if line.style else None
        style = base + own if own else base
        segments = [
            Segment(seg.text, style + seg.style if seg.style else style)
            for seg in line.render(self.app.console)
            if seg.text != "\n"
        ]
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, base)
