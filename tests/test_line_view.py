"""LineView draws streamed text exactly as it draws the same text given at once.

Appends re-wrap only the last row of a growing line and repaint only the rows that changed;
these tests hold that shortcut to the long way round on random streams.
"""

from __future__ import annotations

import random
from typing import Any

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from agentworld_tui.ui.widgets.line_view import MAX_LINE_CHARS, THUMB, TRACK, LineView

PIECES = ["a", "bc", " ", "  ", "word ", "longerword", "\n", "\n\n", "\t", "é", "字", " x" * 20]


class TwoViews(App[None]):
    def compose(self) -> ComposeResult:
        yield LineView(wrap=True, id="streamed")
        yield LineView(wrap=True, id="whole")
        yield LineView(id="plain-streamed")
        yield LineView(id="plain-whole")


def shown(view: LineView) -> list[str]:
    """What the view shows, row by row, as a screen update asks for it."""
    strips = view.render_lines(Region(0, 0, *view.outer_size))
    return [strip.text.rstrip() for strip in strips]


async def test_streamed_text_wraps_and_draws_as_the_whole_text() -> None:
    app = TwoViews()
    async with app.run_test(size=(50, 40)) as pilot:
        rng = random.Random(7)
        for case in range(60):
            pieces = [rng.choice(PIECES) for _ in range(rng.randint(1, 40))]
            for prefix in ("streamed", "plain-streamed"):
                whole_id = prefix.replace("streamed", "whole")
                streamed = app.query_one(f"#{prefix}", LineView)
                whole = app.query_one(f"#{whole_id}", LineView)
                streamed.clear()
                whole.clear()
                for piece in pieces:
                    streamed.append(piece)
                whole.append("".join(pieces))
                await pilot.pause()
                assert streamed.text == whole.text
                assert streamed._rows == whole._rows, (case, pieces)
                assert streamed.virtual_size == whole.virtual_size, (case, pieces)
                assert (streamed.scroll_y, streamed.max_scroll_y) == (
                    whole.scroll_y,
                    whole.max_scroll_y,
                ), (case, pieces)
                assert shown(streamed) == shown(whole), (case, pieces)


class DrawnViews(App[None]):
    """Pairs of views: one drawn after every append, one only at the end."""

    CSS = "LineView { height: 8; }"

    def compose(self) -> ComposeResult:
        for wrap in (True, False):
            for cut in (MAX_LINE_CHARS, 30):  # 30: lines cut short with a count of the rest
                for side in ("drawn", "end"):
                    yield LineView(wrap=wrap, max_line_chars=cut, id=f"{side}-{wrap}-{cut}")


def cells(view: LineView) -> list[list[tuple[str, object]]]:
    """What the view shows, cell by cell with each cell's style."""
    strips = view.render_lines(Region(0, 0, *view.outer_size))
    return [[(char, seg.style) for seg in strip for char in seg.text] for strip in strips]


async def test_rows_drawn_while_text_streams_are_redrawn_when_they_change() -> None:
    """Rows are cached as drawn; every append between draws must leave no stale row,
    styled text, tabs and lines cut short included."""
    app = DrawnViews()
    styles = ["", "", "bold", "red"]
    async with app.run_test(size=(60, 64)) as pilot:
        rng = random.Random(11)
        pairs = [
            (app.query_one(f"#drawn-{k}", LineView), app.query_one(f"#end-{k}", LineView))
            for k in (f"{wrap}-{cut}" for wrap in (True, False) for cut in (MAX_LINE_CHARS, 30))
        ]
        for case in range(25):
            pieces = [(rng.choice(PIECES), rng.choice(styles)) for _ in range(rng.randint(1, 30))]
            for drawn, end in pairs:
                drawn.clear()
                end.clear()
                for piece, style in pieces:
                    drawn.append(piece, style)
                    cells(drawn)  # fills the row caches at every step
                    end.append(piece, style)
                await pilot.pause()
                assert cells(drawn) == cells(end), (drawn.id, case, pieces)


