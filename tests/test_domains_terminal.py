"""Terminal: every form of keystrokes an agent or a user sends, and the turn it becomes.

The turn writes the action as the benchmark does: a JSON list of
``{"keystrokes": ..., "duration": seconds}`` entries in a fenced block, after the screen.
"""

from __future__ import annotations

import json

import pytest

from agentworld_tui.domains.terminal import TerminalDomain, is_key
from agentworld_tui.domains.turn import fenced
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario

TERMINAL = TerminalDomain()
BLANK = Scenario("blank", "Blank")
SCREEN = "root@ad092d3df69c:/app# "


def turn(entries: list[dict[str, object]]) -> str:
    return (
        "### Turn 1\n\n**Current State:**\n"
        + fenced(SCREEN)
        + "\n\n**Action:**\n```json\n"
        + json.dumps(entries, ensure_ascii=False)
        + "\n```"
    )


def keys(keystrokes: str, duration: float) -> dict[str, object]:
    return {"keystrokes": keystrokes, "duration": duration}


TERMINAL_FORMS: dict[str, tuple[str, list[dict[str, object]]]] = {
    "a command line, run": ("ls -la /app", [keys("ls -la /app\n", 1.0)]),
    "a command line with its newline": ("make test\n", [keys("make test\n", 1.0)]),
    "leading spaces kept": ("  history -c", [keys("  history -c\n", 1.0)]),
    "a shell test that starts with [": (
        "[ -f go.mod ] && echo yes",
        [keys("[ -f go.mod ] && echo yes\n", 1.0)],
    ),
    "a shell test of a quoted variable": (
        '[ "$USER" = root ] && id',
        [keys('[ "$USER" = root ] && id\n', 1.0)],
    ),
    "a bash [[ test": ('[[ -n "$HOME" ]] && pwd', [keys('[[ -n "$HOME" ]] && pwd\n', 1.0)]),
    "a brace group": ("{ date; uptime; }", [keys("{ date; uptime; }\n", 1.0)]),
    "a command in a bash fence": ("```bash\ncargo build\n```", [keys("cargo build\n", 1.0)]),
    "C-c": ("C-c", [keys("C-c", 0.5)]),
    "C-d": ("C-d", [keys("C-d", 0.5)]),
    "C-z": ("C-z", [keys("C-z", 0.5)]),
    "C-l": ("C-l", [keys("C-l", 0.5)]),
    "Escape, for vim": ("Escape", [keys("Escape", 0.5)]),
    "another tmux key": ("C-r", [keys("C-r", 0.5)]),
    "a meta key": ("M-x", [keys("M-x", 0.5)]),
    "an arrow key": ("Up", [keys("Up", 0.5)]),
    "the benchmark's list": (
        '[{"keystrokes": "cd /app\\n", "duration": 0.1}, {"keystrokes": "ls\\n", "duration": 2}]',
        [keys("cd /app\n", 0.1), keys("ls\n", 2.0)],
    ),
    "keys and text in one list": (
        '[{"keystrokes": "vim a.txt\\n", "duration": 1}, {"keystrokes": "ihello", '
        '"duration": 0.1}, {"keystrokes": "Escape", "duration": 0.1}, '
        '{"keystrokes": ":wq\\n", "duration": 0.5}]',
        [keys("vim a.txt\n", 1.0), keys("ihello", 0.1), keys("Escape", 0.1), keys(":wq\n", 0.5)],
    ),
    "a pretty-printed list": (
        '[\n  {\n    "keystrokes": "ls\\n",\n    "duration": 0.1\n  }\n]',
        [keys("ls\n", 0.1)],
    ),
    "a list of keystrokes with spaces inside the brackets": (
        '[ "ls\\n" ]',
        [keys("ls\n", 1.0)],
    ),
    "a wait: empty keystrokes with a duration": (
        '[{"keystrokes": "", "duration": 30}]',
        [keys("", 30.0)],
    ),
    "a wait without keystrokes": ('[{"duration": 10}]', [keys("", 10.0)]),
    "an entry without a duration": ('[{"keystrokes": "pwd\\n"}]', [keys("pwd\n", 1.0)]),
    "a key without a duration": ('[{"keystrokes": "C-c"}]', [keys("C-c", 0.5)]),
    "a duration as text": ('[{"keystrokes": "q", "duration": "2"}]', [keys("q", 2.0)]),
    "bare keystrokes in the list": ('["ls\\n", "C-c"]', [keys("ls\n", 1.0), keys("C-c", 0.5)]),
    "a lone keystroke object": ('{"keystrokes": "ls\\n", "duration": 0.5}', [keys("ls\n", 0.5)]),
    "a lone object typed in a fence": (
        '```json\n{"keystrokes": "id\\n", "duration": 1}\n```',
        [keys("id\n", 1.0)],
    ),
    "the first Terminus's timeout_sec and is_blocking": (
        '[{"keystrokes": "sleep 3\\n", "is_blocking": true, "timeout_sec": 5}]',
        [keys("sleep 3\n", 5.0)],
    ),
    "a Terminus-2 answer": (
        '{"analysis": "The repo is cloned.", "plan": "List it.", "commands": '
        '[{"keystrokes": "ls\\n", "duration": 0.1}], "task_complete": false}',
        [keys("ls\n", 0.1)],
    ),
    "task complete: []": ("[]", []),
    "task complete: a Terminus-2 answer without commands": (
        '{"analysis": "Done.", "plan": "", "commands": [], "task_complete": true}',
        [],
    ),
}


