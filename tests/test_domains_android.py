"""Android: JSON actions and the hierarchy (the app's drawing of it: test_android_drawing.py)."""

from __future__ import annotations

import json

import pytest

from agentworld_tui.domains.android import (
    AndroidDomain,
    check_action,
    parse_hierarchy,
    screen_size,
)
from agentworld_tui.domains.turn import fenced
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios

ANDROID = AndroidDomain()


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("android")[0]}[name]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"action": "tap", "x": 540, "y": 1635}, {"action": "tap", "x": 540, "y": 1635}),
        ({"action": "click", "element": "Sign in"}, {"action": "tap", "element": "Sign in"}),
        (
            {"action_type": "long_press", "x": 10, "y": 20, "duration_ms": 800},
            {"action": "long_press", "x": 10, "y": 20, "duration_ms": 800},
        ),
        ({"action": "input_text", "text": "hi"}, {"action": "type", "text": "hi"}),
        (
            {"action": "type", "text": "bluefinch42", "element": "Password"},
            {"action": "type", "element": "Password", "text": "bluefinch42"},
        ),
        ({"action": "swipe", "direction": "up"}, {"action": "swipe", "direction": "up"}),
        (
            {"action": "swipe", "start": [540, 2000], "end": [540, 600]},
            {"action": "swipe", "start": [540, 2000], "end": [540, 600]},
        ),
        (
            {"action": "scroll", "direction": "down", "element": "recycler_view"},
            {"action": "scroll", "element": "recycler_view", "direction": "down"},
        ),
        ({"action": "navigate_back"}, {"action": "back"}),
        ({"action": "home"}, {"action": "home"}),
        ({"action": "open_app", "app_name": "Clock"}, {"action": "open_app", "app_name": "Clock"}),
    ],
)
def test_good_actions(data: dict[str, object], expected: dict[str, object]) -> None:
    assert check_action(data) == expected
    action = ANDROID.parse_action(json.dumps(data), scenario("messenger-login"))
    assert action.payload == expected


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"action": "fly"}, "action", "unknown action 'fly'"),
        ({"x": 1}, "action", 'needs "action"'),
        ({"action": "tap"}, "element", "needs an element"),
        ({"action": "tap", "x": 5}, "y", "needs both x and y"),
        ({"action": "tap", "x": -1, "y": 5}, "x", "0 or more"),
        ({"action": "tap", "x": 1.5, "y": 5}, "x", "whole number"),
        ({"action": "tap", "x": 1200, "y": 5}, "x", "outside the 1080x2400 screen"),
        ({"action": "tap", "element": ""}, "element", "non-empty text"),
        ({"action": "type"}, "text", "needs the text"),
        ({"action": "type", "text": 5}, "text", "non-empty text"),
        ({"action": "swipe"}, "direction", "needs a direction"),
        ({"action": "scroll", "direction": "north"}, "direction", "up, down, left, right"),
        ({"action": "swipe", "start": [1, 2]}, "end", "end is missing"),
        ({"action": "swipe", "start": [1], "end": [1, 2]}, "start", "point [x, y]"),
        (
            {"action": "swipe", "direction": "up", "start": [1, 2], "end": [3, 4]},
            "start",
            "not both",
        ),
        ({"action": "back", "x": 3}, "x", "back takes nothing else"),
        ({"action": "open_app"}, "app_name", "needs app_name"),
        ({"action": "long_press", "x": 1, "y": 1, "duration_ms": 0}, "duration_ms", "more than 0"),
    ],
)
def test_bad_actions(data: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        ANDROID.parse_action(json.dumps(data), scenario("messenger-login"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_text_forms() -> None:
    assert ANDROID.parse_action("back", Scenario("x", "X")).payload == {"action": "back"}
    with pytest.raises(ActionError, match="invalid JSON"):
        ANDROID.parse_action("{tap", Scenario("x", "X"))
    with pytest.raises(ActionError, match="JSON object"):
        ANDROID.parse_action("[1, 2]", Scenario("x", "X"))
    with pytest.raises(ActionError, match="empty action"):
        ANDROID.parse_action("  ", Scenario("x", "X"))


def test_turn_rendering() -> None:
    state = scenario("settings-home").state
    action = ANDROID.parse_action(
        '{"action": "tap", "element": "Display"}', scenario("settings-home")
    )
    message = ANDROID.render_turn(1, action, state)
    assert message == (
        "### Turn 1\n\n**Current State:**\n"
        + fenced(state)
        + '\n\n**Action:**\n```json\n{"action": "tap", "element": "Display"}\n```'
    )
    assert action.label == "tap Display"


def test_hierarchy_is_read_from_the_scenarios() -> None:
    scenarios, problems = load_scenarios("android")
    assert problems == [] and len(scenarios) >= 3
    nodes = parse_hierarchy(scenario("messenger-login").state)
    assert screen_size(nodes) == (1080, 2400)
    login = next(n for n in nodes if n.resource_id == "com.chirp.messenger:id/input_login")
    assert login.editable and login.focused and login.bounds == (90, 1020, 990, 1170)
    assert nodes[login.parent].resource_id == "android:id/content"
    password = next(n for n in nodes if n.short_id == "input_password")
    assert password.password and not password.focused


def test_broken_or_json_hierarchies_still_give_nodes() -> None:
    cut = scenario("messenger-login").state[:1500]
    nodes = parse_hierarchy(cut)
    assert 2 <= len(nodes) < 11
    assert parse_hierarchy("no hierarchy here") == []
    tree = {
        "class": "android.widget.FrameLayout",
        "bounds": [0, 0, 720, 1600],
        "children": [
            {
                "class": "android.widget.Button",
                "text": "OK",
                "clickable": True,
                "bounds": "[60,1400][660,1520]",
            }
        ],
    }
    read = parse_hierarchy(json.dumps(tree))
    assert [n.short_class for n in read] == ["FrameLayout", "Button"]
    assert read[1].parent == 0 and read[1].clickable and read[1].bounds == (60, 1400, 660, 1520)


# -- every form of the actions that is accepted, and how the turn writes it --------------

ANDROID_FORMS: dict[str, tuple[dict[str, object], dict[str, object]]] = {
    "tap a point": ({"action": "tap", "x": 540, "y": 1210}, {"action": "tap", "x": 540, "y": 1210}),
    "tap an element": (
        {"action": "tap", "element": "Sign in"},
        {"action": "tap", "element": "Sign in"},
    ),
    "tap an element at its point": (
        {"action": "tap", "element": "Sign in", "x": 540, "y": 1210},
        {"action": "tap", "element": "Sign in", "x": 540, "y": 1210},
    ),
    "AndroidWorld click at a point": (
        {"action_type": "click", "x": 540, "y": 1210},
        {"action": "tap", "x": 540, "y": 1210},
    ),
    "AndroidWorld click by index": (
        {"action_type": "click", "index": 7},
        {"action": "tap", "index": 7},
    ),
    "a phone-use click at a coordinate": (
        {"action": "click", "coordinate": [540, 1210]},
        {"action": "tap", "x": 540, "y": 1210},
    ),
    "a point under point": (
        {"action": "tap", "point": [10, 20]},
        {"action": "tap", "x": 10, "y": 20},
    ),
    "coordinates as floats that are whole": (
        {"action": "tap", "x": 540.0, "y": 1210.0},
        {"action": "tap", "x": 540, "y": 1210},
    ),
    "long press": (
        {"action": "long_press", "element": "Chat with Ana"},
        {"action": "long_press", "element": "Chat with Ana"},
    ),
    "long press with duration_ms": (
        {"action": "long_press", "x": 10, "y": 20, "duration_ms": 1500},
        {"action": "long_press", "x": 10, "y": 20, "duration_ms": 1500},
    ),
    "long press with time in seconds": (
        {"action": "long_press", "coordinate": [10, 20], "time": 2},
        {"action": "long_press", "x": 10, "y": 20, "duration_ms": 2000},
    ),
    "AndroidWorld long_press by index": (
        {"action_type": "long_press", "index": 3},
        {"action": "long_press", "index": 3},
    ),
    "type": ({"action": "type", "text": "hello"}, {"action": "type", "text": "hello"}),
    "type into an element": (
        {"action": "type", "text": "ana", "element": "Username"},
        {"action": "type", "element": "Username", "text": "ana"},
    ),
    "AndroidWorld input_text by index": (
        {"action_type": "input_text", "text": "ana", "index": 2},
        {"action": "type", "index": 2, "text": "ana"},
    ),
    "input_text at a point": (
        {"action_type": "input_text", "text": "ana", "x": 540, "y": 1100},
        {"action": "type", "x": 540, "y": 1100, "text": "ana"},
    ),
    "swipe by direction": (
        {"action": "swipe", "direction": "up"},
        {"action": "swipe", "direction": "up"},
    ),
    "swipe a direction in capitals": (
        {"action": "swipe", "direction": "Left"},
        {"action": "swipe", "direction": "left"},
    ),
    "swipe from a point to a point": (
        {"action": "swipe", "start": [540, 2000], "end": [540, 600]},
        {"action": "swipe", "start": [540, 2000], "end": [540, 600]},
    ),
    "a phone-use swipe, coordinate to coordinate2": (
        {"action": "swipe", "coordinate": [540, 2000], "coordinate2": [540, 600]},
        {"action": "swipe", "start": [540, 2000], "end": [540, 600]},
    ),
    "scroll": (
        {"action_type": "scroll", "direction": "down"},
        {"action": "scroll", "direction": "down"},
    ),
    "scroll inside an element": (
        {"action": "scroll", "direction": "down", "element": "Messages"},
        {"action": "scroll", "element": "Messages", "direction": "down"},
    ),
    "scroll inside an element by index": (
        {"action_type": "scroll", "direction": "up", "index": 4},
        {"action": "scroll", "index": 4, "direction": "up"},
    ),
    "back": ({"action": "back"}, {"action": "back"}),
    "navigate_back": ({"action_type": "navigate_back"}, {"action": "back"}),
    "home": ({"action": "home"}, {"action": "home"}),
    "navigate_home": ({"action_type": "navigate_home"}, {"action": "home"}),
    "system_button Back": ({"action": "system_button", "button": "Back"}, {"action": "back"}),
    "system_button Home": ({"action": "system_button", "button": "Home"}, {"action": "home"}),
    "system_button Enter": ({"action": "system_button", "button": "Enter"}, {"action": "enter"}),
    "keyboard_enter": ({"action_type": "keyboard_enter"}, {"action": "enter"}),
    "open_app": (
        {"action": "open_app", "app_name": "Clock"},
        {"action": "open_app", "app_name": "Clock"},
    ),
    "a phone-use open with text": (
        {"action": "open", "text": "Clock"},
        {"action": "open_app", "app_name": "Clock"},
    ),
    "launch_app": (
        {"action": "launch_app", "app_name": "Chrome"},
        {"action": "open_app", "app_name": "Chrome"},
    ),
    "wait": ({"action_type": "wait"}, {"action": "wait"}),
    "wait with time in seconds": (
        {"action": "wait", "time": 1.5},
        {"action": "wait", "duration_ms": 1500},
    ),
    "answer": (
        {"action_type": "answer", "text": "It is 14:05."},
        {"action": "answer", "text": "It is 14:05."},
    ),
    "status": (
        {"action_type": "status", "goal_status": "complete"},
        {"action": "status", "goal_status": "complete"},
    ),
    "terminate with status": (
        {"action": "terminate", "status": "success"},
        {"action": "status", "goal_status": "success"},
    ),
    "a mobile_use tool call": (
        {"name": "mobile_use", "arguments": {"action": "click", "coordinate": [540, 1210]}},
        {"action": "tap", "x": 540, "y": 1210},
    ),
    "a tool call named after the action": (
        {"name": "tap", "arguments": {"element": "Sign in"}},
        {"action": "tap", "element": "Sign in"},
    ),
    "a tool call with arguments as text": (
        {"name": "mobile_use", "arguments": '{"action": "type", "text": "hi"}'},
        {"action": "type", "text": "hi"},
    ),
    "an OpenAI tool call": (
        {"type": "function", "function": {"name": "mobile_use", "arguments": '{"action": "back"}'}},
        {"action": "back"},
    ),
    "the tool's name beside the action": (
        {"name": "mobile_use", "action": "click", "coordinate": [1, 2]},
        {"action": "tap", "x": 1, "y": 2},
    ),
}


@pytest.mark.parametrize(("data", "payload"), list(ANDROID_FORMS.values()), ids=list(ANDROID_FORMS))
def test_every_form_is_accepted_and_written_as_the_benchmark_does(
    data: dict[str, object], payload: dict[str, object]
) -> None:
    world = scenario("messenger-login")
    action = ANDROID.parse_action(json.dumps(data), world)
    assert action.payload == payload
    assert ANDROID.render_turn(1, action, world.state) == (
        "### Turn 1\n\n**Current State:**\n"
        + fenced(world.state)
        + "\n\n**Action:**\n```json\n"
        + json.dumps(payload, ensure_ascii=False)
        + "\n```"
    )
    # The canonical form reads back as itself.
    assert ANDROID.parse_action(json.dumps(payload), world).payload == payload


@pytest.mark.parametrize(
    ("text", "payload"),
    [
        ("back", {"action": "back"}),
        ("navigate_home", {"action": "home"}),
        ("enter", {"action": "enter"}),
        ("wait", {"action": "wait"}),
        ('```json\n{"action": "tap", "index": 2}\n```', {"action": "tap", "index": 2}),
    ],
)
def test_text_forms_of_actions(text: str, payload: dict[str, object]) -> None:
    assert ANDROID.parse_action(text, Scenario("x", "X")).payload == payload


def test_labels_of_the_new_actions() -> None:
    def label(data: dict[str, object]) -> str:
        return ANDROID.parse_action(json.dumps(data), Scenario("x", "X")).label

    assert label({"action_type": "click", "index": 7}) == "tap #7"
    assert label({"action": "answer", "text": "14:05"}) == 'answer "14:05"'
    assert label({"action": "status", "goal_status": "complete"}) == "status complete"
    assert label({"action": "enter"}) == "enter"


ANDROID_REFUSED: dict[str, tuple[str, str, str]] = {
    "two names for the action": (
        '{"action": "tap", "action_type": "click", "x": 1, "y": 1}',
        "action_type",
        "the action is named twice (action and action_type)",
    ),
    "a coordinate that is no point": (
        '{"action": "click", "coordinate": [1]}',
        "coordinate",
        "coordinate must be a point [x, y] in pixels",
    ),
    "a coordinate and x, y": (
        '{"action": "click", "coordinate": [1, 2], "x": 1, "y": 2}',
        "coordinate",
        "give x and y or coordinate, not both",
    ),
    "an index that is no number": (
        '{"action_type": "click", "index": "7"}',
        "index",
        "index must be a whole number, 0 or more",
    ),
    "a system button without a button": (
        '{"action": "system_button", "button": "Menu"}',
        "button",
        "system_button takes button Back, Home or Enter",
    ),
    "answer without text": ('{"action": "answer"}', "text", "answer needs the text"),
    "status without goal_status": (
        '{"action": "status"}',
        "goal_status",
        "status needs goal_status",
    ),
    "time that is no number of seconds": (
        '{"action": "wait", "time": "soon"}',
        "time",
        "time must be a number of seconds",
    ),
    "both time and duration_ms": (
        '{"action": "wait", "time": 1, "duration_ms": 1000}',
        "time",
        "give duration_ms or time, not both",
    ),
    "a stray key beside arguments": (
        '{"name": "mobile_use", "arguments": {"action": "back"}, "x": 1}',
        "x",
        "unexpected key 'x' beside arguments",
    ),
    "arguments text that is no JSON": (
        '{"name": "mobile_use", "arguments": "{action: back}"}',
        "arguments",
        "arguments given as text are not JSON",
    ),
    "a field the action does not take": (
        '{"action": "wait", "text": "x"}',
        "text",
        "wait takes duration_ms; not 'text'",
    ),
    "a pixel beyond any screen": (
        '{"action": "tap", "x": 10000000, "y": 5}',
        "x",
        "x must be at most 100,000",
    ),
    "a number too long for Python": (
        '{"action": "tap", "x": ' + "5" * 5000 + ', "y": 1}',
        "action",
        "a number of 5,000 digits; numbers may have at most 1,000",
    ),
    "nesting too deep": (
        '{"action": "tap", "element": ' + "[" * 5000 + "]" * 5000 + "}",
        "action",
        "nested too deeply (more than 100 levels)",
    ),
}


@pytest.mark.parametrize(
    ("text", "field", "reason"), list(ANDROID_REFUSED.values()), ids=list(ANDROID_REFUSED)
)
def test_refused_forms_say_why(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        ANDROID.parse_action(text, Scenario("x", "X"))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_actions_handed_over_as_objects_are_checked_too() -> None:
    with pytest.raises(ActionError, match="too large"):
        ANDROID.make_action({"action": "tap", "x": 10**5000, "y": 1}, Scenario("x", "X"))
    with pytest.raises(ActionError, match="not a JSON number"):
        ANDROID.make_action({"action": "wait", "time": float("nan")}, Scenario("x", "X"))


def test_a_deep_json_hierarchy_is_still_read() -> None:
    node: dict[str, object] = {"class": "android.widget.TextView", "text": "leaf"}
    for _ in range(80):  # 160 levels of JSON: deeper than an action may nest
        node = {
            "class": "android.widget.FrameLayout",
            "bounds": [0, 0, 100, 100],
            "children": [node],
        }
    nodes = parse_hierarchy(json.dumps(node))
    assert len(nodes) == 81 and nodes[-1].text == "leaf" and nodes[-1].depth == 80