async def test_every_row_is_as_wide_as_the_view_says() -> None:
    """Rows are built with their width given, not measured: for every row the width a
    strip declares is the width of its cells, and is the view's, wide characters, lines
    cut short and a scrolled view included."""
    app = DrawnViews()
    async with app.run_test(size=(60, 64)) as pilot:
        rng = random.Random(5)
        views = list(app.query(LineView))
        for case in range(20):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 60)))
            for view in views:
                view.clear()
                view.append(text, rng.choice(["", "bold"]))
                await pilot.pause()
                for scroll_x in (0, 3) if not view.wrap else (0,):
                    view.scroll_to(x=scroll_x, animate=False, immediate=True)
                    strips = view.render_lines(Region(0, 0, *view.outer_size))
                    for strip in strips:
                        measured = sum(cell_len(segment.text) for segment in strip)
                        assert strip.cell_length == measured == view.outer_size.width, (
                            view.id,
                            case,
                            text,
                        )


async def test_truncating_blanks_the_rows_that_were_drawn() -> None:
    app = TwoViews()
    async with app.run_test(size=(50, 40)) as pilot:
        view = app.query_one("#streamed", LineView)
        view.append("first line\nsecond line\n" + "third " * 30)
        await pilot.pause()
        assert "third" in "".join(shown(view))
        view.truncate(1)
        await pilot.pause()
        rows = shown(view)
        assert rows[0] == "first line"
        assert not any(rows[1:])


def bar_column(view: LineView) -> str:
    """The scrollbar column as drawn: ``#`` thumb, ``|`` track, ``.`` none."""
    thumb, track = (view._bar_cells(view.rich_style)[i] for i in (THUMB, TRACK))
    marks = {thumb.style: "#", track.style: "|"}
    strips = view.render_lines(Region(0, 0, *view.outer_size))
    return "".join(marks.get(list(strip)[-1].style, ".") for strip in strips)


class OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield LineView(wrap=True, id="view")


async def test_the_view_draws_its_scrollbar_in_its_last_column() -> None:
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)
        view.append("x" * 39)  # fills the text's columns: the bar's column stays apart
        await pilot.pause()
        assert view._rows == [(0, 0, 39)]
        assert bar_column(view) == "." * 10  # everything fits: no bar
        view.append("".join(f"\nline {i}" for i in range(29)))  # 30 lines in 10 rows
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y == 20  # following the end
        assert bar_column(view) == "|" * 7 + "#" * 3  # a thumb a third of the bar
        view.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        assert bar_column(view) == "#" * 3 + "|" * 7
        view._exchange_repaint_regions()  # as the screen does when it draws
        view.append("".join(f"\nmore {i}" for i in range(70)))  # grows out of view
        # Only the bar's column is drawn again: the rows in view did not change.
        assert set(view._exchange_repaint_regions()) == {Region(39, 0, 1, 10)}
        assert view.scroll_y == 0
        assert bar_column(view) == "#" + "|" * 9  # the thumb shrinks where it is


async def test_clicking_and_dragging_the_scrollbar_scrolls() -> None:
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)
        view.append("\n".join(f"line {i}" for i in range(100)))
        await pilot.pause()
        assert view.scroll_y == 90 and view.follow
        await pilot.click(view, offset=(39, 0))  # the top of the bar
        assert view.scroll_y == 0
        await pilot.click(view, offset=(20, 9))  # text, not the bar: nothing moves
        assert view.scroll_y == 0
        await pilot.mouse_down(view, offset=(39, 0))
        await pilot.hover(view, offset=(39, 5))  # dragged half way
        await pilot.mouse_up(view, offset=(39, 5))
        assert view.scroll_y == 50
        view.append("\nline 100")
        await pilot.pause()
        assert view.scroll_y == 50  # scrolled up: the end is not followed
        await pilot.click(view, offset=(39, 9))  # the bottom: follows the end again
        view.append("\nline 101")
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y == 92
        await pilot.mouse_down(view, offset=(39, 0))
        assert view._dragging and view.scroll_y == 0
        app.capture_mouse(None)  # as a screen pushed over the view does, with no mouse up
        await pilot.pause()
        await pilot.hover(view, offset=(39, 8))  # no longer a drag: nothing moves
        assert not view._dragging and view.scroll_y == 0


