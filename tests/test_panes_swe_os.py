"""The SWE pane (tool calls from templates, outputs coloured by the file viewed) and the OS
pane (Python actions checked by compiling, the task instruction in view, each predicted
desktop tree replacing the last)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pane_driver import error_text, finished, make_app, open_tab, scripted, styled, view_lines

from agentworld_tui.domains.os_desktop import task_instruction
from agentworld_tui.ui.panes.os import OsPane
from agentworld_tui.ui.panes.swe import SwePane

VIEWED = (
    "Here's the result of running `cat -n` on /testbed/app.py:\n"
    "     1\tdef main() -> int:\n"
    '     2\t    return int("42")'
)
TREE = (
    '<desktop-frame name="main">\n'
    '  <push-button name="Save" x="10" y="20"/>\n'
    '  <label name="Saved to report.odt"/>\n'
    "</desktop-frame>"
)


@pytest.fixture(scope="module")
def swe_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "swe.gguf", VIEWED)


@pytest.fixture(scope="module")
def os_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "os.gguf", TREE)


async def test_swe_view_is_coloured_by_file_type_and_shell_output_is_plain(
    swe_model: Path,
) -> None:
    app = make_app(swe_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "swe", SwePane)
        await pilot.click("#template-view")
        assert pane.tool_name.value == "str_replace_editor"
        assert pane.arguments.text.count("/testbed/") == 1
        pane.arguments.text = '{"command": "view", "path": "/testbed/app.py"}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane)
        first = view_lines(pane)
        assert "def main() -> int:" in pane.screen_view.text
        assert styled(first)  # Python colours

        await pilot.pause(0.3)
        await pilot.click("#template-shell")
        assert pane.tool_name.value == "execute_bash"
        pane.arguments.text = '{"command": "cat -n app.py"}'
        await pilot.press("ctrl+s")
        await finished(pilot, pane, 2)
        second = view_lines(pane)[len(first) :]
        assert any("return int" in line.plain for line in second)
        assert not styled([line for line in second if "return int" in line.plain])


async def test_swe_bad_calls_are_refused(swe_model: Path) -> None:
    app = make_app(swe_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "swe", SwePane)
        pane.pick("str_replace_editor")
        for arguments, reason in [
            ('{"command": "view", "path": "app.py"}', "path must be absolute"),
            ('{"command": "str_replace", "path": "/testbed/app.py"}', "needs old_str"),
            ('{"command": "delete", "path": "/testbed/app.py"}', "command"),
        ]:
            pane.arguments.text = arguments
            await pilot.press("ctrl+s")
            assert reason in error_text(pane), (arguments, error_text(pane))
        pane.pick("execute_bash")
        pane.arguments.text = '{"command": ""}'
        await pilot.press("ctrl+s")
        assert "command" in error_text(pane)
        await pilot.pause()
        assert pane.session.turns == []


async def test_os_code_is_checked_sent_with_the_task_and_the_tree_replaced(
    os_model: Path,
) -> None:
    app = make_app(os_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "os", OsPane)
        instruction = task_instruction(pane.session.scenario)
        assert instruction
        assert instruction[:30] in str(pane.query_one("#instruction").render())
        start_tree = pane.screen_view.text
        assert start_tree.strip()
        assert pane.editor.language == "python"

        pane.editor.text = "pyautogui.click(100, 200"
        await pilot.press("ctrl+s")
        assert "not valid Python (line 1" in error_text(pane)
        assert pane.editor.has_class("-invalid")
        await pilot.pause()
        assert pane.session.turns == []

        pane.editor.text = "import pyautogui\npyautogui.hotkey('ctrl', 's')"
        await pilot.press("ctrl+s")
        await finished(pilot, pane)
        turn = pane.session.turns[0]
        assert turn.action.payload == {
            "code": "import pyautogui\npyautogui.hotkey('ctrl', 's')",
            "instruction": instruction,
        }
        assert "Task Instruction" in turn.user_message
        assert pane.screen_view.text.strip() == TREE  # replaced, not appended
        assert styled(view_lines(pane))  # as XML

        await pilot.click("#special-done")
        await finished(pilot, pane, 2)
        assert pane.session.turns[1].action.payload["code"] == "DONE"
