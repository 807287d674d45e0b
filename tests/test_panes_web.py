"""The Web pane: the page as the screen, element picking that fills the action bar, calls
checked (also against the page's element ids) before they are sent, the predicted page
replacing the view, and its diff a key away."""

from __future__ import annotations

from pathlib import Path

import pytest
from pane_driver import error_text, finished, make_app, open_tab, scripted

from agentworld_tui.domains.web import element_by_bid, elements
from agentworld_tui.ui.panes.web import WebPane

NEXT_PAGE = (
    "RootWebArea 'Search results for tent | Northwind Outfitters', focused\n"
    "\t[b10] searchbox 'Search products', value='tent'\n"
    "\t[b11] link 'Trail Tent 2P', url='https://shop.northwind.example/p/trail-tent-2p'\n"
    "\t[b12] button 'Add to cart'"
)


@pytest.fixture(scope="module")
def web_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "web.gguf", NEXT_PAGE)


async def test_clicking_a_field_fills_it_and_the_next_page_replaces_the_view(
    web_model: Path,
) -> None:
    app = make_app(web_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "web", WebPane)
        start_page = pane.page
        searchbox = element_by_bid(start_page, "a15")
        assert searchbox is not None and searchbox.role == "searchbox"
        await pilot.click(pane.page_view, offset=(3, searchbox.line))
        call = pane.action_bar.call
        assert call.value == 'fill("a15", "")'
        assert call.has_focus
        await pilot.press(*"tent")  # typed between the quotes
        assert call.value == 'fill("a15", "tent")'
        await pilot.press("enter")
        await finished(pilot, pane)
        turn = pane.session.turns[0]
        assert turn.action.payload == {"name": "fill", "arguments": {"bid": "a15", "value": "tent"}}
        shown = pane.screen_view.text
        assert "Search results for tent" in shown
        assert "Trail Pack 28L" not in shown  # replaced, not appended
        assert pane.page_view.element_lines == [e.line for e in elements(NEXT_PAGE)]

        await pilot.press("f2")
        diff = pane.screen_view.text
        assert "-RootWebArea 'Trail Pack 28L" in diff
        assert "+RootWebArea 'Search results for tent" in diff
        assert pane.page_view.element_lines == []  # no picking in the diff
        await pilot.press("f2")
        assert "Search results for tent" in pane.screen_view.text
        assert pane.page_view.element_lines  # the page again, pickable

        # The next call is checked against the new page's ids.
        call.value = 'click("a36")'
        await pilot.press("enter")
        assert "no element [a36] on this page" in error_text(pane)
        assert len(pane.session.turns) == 1


async def test_bad_calls_are_refused_with_the_reason_and_nothing_is_sent(web_model: Path) -> None:
    app = make_app(web_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "web", WebPane)
        call = pane.action_bar.call
        call.focus()
        for text, reason in [
            ('click("zz99")', "there is no element [zz99] on this page"),
            ('clik("a13")', "did you mean click?"),
            ('fill("a15")', "fill needs value"),
            ("click(a13)", "plain value"),
            ('scroll(0, "down")', "delta_y must be a number"),
        ]:
            call.value = text
            await pilot.press("enter")
            assert reason in error_text(pane), (text, error_text(pane))
            assert call.has_class("-invalid")
        await pilot.pause()
        assert pane.session.turns == [] and not pane.busy


async def test_keyboard_picking_and_the_action_list() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "web", WebPane)
        page = pane.page
        first, second = elements(page)[:2]
        pane.page_view.focus()
        await pilot.press("down", "down", "enter")
        assert pane.page_view.cursor == second.line
        assert pane.action_bar.call.value == f'click("{second.bid}")'
        assert first.line < second.line

        colour = next(e for e in elements(page) if e.choosable)
        pane.page_view.cursor = colour.line
        pane.page_view.focus()
        await pilot.press("enter")
        assert pane.action_bar.call.value == f'select_option("{colour.bid}", "{colour.options[0]}")'

        select = pane.action_bar.query_one("#action-kind")
        select.value = "goto"  # type: ignore[attr-defined]
        await pilot.pause()
        assert pane.action_bar.call.value == 'goto("")'
        assert "goto(url)" in str(pane.action_bar.query_one("#signature").render())
        assert pane.action_bar.call.cursor_position == len('goto("')
