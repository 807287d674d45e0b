"""The Search pane: search calls checked before sending, results as a readable numbered
list and extracted pages as Markdown, and the simulation instruction edited in the pane
and carried by every turn from the next one on."""

from __future__ import annotations

from pathlib import Path

import pytest
from pane_driver import error_text, finished, make_app, open_tab, scripted

from agentworld_tui.ui.panes.search import SearchPane, search_page

RESULTS = (
    '## Results for "Kvaløysletta footbridge architect"\n'
    "1. [Kvaløysletta footbridge opens to walkers](https://www.itromso.example/news/bridge)\n"
    "   Date: 2019-10-14\n"
    "   The 212-metre cable-stayed bridge by Lund & Aasheim opened on Monday...\n"
    "2. [Lund & Aasheim Arkitekter: projects](https://lundaasheim.example/projects)\n"
    "   Date: 2021-03-02\n"
    "   Bridges and public spaces in northern Norway..."
)
TARGET = "Who designed the Kvaløysletta footbridge?"
ANSWER = "Lund & Aasheim Arkitekter; it opened on 14 October 2019."


@pytest.fixture(scope="module")
def search_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "search.gguf", RESULTS)


def test_results_become_a_numbered_list_and_other_text_stays_markdown() -> None:
    lines = [line.plain for line in search_page(RESULTS)]
    assert lines[0] == 'Results for "Kvaløysletta footbridge architect"'
    assert lines[1] == " 1. Kvaløysletta footbridge opens to walkers"
    assert lines[2] == "    https://www.itromso.example/news/bridge"
    assert lines[3] == "    2019-10-14"
    assert lines[4].startswith("    The 212-metre cable-stayed bridge")
    assert " 2. Lund & Aasheim Arkitekter: projects" in lines
    plain = [line.plain for line in search_page("No results found for that query.")]
    assert plain == ["No results found for that query."]


async def test_search_with_a_simulation_instruction_that_applies_from_the_next_turn(
    search_model: Path,
) -> None:
    app = make_app(search_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "search", SearchPane)
        assert [t.name for t in pane.tool_list.tools] == [
            "web_search",
            "web_extractor",
            "dict_memory",
        ]
        assert "none, the real web" in str(pane.query_one("#simulation-line").render())
        await pilot.press("f2")
        assert pane.simulation.display
        await pilot.press(*TARGET, "enter")
        pane.simulation.query_one("#reference-answer").text = ANSWER  # type: ignore[attr-defined]
        await pilot.click("#simulation-apply")
        await pilot.pause()
        assert not pane.simulation.display
        assert pane.session.scenario.extras["target_query"] == TARGET
        assert TARGET in str(pane.query_one("#simulation-line").render())

        pane.pick("web_search")
        pane.arguments.text = '{"query": ["Kvaløysletta footbridge architect"]}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane)
        first = pane.session.turns[0]
        assert "Simulation Instruction" in first.user_message
        assert ANSWER in first.user_message
        shown = pane.screen_view.text
        assert " 1. Kvaløysletta footbridge opens to walkers" in shown
        assert "https://www.itromso.example/news/bridge" in shown
        assert "](https://" not in shown  # the list, not the raw Markdown

        # Removing the instruction changes the turns to come, not the one already sent.
        await pilot.press("f2")
        await pilot.pause(0.3)
        await pilot.click("#simulation-remove")
        await pilot.pause()
        assert "target_query" not in pane.session.scenario.extras
        pane.pick("web_extractor")
        pane.arguments.text = '{"url": "https://www.itromso.example/news/bridge"}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane, 2)
        second = pane.session.turns[1]
        assert "Simulation Instruction" not in second.user_message
        assert ANSWER in pane.session.turns[0].user_message
        # An extracted page is Markdown: the same text is not turned into a result list.
        assert "1. [Kvaløysletta footbridge opens to walkers](https://" in pane.screen_view.text


async def test_bad_search_calls_are_refused(search_model: Path) -> None:
    app = make_app(search_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "search", SearchPane)
        pane.pick("dict_memory")
        pane.arguments.text = '{"action": "add", "value": "Lund & Aasheim"}'
        await pilot.press("ctrl+s")
        assert "dict_memory add needs key" in error_text(pane)
        pane.arguments.text = '{"action": "forget"}'
        await pilot.press("ctrl+s")
        assert "action" in error_text(pane) and "add" in error_text(pane)
        pane.pick("web_search")
        pane.arguments.text = '{"query": 5}'
        await pilot.press("ctrl+s")
        assert "query" in error_text(pane) and "an array or a string" in error_text(pane)
        assert pane.arguments.has_class("-invalid")
        await pilot.pause()
        assert pane.session.turns == []
