"""LineView draws streamed text exactly as it draws the same text given at once.

Appends re-wrap only the last row of a growing line and repaint only the rows that changed;
these tests hold that shortcut to the long way round on random streams.
"""

from __future__ import annotations

import random

from textual.app import App, ComposeResult
from textual.geometry import Region

from agentworld_tui.ui.widgets.line_view import LineView

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
