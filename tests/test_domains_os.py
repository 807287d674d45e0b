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


# -- every form of code that is accepted, and how the turn writes it ---------------------

OS_FORMS: dict[str, tuple[str, str]] = {
    "a pyautogui call": ("pyautogui.click(328, 355)", "pyautogui.click(328, 355)"),
    "several lines": (
        "import pyautogui\npyautogui.moveTo(40, 60)\npyautogui.dragTo(400, 60, duration=0.5)",
        "import pyautogui\npyautogui.moveTo(40, 60)\npyautogui.dragTo(400, 60, duration=0.5)",
    ),
    "typing and keys": (
        "pyautogui.write('=SUM(B2:B7)')\npyautogui.press('enter')\npyautogui.hotkey('ctrl', 's')",
        "pyautogui.write('=SUM(B2:B7)')\npyautogui.press('enter')\npyautogui.hotkey('ctrl', 's')",
    ),
    "scroll and keyDown/keyUp": (
        "pyautogui.scroll(-5)\npyautogui.keyDown('shift')\npyautogui.keyUp('shift')",
        "pyautogui.scroll(-5)\npyautogui.keyDown('shift')\npyautogui.keyUp('shift')",
    ),
    "subprocess": (
        "import subprocess\nsubprocess.Popen(['gedit', '/home/sam/notes.txt'])",
        "import subprocess\nsubprocess.Popen(['gedit', '/home/sam/notes.txt'])",
    ),
    "an app helper and a sleep": (
        "import time\ncomputer.open_app('libreoffice --calc')\ntime.sleep(2)",
        "import time\ncomputer.open_app('libreoffice --calc')\ntime.sleep(2)",
    ),
    "a loop": (
        "for key in ['down', 'down', 'enter']:\n    pyautogui.press(key)",
        "for key in ['down', 'down', 'enter']:\n    pyautogui.press(key)",
    ),
    "in a python fence": (
        "```python\npyautogui.doubleClick(10, 20)\n```",
        "pyautogui.doubleClick(10, 20)",
    ),
    "in a py fence": ("```py\npyautogui.rightClick(10, 20)\n```", "pyautogui.rightClick(10, 20)"),
    "in a bare fence": ("```\npyautogui.click()\n```", "pyautogui.click()"),
    "trailing blank lines": ("pyautogui.click(1, 2)\n\n\n", "pyautogui.click(1, 2)"),
    "a long integer Python still reads": ("x = " + "7" * 4000, "x = " + "7" * 4000),
    "WAIT": ("WAIT", "WAIT"),
    "DONE": ("  DONE\n", "DONE"),
    "FAIL": ("FAIL", "FAIL"),
}


@pytest.mark.parametrize(("text", "code"), list(OS_FORMS.values()), ids=list(OS_FORMS))
def test_every_form_is_accepted_and_written_as_the_benchmark_does(text: str, code: str) -> None:
    world = scenario("calc-total")
    action = OS.parse_action(text, world)
    assert action.payload == {"code": code, "instruction": world.extras["instruction"]}
    assert OS.render_turn(1, action, "tag\tname") == (
        f"### Turn 1\n\n**Task Instruction:**\n{world.extras['instruction']}\n\n"
        "**Current State:**\n```\ntag\tname\n```\n\n"
        f"**Action:**\n```python\n{code}\n```"
    )


def test_code_with_backticks_gets_a_longer_fence() -> None:
    action = OS.parse_action("s = '```'\npyautogui.write(s)", Scenario("x", "X"))
    assert OS.render_turn(2, action, None) == (
        "### Turn 2\n\n**Action:**\n````python\ns = '```'\npyautogui.write(s)\n````"
    )


OS_REFUSED: dict[str, tuple[str, str]] = {
    "an integer longer than Python reads": (
        "pyautogui.click(" + "1" * 5000 + ", 2)",
        "not valid Python (line 1): an integer has more digits than Python reads (4,300)",
    ),
    "a chain the compiler cannot hold": (
        "x = " + "-" * 40000 + "1",
        "not valid Python: the code is nested too deeply to compile",
    ),
    "a sum the compiler cannot hold": (
        "x = " + "1+" * 20000 + "1",
        "not valid Python: the code is nested too deeply to compile",
    ),
    "brackets too deep for the parser": (
        "x = " + "(" * 5000 + ")" * 5000,
        "too many nested parentheses",
    ),
    "a NUL character": (
        "pyautogui.write('a')\x00",
        "not valid Python: the code holds a NUL character",
    ),
    "too long": ("x = 1\n" * 10_000, "the code is 59,999 characters; the limit is 50,000"),
}


@pytest.mark.parametrize(("code", "reason"), list(OS_REFUSED.values()), ids=list(OS_REFUSED))
def test_refused_forms_say_why(code: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        OS.parse_action(code, Scenario("x", "X"))
    assert caught.value.field == "code"
    assert reason in str(caught.value)
