"""OS: Python actions that are parsed, never run; the task instruction on every turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentworld_tui.domains.os_desktop import OsDomain
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import new_session

OS = OsDomain()


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("os")[0]}[name]


@pytest.mark.parametrize(
    "code",
    [
        "import pyautogui\npyautogui.click(328, 355)",
        "pyautogui.hotkey('ctrl', 's')",
        "import subprocess\nsubprocess.run(['mkdir', '-p', '/home/sam/Documents/Invoices'])",
        "for name in ['a.pdf', 'b.pdf']:\n    pyautogui.write(name)\n    pyautogui.press('enter')",
        "WAIT",
        "DONE",
        "FAIL",
    ],
)
def test_good_code(code: str) -> None:
    action = OS.parse_action(code, scenario("calc-total"))
    assert action.payload["code"] == code
    assert (
        action.payload["instruction"]
        == "Put the total of the Q2 revenue column in B8 and save the file."
    )


def test_a_fence_around_the_code_is_removed() -> None:
    action = OS.parse_action("```python\npyautogui.click(10, 20)\n```", Scenario("x", "X"))
    assert action.payload == {"code": "pyautogui.click(10, 20)"}
    assert action.label == "pyautogui.click(10, 20)"
    two = OS.parse_action("import pyautogui\npyautogui.press('f2')\n", Scenario("x", "X"))
    assert two.label == "import pyautogui  (+1 lines)"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("", "empty action"),
        ("   \n", "empty action"),
        ("pyautogui.click(10, 20", "line 1"),
        ("x = 1\nif x:\nprint(x)", "line 3"),
        ("pyautogui.write('a')\n  pyautogui.press('b')", "unexpected indent"),
        ("pyautogui.click(x=1, x=2)", "keyword argument repeated"),
    ],
)
def test_bad_code(code: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        OS.parse_action(code, Scenario("x", "X"))
    assert caught.value.field == "code"
    assert reason in str(caught.value)


def test_code_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')"
    action = OS.parse_action(code, Scenario("x", "X"))
    OS.render_turn(1, action, None)
    assert not marker.exists()


def test_turns_carry_instruction_state_and_python() -> None:
    world = scenario("files-invoices")
    session, problems = new_session(OS, world)
    assert problems == []
    assert "The user's task for the agent: Move every invoice PDF" in session.system_prompt
    assert "{{" not in session.system_prompt
    first = session.begin_turn(OS.parse_action("pyautogui.click(520, 124)", world))
    assert first.user_message == (
        "### Turn 1\n\n**Task Instruction:**\n"
        "Move every invoice PDF from Downloads into a new folder Documents/Invoices.\n\n"
        "**Current State:**\n```\n" + world.state + "\n```\n\n"
        "**Action:**\n```python\npyautogui.click(520, 124)\n```"
    )
    session.finish_turn(first, observation="tree", reasoning="", status="complete")
    second = session.begin_turn(OS.parse_action("pyautogui.hotkey('ctrl', 'x')", world))
    assert "**Task Instruction:**\nMove every invoice PDF" in second.user_message
    assert "**Current State:**" not in second.user_message


def test_scenarios_are_desktop_trees() -> None:
    scenarios, problems = load_scenarios("os")
    assert problems == [] and len(scenarios) >= 3
    for world in scenarios:
        header, *rows = world.state.splitlines()
        assert header.split("\t")[:2] == ["tag", "name"]
        assert rows and all(len(row.split("\t")) == 7 for row in rows)
        assert world.extras["instruction"]