class OnePage(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.picked: list[int] = []

    def compose(self) -> ComposeResult:
        from agentworld_tui.ui.widgets.web.page_view import PageView

        yield PageView(id="page")

    def on_page_view_picked(self, message: Any) -> None:
        self.picked.append(message.line)


async def test_the_page_view_s_scrollbar_is_not_an_element() -> None:
    from agentworld_tui.ui.widgets.web.page_view import PageView

    app = OnePage()
    async with app.run_test(size=(30, 10)) as pilot:
        view = app.query_one(PageView)
        view.append("\n".join(f"[{i}] button 'b{i}'" for i in range(40)))
        view.set_elements(list(range(6)))
        view.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click(view, offset=(29, 0))  # the bar, over element row 0
        assert app.picked == [] and view.cursor is None
        await pilot.click(view, offset=(3, 2))
        assert app.picked == [2] and view.cursor == 2
        # The cursor row is drawn reversed, its scrollbar cell is not.
        segments = list(view.render_lines(Region(0, 2, 30, 1))[0])
        assert segments[0].style is not None and segments[0].style.reverse
        assert segments[-1].style is not None and not segments[-1].style.reverse


async def test_a_new_row_is_one_strip_filtered_as_textual_would() -> None:
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)
        view.append("a\nb\n", "red")  # an ANSI colour: Textual's filter makes it truecolor
        await pilot.pause()
        whole = Region(0, 0, *view.outer_size)
        view.render_lines(whole)
        built: list[Strip] = []
        init = Strip.__init__

        def counted(strip: Strip, *args: Any, **kwargs: Any) -> None:
            built.append(strip)
            init(strip, *args, **kwargs)

        Strip.__init__ = counted  # type: ignore[method-assign]
        try:
            view.append("c\nd", "red")  # the empty last line grows, and one line is new
            drawn = view.render_lines(whole)
        finally:
            Strip.__init__ = init  # type: ignore[method-assign]
        assert built == [drawn[2], drawn[3]]  # no intermediate strips: the rows as shown
        assert [strip.text.rstrip() for strip in drawn[:4]] == ["a", "b", "c", "d"]
        filters = app.get_line_filters()
        assert filters  # the headless app filters ANSI colours, as a terminal app does
        _, background = view.background_colors
        row = view.render_line(3)  # asked for on its own, as Textual's styling pass does
        assert next(iter(row)).style.color.name == "red"  # unfiltered: Textual filters it
        for line_filter in filters:
            row = row.apply_filter(line_filter, background)
        again = view.render_lines(whole)[3]
        assert list(again) == list(row)  # the view's own pass: filtered the same way
        assert next(iter(again)).style.color.triplet is not None


async def test_a_screen_update_draws_again_only_the_rows_that_changed() -> None:
    """Rows not repainted since the last update are handed over as they were; every
    update still shows what a fresh draw of every row shows."""
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)
        await pilot.pause()
        whole = Region(0, 0, *view.outer_size)
        asked: list[int] = []
        render_line = view.render_line

        def counted(y: int) -> Strip:
            asked.append(y)
            return render_line(y)

        view.render_line = counted  # type: ignore[method-assign]

        def update() -> list[int]:
            """The rows an update draws; what it shows must be what a fresh draw shows."""
            asked.clear()
            shown = cells(view)
            drawn = list(asked)
            view.forget_rows()
            assert shown == cells(view)
            return drawn

        view.append("first line\nsecond")
        assert update() == [0, 1]  # the screen drew the empty view already
        view.append(" line grows")  # the second row only
        assert update() == [1]
        assert update() == []  # nothing changed
        view.render_lines(Region(0, 3, view.size.width, 1))  # one row (under the pointer)
        view.append(" again")
        assert update() == [1]  # the rows handed to the screen are kept
        for step in range(12):  # past the bottom: the view scrolls, every row moves
            view.append(f"\nrow {step}")
        assert view.scroll_y > 0
        assert update() == list(range(view.size.height))
        view.truncate(1)  # back to the top: the rows below go blank
        assert sorted(update()) == list(range(view.size.height))
        assert [strip.text.strip() for strip in view.render_lines(whole)][:2] == ["first line", ""]


class PlainView(App[None]):
    def compose(self) -> ComposeResult:
        yield LineView(id="view")