@pytest.mark.parametrize(
    ("text", "entries"), list(TERMINAL_FORMS.values()), ids=list(TERMINAL_FORMS)
)
def test_every_form_is_accepted_and_written_as_the_benchmark_does(
    text: str, entries: list[dict[str, object]]
) -> None:
    action = TERMINAL.parse_action(text, BLANK)
    assert action.payload == entries
    assert TERMINAL.render_turn(1, action, SCREEN) == turn(entries)
    # What the turn writes reads back as the same action (the branch editor relies on it).
    again = TERMINAL.parse_action(json.dumps(action.payload), BLANK)
    assert again.payload == action.payload


def test_labels_and_turns_without_a_state() -> None:
    assert TERMINAL.parse_action("[]", BLANK).label == "(no keystrokes: task complete)"
    action = TERMINAL.parse_action('[{"keystrokes": "ls\\n"}, {"duration": 3}, "C-c"]', BLANK)
    assert action.label == "ls ⏎  (wait 3s)  C-c"
    assert TERMINAL.render_turn(4, action, None) == (
        '### Turn 4\n\n**Action:**\n```json\n[{"keystrokes": "ls\\n", "duration": 1.0}, '
        '{"keystrokes": "", "duration": 3.0}, {"keystrokes": "C-c", "duration": 0.5}]\n```'
    )


def test_key_names() -> None:
    for name in ("C-c", "C-a", "M-b", "C-M-x", "Escape", "Enter", "Tab", "BSpace", "F5", "NPage"):
        assert is_key(name), name
    for text in ("ls", "C-", "c-c", "Esc", "F13", "C-cc", "Enter now"):
        assert not is_key(text), text


TERMINAL_REFUSED: dict[str, tuple[str, str, str]] = {
    "nothing": ("   ", "", "empty action: type a command, or a key such as C-c"),
    "broken JSON": ('[{"keystrokes": "ls"', "", "invalid JSON keystrokes: Expecting"),
    "text that starts like a JSON list": ("[bad json", "", "invalid JSON keystrokes"),
    "an object that is no entry": (
        '{"command": "ls"}',
        "keystrokes",
        'a JSON object here is one entry, {"keystrokes": ..., "duration": ...}',
    ),
    "an unknown key in an entry": (
        '[{"keystrokes": "ls\\n", "wait": 2}]',
        "wait",
        "entry 1: unknown key 'wait'; an entry has keystrokes and duration",
    ),
    "keystrokes that are not text": (
        '[{"keystrokes": ["l", "s"]}]',
        "keystrokes",
        "entry 1: keystrokes must be text",
    ),
    "an entry of neither": ("[{}]", "keystrokes", "entry 1: give keystrokes, or a duration"),
    "an entry that is a number": ('["ls\\n", 5]', "", "entry 2 must be an object"),
    "a duration that is not a number": (
        '[{"keystrokes": "ls\\n", "duration": "soon"}]',
        "duration",
        "entry 1: duration must be a number of seconds",
    ),
    "a negative duration": (
        '[{"keystrokes": "ls\\n", "duration": -1}]',
        "duration",
        "between 0 and 600 s",
    ),
    "a duration too long": (
        '[{"keystrokes": "", "duration": 601}]',
        "duration",
        "between 0 and 600 s",
    ),
    "a wait of no time": (
        '[{"keystrokes": "", "duration": 0}]',
        "",
        "entry 1: empty keystrokes need a duration to wait",
    ),
    "both duration spellings": (
        '[{"keystrokes": "x", "duration": 1, "timeout_sec": 2}]',
        "duration",
        "give duration once",
    ),
    "commands that are no list": ('{"commands": "ls"}', "", "commands must be a list"),
    "a stray key beside commands": (
        '{"commands": [], "extra": 1}',
        "extra",
        "unknown key 'extra' beside commands",
    ),
    "a duration of NaN": ('[{"keystrokes": "x", "duration": NaN}]', "", "NaN is not a JSON number"),
    "a huge duration": (
        '[{"keystrokes": "x", "duration": ' + "9" * 5000 + "}]",
        "",
        "a number of 5,000 digits; numbers may have at most 1,000",
    ),
    "deep nesting": (
        '[{"keystrokes": ' + "[" * 5000 + "]" * 5000 + "}]",
        "",
        "nested too deeply (more than 100 levels)",
    ),
}


@pytest.mark.parametrize(
    ("text", "field", "reason"), list(TERMINAL_REFUSED.values()), ids=list(TERMINAL_REFUSED)
)
def test_refused_forms_say_why(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        TERMINAL.parse_action(text, BLANK)
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_an_empty_entry_list_is_the_finished_task_in_every_form() -> None:
    assert TERMINAL.make_action([], BLANK) == TERMINAL.parse_action("[]", BLANK)
    assert TERMINAL.make_action([], BLANK) == TERMINAL.task_complete()


def test_json_text_within_the_limit_is_taken_however_it_was_spaced() -> None:
    """The limit on a JSON action holds its shortest text, so text that fits is taken: the
    same list, written compactly up to the limit, is not refused once it is read back."""
    domain = TerminalDomain()
    scenario = BLANK
    entries = (200_000 - 1) // 4  # '["a",' ... '"a"]': 199,999 characters
    text = "[" + ",".join(['"a"'] * entries) + "]"
    assert len(text) < 200_000
    action = domain.parse_action(text, scenario)
    assert len(action.payload) == entries
    with pytest.raises(ActionError, match="longer than 200,000 characters"):
        domain.parse_action(text[:-1] + ',"a"]', scenario)
