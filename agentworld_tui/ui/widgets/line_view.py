"""A scrolling view of many lines that only lays out what is on screen.

Used for the simulated screens and the reasoning panel: text is appended as it streams
(only the changed line is touched), a finished block can be replaced by its highlighted
form, and a 100k-line answer or a 1 MB line costs no more than the rows being shown.
Lines are Rich ``Text`` built from plain strings: model output is never parsed as markup,
and whatever the view is handed is sanitized (``world.sanitize``) as it comes in.

The view draws its own vertical scrollbar in its last column, into the rows it caches:
Textual's scrollbar is a widget of its own that renders every row again whenever the view
scrolls (every frame while text streams in at the end), which cost as much as the rows of
text themselves. The column is always there, so a bar that appears never changes the width
text wraps at. Drag or click it to scroll. (``AGENTWORLD_RENDER_OFF=scrollbar``, for
measurement only, shows Textual's scrollbar in that column instead: see textual_private.)
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region, Size
from textual.strip import Strip

from agentworld_tui.ui.textual_private import (
    DirtyRows,
    disabled,
    render_on,
    repaint,
    scroll_to_end_now,
    scroll_update,
)
from agentworld_tui.world.sanitize import is_clean, sanitize

MAX_LINE_CHARS = 5_000
"""Longer lines are shown cut, with a note of how much is hidden."""

NO_BAR, TRACK, THUMB = 0, 1, 2
"""What a row shows in the scrollbar column: nothing (everything fits), track, thumb."""

OWN_BAR = render_on("scrollbar")
"""Whether the view draws its scrollbar itself (off: Textual's, in the same column)."""
BAR = 1 if OWN_BAR else 0
"""Columns of the view's rows (and its virtual width) that are its own scrollbar's."""


def _tabs_expanded(line: Text) -> Text:
    """A line with its tabs turned into spaces: a raw tab would be drawn as the terminal
    pleases, misaligning the columns and what is drawn over them."""
    if "\t" not in line.plain:
        return line
    line = line.copy()
    line.expand_tabs(8)
    return line


def _clean(line: Text) -> Text:
    """A line as it may be shown: sanitized (its colours go with what it held)."""
    if is_clean(line.plain):
        return line
    return Text(" ".join(sanitize(line.plain).split("\n")), style=line.style)


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


class LineView(DirtyRows, can_focus=True):
    DEFAULT_CSS = """
    LineView {
        background: $surface;
        overflow-y: hidden;  /* Textual's bar: the view draws its own (see the module's doc) */
    }
    """
    if not OWN_BAR:
        DEFAULT_CSS = """
        LineView {
            background: $surface;
            overflow-y: auto;
            scrollbar-size-vertical: 1;
            scrollbar-gutter: stable;  /* the column the view keeps for its bar */
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
        self._widest: list[int] = []
        """Without wrapping: the cells of the widest line up to each line (so that a
        truncated view is as wide as the lines it kept, at no cost)."""
        self._wrap_width = 0
        self._cache: LRUCache[tuple[int, int, int, int, int, int, int], Strip]
        self._cache = LRUCache(1024)
        """The rows as shown, by line, its version, the row's span, scroll offset, width and
        the scrollbar column's state: a row that scrolls keeps its strip. One strip a row,
        filtered already (see ``render_lines``): each strip is seven small caches, and
        building three a row (text, text and bar, filtered) had the collector run twice a
        frame while text streamed."""
        self._paint: tuple[tuple[LineFilter, ...], Color] | None = None
        """The line filters and background the cached rows were filtered for (None: not
        filtered, as ``render_line`` gives them to Textual's own styling pass)."""
        self._base_style: Style | None = None
        """The widget's own style, looked up once per style change rather than per row."""
        self._bar_segments: tuple[Segment, Segment, Segment] | None = None
        """The scrollbar column's cell for NO_BAR, TRACK and THUMB rows."""
        self._look: tuple[bool, Color] | None = None
        """Whether the rows are drawn as they are (``_plain``) and the background."""
        self._drawn_rows = 0
        """Rows the content covered at the last layout (what a shorter text must blank)."""
        self._bar_drawn: tuple[int, int] = (0, 0)
        """The thumb's rows at the last screen update."""
        self._pass: tuple[int, int, int, int, int] | None = None
        """One screen update's scroll offset, text width and thumb rows."""
        self._handed: tuple[tuple[Region, tuple[int, int, int, int, int]], list[Strip]] | None
        self._handed = None
        """The rows last handed to the screen, with the crop and geometry they were for."""
        self._stale: set[int] = set()
        """Rows repainted since then: the others are handed again as they were (a screen
        update asks for every row of the view, however few changed)."""
        self._dragging = False

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
        """Append streamed text; newlines start new lines. (A stream's escape sequences
        split across chunks are for ``StreamSanitizer`` to hold back before this.)"""
        text = sanitize(text)
        if not text:
            return
        first = len(self._lines) - 1
        parts = text.split("\n")
        grown = self._lines[first]
        grown.append(parts[0], style)
        # Only the end of the first line changed (its earlier tabs are expanded already):
        # its earlier rows stay as they were, and so do their drawn forms (a row's cache
        # key holds its start and end), unless the line is drawn whole (no wrapping) or
        # cut short with a count of what is hidden.
        if not self.wrap or len(grown.plain) > self.max_line_chars:
            self._versions[first] = self._next()
        for part in parts[1:]:
            self._lines.append(Text(part, style=style))
            self._versions.append(self._next())
        if "\t" in text:
            for index in range(first, len(self._lines)):
                self._lines[index].expand_tabs(8)
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
        lines = [_tabs_expanded(_clean(line)) for line in lines]
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
            follow = self.follow and self._at_end()
        if self.wrap:
            width = self._wrap_width or self._text_width()
            changed = self._rewrap(first, width, grown)
            drawn = len(self._rows)
            rows = drawn - 1 if drawn > 1 and not self._lines[-1].plain else drawn
            size = Size(width + BAR, rows)
        else:
            widest = self._widest
            del widest[first:]
            most = widest[-1] if widest else 0
            for line in self._lines[first:]:
                most = max(most, self._line_cells(line))
                widest.append(most)
            changed = first
            drawn = len(self._lines)
            size = Size(most + BAR, self.line_count)  # + the scrollbar column
        # Rows from the first changed one down to the end of the old or the new content.
        end = max(drawn, self._drawn_rows)
        self._drawn_rows = drawn
        if size != self.virtual_size:
            self._set_virtual_size(size)
        if follow and self._follow_end():
            return
        scroll_y = int(self.scroll_y)
        height = self._box().height
        top = max(changed, scroll_y)
        bottom = min(end, scroll_y + height)
        if top < bottom:
            width = max(self.virtual_size.width, self._view_size().width)
            repaint(self, Region(0, top - scroll_y, width, bottom - top))
        if self._thumb() != self._bar_drawn:  # the text grew or shrank out of view
            repaint(self, Region(self._text_width(), 0, 1, height))

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

    def _text_width(self) -> int:
        """Columns for text: the view's width less the scrollbar column (Textual's bar's
        gutter, when it shows its own)."""
        return max(1, self._box().width - BAR)

    def _box(self) -> Size:
        """The size of the rows' box: the view less its padding, border and Textual's
        scrollbars."""
        return self._sizes()[1]

    def _view_size(self) -> Size:
        """Textual's ``size`` of the view (its content's), as of its last layout."""
        return self._sizes()[0]

    def _sizes(self) -> tuple[Size, Size]:
        """The view's content size and its rows' box, as of its last layout: Textual's
        ``size`` and ``scrollable_content_region`` look the view's region up on the
        screen's map each time (a walk up the DOM to the screen), several times a frame.
        A scroll view's container size is its size less its padding and border
        (``ScrollView._size_updated``). Of a view not on the map (a folded panel) these
        are the last size it was laid out at, where Textual's are zero."""
        size = self.container_size
        return size, size - self.scrollbar_gutter.totals

    def _at_end(self) -> bool:
        """``is_vertical_scroll_end``, with the view's size as laid out: only a view not
        laid out yet counts as at its end whatever its offset (Textual's also counts a
        view off the screen, folded say, as at its end)."""
        return self.scroll_offset.y == self.max_scroll_y or not self._view_size()

    def _follow_end(self) -> bool:
        """Scroll to the end at once, as text streams in; whether the view scrolled.

        What ``scroll_to(y=self.max_scroll_y, animate=False, immediate=True)`` does here
        (any scroll animation stopped, the anchor released, the view repainted), without
        Textual's reactive machinery (three reactive sets, each validated and watched) at
        every frame that scrolls. The offset needs no validation: it is the end, for the
        virtual size just set. Nothing else watches a view's scroll offset. Not
        ``scroll_end`` either: it also queues a completion callback, a message to the
        view every frame."""
        end = self.max_scroll_y
        if end <= self.scroll_y or not self.allow_vertical_scroll:
            return False  # also before the view is laid out, where scroll_to stays put
        scroll_to_end_now(self, end)
        return True

    def _set_virtual_size(self, size: Size) -> None:
        """Set the scrollable size without a screen layout (which the reactive would ask
        for); only a horizontal scrollbar that appears or goes changes the view's layout."""
        old = self.virtual_size
        self.set_reactive(LineView.virtual_size, size)
        if OWN_BAR and size.width == old.width and size.height >= old.height:
            return  # more rows: the scroll offset stays valid and no scrollbar comes or goes
        shown = self.show_horizontal_scrollbar
        scroll_update(self, size)
        if self.show_horizontal_scrollbar != shown:
            self.refresh(layout=True)

    def _display_plain(self, line: Text) -> str:
        plain = line.plain
        if len(plain) > self.max_line_chars:
            return self._cut(line).plain
        return plain

    def _cut(self, line: Text) -> Text:
        """A line too long to draw whole: its head and its tail (where a streamed line
        grows, so it is seen growing), with what is between counted."""
        head = self.max_line_chars // 2
        tail = self.max_line_chars - head
        hidden = len(line.plain) - self.max_line_chars
        cut = line[:head]
        cut.append(f" … [{hidden:,} more characters] … ", "dim italic")
        cut.append_text(line[len(line.plain) - tail :])
        return cut

    def on_resize(self) -> None:
        if self.wrap:
            width = self._text_width()
            if width != self._wrap_width:
                self._wrap_all(width, self.follow and self._at_end())

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
        self._bar_segments = None
        self._look = None
        self.forget_rows()

    def forget_rows(self) -> None:
        """Draw every row again (a subclass that styles rows has changed how)."""
        self._cache.clear()
        self._handed = None

    def rows_dirtied(self, regions: tuple[Region, ...]) -> None:
        if not regions:
            self._handed = None
        elif self._handed is not None:
            stale = self._stale
            for region in regions:
                stale.update(region.line_range)

    def on_mouse_scroll_up(self) -> None:
        self.follow = False

    @property
    def allow_vertical_scroll(self) -> bool:
        """Textual's own bar is off (overflow-y: hidden), but the view scrolls once it has
        a size, as it would with that bar."""
        if not OWN_BAR:
            return super().allow_vertical_scroll
        return (
            self.is_scrollable
            and bool(self.container_size)
            and self.max_scroll_y > 0
            and not disabled(self)
        )

    # -- the scrollbar column -------------------------------------------------------------
    def _thumb(self) -> tuple[int, int]:
        """The thumb's first row and the row after its last; (0, 0) when the text fits."""
        height = self._box().height
        total = self.virtual_size.height
        if not OWN_BAR or height <= 0 or total <= height:
            return (0, 0)
        size = max(1, round(height * height / total))
        # The rows are drawn at the whole-row offset (scroll_y is fractional mid-animation).
        top = round((height - size) * min(1.0, self.scroll_offset.y / self.max_scroll_y))
        return (top, top + size)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.button != 1 or self._thumb() == (0, 0):
            return
        if not self.is_bar_column(event.x):
            return
        event.stop()
        self._dragging = True
        self.capture_mouse()
        self._drag_to(event.y)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self._drag_to(event.y)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()

    def on_mouse_release(self, event: events.MouseRelease) -> None:
        self._dragging = False  # the capture was taken away (a screen pushed, say)

    def on_hide(self) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()

    def is_bar_column(self, x: int) -> bool:
        """Whether column ``x`` of the view is its scrollbar's."""
        return x >= self._text_width()

    def _drag_to(self, y: int) -> None:
        """Scroll so that row ``y`` of the bar is where the thumb is."""
        height = self._box().height
        share = min(1.0, max(0.0, y / max(1, height - 1)))
        self.follow = share >= 1.0
        self.scroll_to(y=round(share * self.max_scroll_y), animate=False, immediate=True)

    def _bar_cells(self, base: Style) -> tuple[Segment, Segment, Segment]:
        """One cell of the column for each state, in the theme's scrollbar colours."""
        if self._bar_segments is None:
            styles = self.styles
            _, background = self.background_colors
            track = background + styles.scrollbar_background
            thumb = track + styles.scrollbar_color
            self._bar_segments = (
                Segment(" ", base),
                Segment(" ", Style(bgcolor=track.rich_color)),
                Segment(" ", Style(bgcolor=thumb.rich_color)),
            )
        return self._bar_segments

    def watch_scroll_y(self, old: float, new: float) -> None:
        # ScrollView's, less its scrollbar (the view draws its own) and its messages.
        if not OWN_BAR and self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = new
        if round(old) != round(new):
            repaint(self, self._view_size().region)
        if new >= self.max_scroll_y:
            self.follow = True

    # -- rendering ----------------------------------------------------------------------
    def _geometry(self) -> tuple[int, int, int, int, int]:
        scroll_x, scroll_y = self.scroll_offset
        return (scroll_x, scroll_y, self._text_width(), *self._thumb())

    def render_lines(self, crop: Region) -> list[Strip]:
        """One screen update: the scroll offset, width and thumb are looked up once, not
        per row. The rows come from the view's own cache, filtered as Textual would filter
        them, and rows not repainted since the last update are the strips handed then;
        Textual's styling pass (which builds every row again after a scroll) runs only for
        a border, padding or an effect the rows do not have."""
        look = self._look
        if look is None:  # once per style change, as the base style is
            look = self._look = (self._plain(), self.background_colors[1])
        plain, background = look
        if plain:
            self._set_paint((tuple(self.get_line_filters()), background))
        else:
            self._set_paint(None)  # Textual filters what render_line gives it
        self._pass = self._geometry()
        self._bar_drawn = self._pass[3:]
        try:
            if not plain:
                return super().render_lines(crop)
            key = (crop, self._pass)
            handed = self._handed
            again = handed is not None and handed[0] == key
            if again and handed is not None:  # (the second test for the type checker)
                strips = list(handed[1])
                rows = [y for y in self._stale if crop.y <= y < crop.bottom]
            else:
                strips = [Strip.blank(0)] * crop.height
                rows = list(crop.line_range)
            span = crop.column_span
            whole = span == (0, self._view_size().width)
            for y in rows:
                strip = self.render_line(y)
                strips[y - crop.y] = strip if whole else strip.crop(*span)
            # Kept for the screen's updates, which ask for the whole view: a row asked for
            # on its own (the style under the mouse pointer) leaves them as they are.
            if again or crop.size == self.outer_size:
                self._handed = (key, strips)
                self._stale.clear()
            return strips
        finally:
            self._pass = None

    def _set_paint(self, paint: tuple[tuple[LineFilter, ...], Color] | None) -> None:
        if paint != self._paint:
            self._paint = paint
            self.forget_rows()

    def _plain(self) -> bool:
        """Whether the rows are drawn as they are: no border, outline, padding, tint,
        hatch or opacity."""
        styles = self.styles
        return (
            not any(edge for edge, _ in styles.border)
            and not any(edge for edge, _ in styles.outline)
            and not any(styles.padding)
            and not styles.tint.a
            and self.opacity == 1.0
            and styles.text_opacity == 1.0
            and (not styles.has_rule("hatch") or styles.hatch == "none")
        )

    def render_line(self, y: int) -> Strip:
        """Row ``y`` as shown, its scrollbar cell included: filtered when the view's own
        ``render_lines`` asks for it, unfiltered otherwise (Textual's styling pass filters
        the rows it gets)."""
        if self._pass is None:
            self._set_paint(None)
        scroll_x, scroll_y, width, thumb_top, thumb_end = self._pass or self._geometry()
        bar = NO_BAR if thumb_top == thumb_end else THUMB if thumb_top <= y < thumb_end else TRACK
        row = scroll_y + y
        if self.wrap:
            index, start, end = self._rows[row] if row < len(self._rows) else (-1, 0, 0)
        else:
            index, start, end = (row, 0, -1) if row < len(self._lines) else (-1, 0, 0)
        key = (index, self._versions[index] if index >= 0 else -1, start, end, scroll_x, width, bar)
        strip = self._cache.get(key)
        if strip is None:
            base = self._base_style
            if base is None:
                base = self._base_style = self.rich_style
            if index < 0:
                segments = [Segment(" " * width, base)]
            else:
                segments = self._render_row(index, start, end, scroll_x, width, base)
            # No offsets for text selection (Strip.apply_offsets): the view has no selection
            # to copy, and they made every row a new strip at every scroll.
            segments.append(self._bar_cells(base)[bar])
            if self._paint is not None:
                filters, background = self._paint
                for line_filter in filters:
                    segments = line_filter.apply(segments, background)
            strip = self._cache[key] = Strip(segments, width + 1)
        return strip

    def _render_row(
        self, index: int, start: int, end: int, scroll_x: int, width: int, base: Style
    ) -> list[Segment]:
        """The row's text, exactly ``width`` cells."""
        line = self._lines[index]
        if len(line.plain) > self.max_line_chars:
            line = self._cut(line)
        stop: int | None = None
        if end >= 0:
            stop = end
        elif scroll_x:
            start, stop, scroll_x = scroll_x, scroll_x + width + 4, 0
        # Text.render leaves out the line's own style (console.render would add it).
        own = self.app.console.get_style(line.style, default="") if line.style else None
        style = base + own if own else base
        if line.spans:
            segments = [
                Segment(seg.text, style + seg.style if seg.style else style)
                for seg in line[start:stop].render(self.app.console)
                if seg.text != "\n"
            ]
            cells = sum(cell_len(segment.text) for segment in segments)
        else:  # one style (text as it streams): rich's slicing and spans are not needed
            text = line.plain[start:stop]
            cells = len(text) if text.isascii() else cell_len(text)
            if not scroll_x and cells <= width and style is base:
                # One segment, text and padding: every segment costs each screen update.
                return [Segment(text + " " * (width - cells), base)]
            segments = [Segment(text, style)]
        if not scroll_x and cells <= width:  # the row fits: padded, nothing to cut
            if cells < width:
                segments.append(Segment(" " * (width - cells), base))
            return segments
        return list(Strip(segments).crop_extend(scroll_x, scroll_x + width, base))
