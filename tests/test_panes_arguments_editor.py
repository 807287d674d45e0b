"""The tool-call arguments editor with JSON that would break the parser: a number of
5,000 digits, nesting deeper than the parser goes. The app says what is wrong next to the
editor and keeps running; nothing is sent."""

from __future__ import annotations

import pytest
from pane_driver import error_text, make_app, open_tab

from agentworld_tui.ui.panes.mcp import McpPane

HUGE = "1" * 5000


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"path": "/home/maya", "head": ' + HUGE + "}", "a number of 5,000 digits"),
        ('{"path": "/home/maya", "head": -' + HUGE + "}", "numbers may have at most 1,000"),
        ('{"path": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        ('{"path": ' + "[" * 300 + "]" * 300 + "}", "nested too deeply"),
        ('{"path": "/home/maya", "head": 1e999}', "1e999 is too large for a number"),
    ],
    ids=["huge number", "huge negative number", "deep nesting", "deep but parsed", "1e999"],
)
async def test_the_editor_refuses_what_would_break_the_parser(arguments: str, reason: str) -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        pane.pick("read_text_file")
        pane.arguments.text = arguments
        pane.arguments.focus()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert reason in error_text(pane)
        assert pane.arguments.has_class("-invalid")
        assert pane.session.turns == []
        # The app is still there: the editor takes the next call.
        pane.arguments.text = '{"path": "/home/maya/notes/inbox.md", "head": 5}'
        action = pane.build_action()
        assert action.payload["arguments"]["head"] == 5
