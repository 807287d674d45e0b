"""A widget that keeps its rows (ui/widgets/still.py) hands out what a fresh draw would."""

from __future__ import annotations

from textual._styles_cache import StylesCache
from textual.app import App, ComposeResult
from textual.widgets import Static

from agentworld_tui.ui.textual_private import StillRows, keep_rows


class OneLine(App[None]):
    CSS = "Static { height: 1; }"

    def compose(self) -> ComposeResult:
        yield keep_rows(Static("one"))


async def test_kept_rows_are_handed_out_again_and_follow_the_content() -> None:
    app = OneLine()
    async with app.run_test(size=(20, 3)) as pilot:
        line = app.query_one(Static)
        assert isinstance(line._styles_cache, StillRows)
        crop = line.outer_size.region
        first = line.render_lines(crop)
        assert line.render_lines(crop) is first  # handed out again, not drawn again
        line.update("two")
        await pilot.pause()
        now = line.render_lines(crop)
        assert now == StylesCache().render_widget(line, crop)
        assert now != first
        assert "two" in "".join(segment.text for segment in now[0])
        line.styles.background = "red"
        await pilot.pause()
        assert line.render_lines(crop) == StylesCache().render_widget(line, crop)
        assert line.render_lines(crop) != now


def test_keep_rows_gives_a_widget_one_cache() -> None:
    line = keep_rows(Static("one"))
    cache = line._styles_cache
    assert keep_rows(line) is line
    assert line._styles_cache is cache
