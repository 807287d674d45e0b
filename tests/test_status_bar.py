"""The status line: drawn by the bar itself, padded, cut with an ellipsis, in the theme's
colours, and repainted only when what it shows changes."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.app import App, ComposeResult

from agentworld_tui.ui.widgets.status_bar import StatusBar, StatusInfo

BUSY = StatusInfo(
    model="model.gguf",
    where="CPU · 2 threads",
    n_ctx=32768,
    context_used=12345,
    generated=1234,
    tokens_per_second=38.25,
    elapsed=12.3,
    phase="reasoning",
    reasoning_tokens=1200,
    reasoning_budget=4000,
    queued=["web", "mcp"],
)
SHOWN = (
    "model.gguf │ CPU · 2 threads │ ctx 12.3k/32.8k │ reasoning │ 38.2 tok/s │ 1,234 tok │ "
    "12.3s │ reasoning 1,200/4,000 │ queued: web, mcp"
)


class BarApp(App[None]):
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")


def row(app: App[None]) -> list[tuple[str, object]]:
    """The bar's row as the screen shows it: each character with its style."""
    bar = app.query_one(StatusBar)
    strips = app.screen._compositor.render_strips()
    return [(char, seg.style) for seg in strips[bar.region.y] for char in seg.text]


def text(cells: list[tuple[str, object]]) -> str:
    return "".join(char for char, _ in cells)


async def shown(app: App[None], pilot: Any, info: StatusInfo) -> list[tuple[str, object]]:
    """The bar's row once the screen has drawn ``info``."""
    app.query_one(StatusBar).show(info)
    await pilot.pause()
    return row(app)


async def test_the_line_is_padded_to_the_width_with_its_fields_styled() -> None:
    app = BarApp()
    async with app.run_test(size=(200, 5)) as pilot:
        cells = await shown(app, pilot, BUSY)
        assert text(cells) == f" {SHOWN}".ljust(200)
        assert str(app.query_one(StatusBar).render()) == SHOWN
        model = [style for char, style in cells[1:11]]
        assert all(style.bold for style in model), model  # type: ignore[attr-defined]
        assert not cells[12][1].bold  # type: ignore[attr-defined]  # the separator
        background = {style.bgcolor for _, style in cells}  # type: ignore[attr-defined]
        assert len(background) == 1 and None not in background


async def test_a_line_too_long_for_the_bar_ends_in_an_ellipsis() -> None:
    app = BarApp()
    async with app.run_test(size=(40, 5)) as pilot:
        assert text(await shown(app, pilot, BUSY)) == f" {SHOWN[:37]}… "
        wide = StatusInfo(model="模型" * 30, phase="answering")  # two cells a character
        line = text(await shown(app, pilot, wide))
        assert line.startswith(" 模型") and line.endswith("… ")
        assert cell_len(line) == 40


async def test_the_bar_repaints_only_when_what_it_shows_changes() -> None:
    app = BarApp()
    async with app.run_test(size=(120, 5)) as pilot:
        await shown(app, pilot, BUSY)
        bar = app.query_one(StatusBar)
        bar.show(StatusInfo(**{**BUSY.__dict__, "queued": ["web", "mcp"]}))  # the same fields
        assert not bar._repaint_regions
        bar.show(StatusInfo(**{**BUSY.__dict__, "generated": 1300}))
        assert bar._repaint_regions
        await pilot.pause()
        assert "1,300 tok" in text(row(app))


async def test_the_bar_takes_the_new_theme_colours() -> None:
    app = BarApp()
    async with app.run_test(size=(120, 5)) as pilot:
        app.query_one(StatusBar).show(BUSY)
        app.theme = "textual-dark"
        await pilot.pause()
        dark = row(app)
        app.theme = "textual-light"
        await pilot.pause()
        light = row(app)
        assert text(dark) == text(light)
        assert dark[0][1].bgcolor != light[0][1].bgcolor  # type: ignore[attr-defined]
        assert dark[1][1].color != light[1][1].color  # type: ignore[attr-defined]


async def test_a_narrow_bar_keeps_its_width_and_a_field_stays_on_one_line() -> None:
    app = BarApp()
    async with app.run_test(size=(120, 5)) as pilot:
        line = text(await shown(app, pilot, StatusInfo(model="a\nb\tc", phase="x")))
        assert line.startswith(" a b c │ x ")
        bar = app.query_one(StatusBar)
        for width in (0, 1, 2, 3, 4):
            strip = bar._draw(width)
            assert strip.cell_length == width
            assert strip.text == {3: " … ", 4: " a… "}.get(width, " " * width)


async def test_the_same_line_is_not_drawn_again() -> None:
    app = BarApp()
    async with app.run_test(size=(120, 5)) as pilot:
        await shown(app, pilot, BUSY)
        bar = app.query_one(StatusBar)
        drawn = bar.render_line(0)
        bar.show(StatusInfo(**BUSY.__dict__))
        assert bar.render_line(0) is drawn
