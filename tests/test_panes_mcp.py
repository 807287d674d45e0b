"""The MCP pane: tools from the scenario or a saved tools/list file, calls checked against
the picked tool's input schema, results shown as highlighted JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pane_driver import error_text, finished, make_app, open_tab, scripted, styled, view_lines

from agentworld_tui.ui.panes.mcp import McpPane
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import new_session

RESULT = '{"content": [{"type": "text", "text": "[FILE] inbox.md\\n[DIR] projects"}]}'


@pytest.fixture(scope="module")
def mcp_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "mcp.gguf", RESULT)


async def test_pick_a_tool_fill_arguments_and_see_the_json_result(mcp_model: Path) -> None:
    app = make_app(mcp_model)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        names = [t.name for t in pane.tool_list.tools]
        assert names[:3] == ["read_text_file", "write_file", "list_directory"]
        pane.tool_list.focus()
        await pilot.press("down", "down", "enter")
        assert pane.tool_name.value == "list_directory"
        assert json.loads(pane.arguments.text) == {"path": ""}
        assert pane.arguments.has_focus
        pane.arguments.text = '{"path": "/home/maya/notes"}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane)
        turn = pane.session.turns[0]
        assert turn.action.payload == {
            "name": "list_directory",
            "arguments": {"path": "/home/maya/notes"},
        }
        # The call stays above its result.
        call = '› list_directory(path="/home/maya/notes")'
        assert pane.screen_view.text.strip() == f"{call}\n{RESULT}"
        assert styled(view_lines(pane))  # shown as JSON, coloured
        assert pane.reasoning.view.text == "The agent acts."


async def test_bad_calls_are_refused_next_to_the_field_and_nothing_is_sent(
    mcp_model: Path,
) -> None:
    app = make_app(mcp_model)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        pane.pick("read_text_file")
        pane.arguments.text = '{"path": "/home/maya/notes/inbox.md", "head": "ten"}'
        await pilot.press("ctrl+s")
        assert "head" in error_text(pane) and "integer" in error_text(pane)
        assert pane.arguments.has_class("-invalid")

        pane.arguments.text = '{"head": 3}'
        await pilot.press("ctrl+s")
        assert "path" in error_text(pane)

        pane.arguments.text = '{"path": '
        await pilot.press("ctrl+s")
        assert "not JSON" in error_text(pane)

        pane.tool_name.value = "delete_everything"
        pane.arguments.text = "{}"
        await pilot.press("ctrl+s")
        assert "unknown tool 'delete_everything'" in error_text(pane)
        assert pane.tool_name.has_class("-invalid")
        assert not pane.arguments.has_class("-invalid")

        await pilot.pause()
        assert pane.session.turns == []
        assert not pane.busy and app.simulator.waiting() == []

        pane.pick("read_text_file")  # a good call clears the marks and goes out
        assert error_text(pane) == "" and not pane.tool_name.has_class("-invalid")


async def test_tools_from_a_saved_tools_list_answer_replace_the_list(tmp_path: Path) -> None:
    saved = tmp_path / "tools-list.json"
    saved.write_text(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "tools": [
                        {
                            "name": "get_weather",
                            "description": "Current weather for a city.",
                            "inputSchema": {
                                "type": "object",
                                "properties": {
                                    "city": {"type": "string"},
                                    "units": {"type": "string", "enum": ["metric", "imperial"]},
                                },
                                "required": ["city", "units"],
                            },
                        }
                    ]
                },
            }
        ),
        encoding="utf-8",
    )
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        await pilot.press("f2")
        assert pane.tool_source.display
        await pilot.press(*str(tmp_path / "missing.json"), "enter")
        assert "cannot read" in str(pane.tool_source.query_one("#source-error").render())
        pane.tool_source.query_one("#source-path").value = str(saved)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert not pane.tool_source.display
        assert [t.name for t in pane.tool_list.tools] == ["get_weather"]
        assert pane.tool_name.value == "get_weather"
        assert json.loads(pane.arguments.text) == {"city": "", "units": "metric"}
        assert "get_weather" in pane.session.system_prompt
        pane.arguments.text = '{"city": "Oslo", "units": "kelvin"}'
        await pilot.press("ctrl+s")
        assert "units" in error_text(pane) and "metric" in error_text(pane)


async def test_a_pasted_list_that_is_not_tools_says_why(tmp_path: Path) -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        before = [t.name for t in pane.tool_list.tools]
        await pilot.press("f2")
        paste = pane.tool_source.query_one("#source-paste")
        paste.text = '{"tools": [{"description": "no name"}]}'  # type: ignore[attr-defined]
        await pilot.click("#source-use-paste")
        assert "has no name" in str(pane.tool_source.query_one("#source-error").render())
        assert [t.name for t in pane.tool_list.tools] == before
        paste.text = '[{"name": "ping", "inputSchema": {"type": "object"}}]'  # type: ignore[attr-defined]
        await pilot.pause(0.3)  # a button ignores a second click during its press effect
        await pilot.click("#source-use-paste")
        await pilot.pause()
        assert [t.name for t in pane.tool_list.tools] == ["ping"]


async def test_without_a_tool_list_any_well_formed_call_goes_as_written(mcp_model: Path) -> None:
    app = make_app(mcp_model)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_tab(app, pilot, "mcp", McpPane)
        bare = Scenario("no-tools", "A server whose tools are unknown")
        session, _ = new_session(pane.domain, bare)
        pane.replace_session(session)
        await pilot.pause()
        assert pane.tool_list.tools == []
        assert "none given" in str(pane.tool_list.border_title)
        pane.tool_name.value = ""
        pane.arguments.text = "{}"
        await pilot.press("ctrl+s")
        assert "pick a tool" in error_text(pane)
        pane.tool_name.value = "lookup_order"
        pane.arguments.text = '{"order_id": 1042, "[bold]": "[/]"}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane)
        assert pane.session.turns[0].action.payload == {
            "name": "lookup_order",
            "arguments": {"order_id": 1042, "[bold]": "[/]"},
        }