async def test_the_view_s_sizes_follow_its_layout_and_styles() -> None:
    """The view's sizes are Textual's after every layout: through a resize, padding, a
    horizontal bar that comes and goes, and a time off the screen."""
    app = PlainView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)

        async def check() -> None:
            await pilot.pause()
            assert view._sizes() == (view.size, view.scrollable_content_region.size)

        await check()
        assert view._box().width == 40
        await pilot.resize_terminal(30, 8)
        await check()
        view.styles.padding = (1, 2)
        await check()
        assert view._box().width == 26  # 30 less the padding
        view.styles.padding = 0
        view.append("x" * 100)  # wider than the view: Textual's horizontal bar comes
        await check()
        assert view.show_horizontal_scrollbar and view._box().height < 8
        view.display = False  # off the screen's map: Textual's size is 0 there
        await pilot.pause()
        assert view.size.width == 0 and view._view_size().width == 30  # as last laid out
        await pilot.resize_terminal(36, 9)
        view.display = True
        await check()
        assert view._view_size().width == 36


async def test_a_truncated_view_is_as_wide_as_the_lines_it_kept() -> None:
    app = PlainView()
    async with app.run_test(size=(30, 8)) as pilot:
        view = app.query_one(LineView)
        view.append("short\n" + "x" * 100 + "\nshort again\n" + "y" * 60)
        await pilot.pause()
        assert view.virtual_size.width == 101  # + the scrollbar's column
        view.truncate(3)  # the 60-cell line goes, the 100-cell one stays
        assert view.virtual_size.width == 101
        view.truncate(1)  # only "short" is left: the horizontal bar goes
        await pilot.pause()
        assert view.virtual_size.width == 6 and not view.show_horizontal_scrollbar
        view.append("z" * 40)  # on a line of its own, after the kept one
        assert view.virtual_size == (41, 2)
        view.clear()
        assert view.virtual_size.width == 1


async def test_following_the_end_scrolls_as_scroll_to_does() -> None:
    """The view follows streamed text without ``scroll_to``: its scroll offset, target and
    rows are what ``scroll_to`` leaves, it is drawn again, and a scroll animation under
    way stops."""
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LineView)
        view.append("\n".join(f"line {i}" for i in range(30)))
        await pilot.pause()
        assert view.scroll_y == view.scroll_target_y == view.max_scroll_y == 20
        view.scroll_to(y=0, duration=5)  # an animation, then text arrives and is followed
        view.append("\nline 30")
        assert view in app.screen._dirty_widgets  # the screen's next update draws it
        await pilot.pause()
        assert view.scroll_y == view.scroll_target_y == view.max_scroll_y == 21
        assert not app.animator.is_being_animated(view, "scroll_y")
        assert [strip.text.strip() for strip in view.render_lines(Region(0, 0, 40, 10))] == [
            f"line {i}" for i in range(21, 31)
        ]
        await pilot.pause(0.2)
        assert view.scroll_y == 21  # nothing left to move it back


async def test_a_view_not_laid_out_yet_stays_at_its_top() -> None:
    """Text given before the view has a size is shown from its top, as ``scroll_to``
    left it (a page loaded into a tab not shown yet)."""
    app = OneView()
    async with app.run_test(size=(40, 10)) as pilot:
        view = LineView(wrap=True)
        view.append("\n".join(f"line {i}" for i in range(30)))  # not mounted: no size
        await app.mount(view, before=0)
        await pilot.pause()
        assert view.scroll_y == 0 and view.max_scroll_y > 0
        assert view.render_lines(Region(0, 0, *view.outer_size))[0].text.strip() == "line 0"


async def test_a_line_too_long_to_draw_whole_shows_its_newest_text_as_it_streams() -> None:
    """Past MAX_LINE_CHARS a line shows its head and its tail, with what is between
    counted: a streamed line that grows is seen growing."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LineView(wrap=True, id="v")

    app = One()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LineView)
        for i in range(8):
            view.append(f"<{i:03d}>" + "x" * 995)
            await pilot.pause()
            # The rows of one wrapped line, less the scrollbar column, put back together.
            drawn = "".join(strip.text[:-1] for strip in app.screen._compositor.render_strips())
            assert f"<{i:03d}>" in drawn, i  # the newest piece is on screen
        assert view.line(0).plain.startswith("<000>")  # the text itself is kept whole
        hidden = len(view.line(0).plain) - MAX_LINE_CHARS
        await pilot.resize_terminal(80, 50)
        view.scroll_home(animate=False)
        await pilot.pause()
        drawn = "".join(strip.text[:-1] for strip in app.screen._compositor.render_strips())
        assert drawn.startswith("<000>")  # the head
        assert f"… [{hidden:,} more characters] …" in drawn
