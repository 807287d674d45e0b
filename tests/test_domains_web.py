"""Web: the 21 browser calls, read without evaluating anything; element picking; diffs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentworld_tui.domains.web import (
    ACTIONS,
    WebDomain,
    bid_problem,
    call_text,
    element_by_bid,
    element_on_line,
    elements,
    page_diff,
)
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import new_session

WEB = WebDomain()
BLANK = Scenario("blank", "Blank")


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("web")[0]}[name]


EVERY_ACTION = {
    "noop()": ("noop", {}),
    "noop(500)": ("noop", {"wait_ms": 500}),
    "scroll(0, 300)": ("scroll", {"delta_x": 0, "delta_y": 300}),
    "keyboard_press('Enter')": ("keyboard_press", {"key": "Enter"}),
    "keyboard_type('hello world')": ("keyboard_type", {"text": "hello world"}),
    "mouse_move(10.5, 20)": ("mouse_move", {"x": 10.5, "y": 20}),
    "mouse_click(100, 200)": ("mouse_click", {"x": 100, "y": 200}),
    "mouse_dblclick(100, 200, button='left')": (
        "mouse_dblclick",
        {"x": 100, "y": 200, "button": "left"},
    ),
    "mouse_down(1, 2, 'right')": ("mouse_down", {"x": 1, "y": 2, "button": "right"}),
    "mouse_up(1, 2)": ("mouse_up", {"x": 1, "y": 2}),
    'fill("b12", "hello")': ("fill", {"bid": "b12", "value": "hello"}),
    'fill("b12", "")': ("fill", {"bid": "b12", "value": ""}),
    'click("a42")': ("click", {"bid": "a42"}),
    "click('a42', button='middle', modifiers=['Shift'])": (
        "click",
        {"bid": "a42", "button": "middle", "modifiers": ["Shift"]},
    ),
    "hover('a13')": ("hover", {"bid": "a13"}),
    "tab_focus(2)": ("tab_focus", {"index": 2}),
    "new_tab()": ("new_tab", {}),
    "go_back()": ("go_back", {}),
    "go_forward": ("go_forward", {}),
    "goto('https://example.org/a?b=1')": ("goto", {"url": "https://example.org/a?b=1"}),
    "tab_close()": ("tab_close", {}),
    "select_option('a30', 'Forest green')": (
        "select_option",
        {"bid": "a30", "options": "Forest green"},
    ),
    "select_option('a30', ['Slate grey', 'Forest green'])": (
        "select_option",
        {"bid": "a30", "options": ["Slate grey", "Forest green"]},
    ),
    "send_msg_to_user('The cart holds 2 packs.')": (
        "send_msg_to_user",
        {"text": "The cart holds 2 packs."},
    ),
    "report_infeasible('The site is down')": (
        "report_infeasible",
        {"reason": "The site is down"},
    ),
}


def test_all_21_actions_are_known() -> None:
    assert len(ACTIONS) == 21
    assert {name for name, _ in EVERY_ACTION.values()} == set(ACTIONS)


@pytest.mark.parametrize(("text", "expected"), list(EVERY_ACTION.items()))
def test_every_action_parses(text: str, expected: tuple[str, dict[str, object]]) -> None:
    action = WEB.parse_action(text, BLANK)
    assert (action.payload["name"], action.payload["arguments"]) == expected
    # The canonical call text reads back to the same action.
    again = WEB.parse_action(call_text(*expected), BLANK)
    assert again.payload == action.payload


def test_json_form_and_keywords() -> None:
    from_json = WEB.parse_action(
        '{"name": "fill", "arguments": {"bid": "b8", "value": "x"}}', BLANK
    )
    from_call = WEB.parse_action('fill(bid="b8", value="x")', BLANK)
    assert (
        from_json.payload
        == from_call.payload
        == {
            "name": "fill",
            "arguments": {"bid": "b8", "value": "x"},
        }
    )
    positional = WEB.parse_action('{"action": "scroll", "args": [0, -200]}', BLANK)
    assert positional.payload["arguments"] == {"delta_x": 0, "delta_y": -200}
    assert from_call.label == 'fill("b8", "x")'


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('clik("a42")', "name", "did you mean click"),
        ("click()", "bid", "click needs bid"),
        ('click("a42", "left", [], 3)', "arguments", "takes 3 argument(s)"),
        ('click(bid="a1", target="x")', "target", "no parameter 'target'"),
        ('click("a1", bid="a2")', "bid", "given twice"),
        ("click(42)", "bid", "must be text in quotes"),
        ('click("a 42")', "bid", "is not an element id"),
        ('click("a1", button="top")', "button", "must be one of left, middle, right"),
        ('click("a1", modifiers=["Hyper"])', "modifiers", "unknown modifier"),
        ("scroll('down', 3)", "delta_x", "must be a number"),
        ("tab_focus(1.5)", "index", "whole number"),
        ("goto('')", "url", "must not be empty"),
        ("select_option('a30', [])", "options", "option's text or a list"),
        ('click("a42"', "name", "not a browser call"),
        ('page.click("a42")', "name", "write one browser call"),
        ('click("a" + "42")', "arguments", "must be a plain value"),
        ("{nope", "arguments", "invalid JSON"),
        ("   ", "name", "empty action"),
    ],
)
def test_bad_actions_are_refused(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        WEB.parse_action(text, BLANK)
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_calls_are_never_evaluated(tmp_path: Path) -> None:
    target = tmp_path / "touched"
    for text in (
        f"click(open({str(target)!r}, 'w'))",
        f"__import__('pathlib').Path({str(target)!r}).touch()",
        f"fill('a1', value=open({str(target)!r}, 'w').name)",
    ):
        with pytest.raises(ActionError):
            WEB.parse_action(text, BLANK)
    assert not target.exists()


def test_turn_carries_the_json_form_and_the_page() -> None:
    page = scenario("shop-product").state
    action = WEB.parse_action('click("a36")', scenario("shop-product"))
    message = WEB.render_turn(1, action, page)
    assert message.startswith("### Turn 1\n\n**Current State:**\n```\nRootWebArea")
    body = message.split("**Action:**\n```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(body) == {"name": "click", "arguments": {"bid": "a36"}}


def test_elements_of_the_shop_page() -> None:
    page = scenario("shop-product").state
    found = elements(page)
    by_bid = {e.bid: e for e in found}
    assert by_bid["a36"].role == "button" and by_bid["a36"].name == "Add to cart"
    assert by_bid["a17"].name == "Today's deals"
    colour = by_bid["a30"]
    assert colour.role == "combobox" and colour.options == (
        "Slate grey",
        "Forest green",
        "Ember orange",
    )
    assert by_bid["a31"].depth == colour.depth + 1
    # Picking fills the call that fits the element.
    assert by_bid["a36"].action() == 'click("a36")'
    assert by_bid["a15"].action("hiking poles") == 'fill("a15", "hiking poles")'
    assert by_bid["a35"].action("2") == 'fill("a35", "2")'
    assert colour.action() == 'select_option("a30", "Slate grey")'
    assert colour.action("Forest green") == 'select_option("a30", "Forest green")'
    # Lines without a bid (static text) are not elements.
    lines = page.splitlines()
    price_line = next(i for i, line in enumerate(lines) if "$89.00" in line)
    assert element_on_line(page, price_line) is None
    add_line = next(i for i, line in enumerate(lines) if "'Add to cart'" in line)
    picked = element_on_line(page, add_line)
    assert picked is not None and picked.bid == "a36"
    # The filled action parses back into a valid action.
    assert WEB.parse_action(picked.action(), scenario("shop-product")).payload["arguments"] == {
        "bid": "a36"
    }


def test_elements_of_the_other_pages() -> None:
    login = scenario("tracker-login").state
    email = element_by_bid(login, "b8")
    assert email is not None and email.fillable and email.name == "Email address"
    keep = element_by_bid(login, "b12")
    assert keep is not None and keep.role == "checkbox" and keep.action() == 'click("b12")'
    flights = scenario("flight-search").state
    to = element_by_bid(flights, "c27")
    assert to is not None and to.role == "combobox" and to.fillable and not to.choosable
    cabin = element_by_bid(flights, "c32")
    assert cabin is not None and cabin.choosable and len(cabin.options) == 3


def test_bid_problem_names_a_missing_element() -> None:
    page = scenario("tracker-login").state
    assert bid_problem(WEB.parse_action('click("b14")', BLANK), page) == ""
    assert "no element [z9]" in bid_problem(WEB.parse_action('click("z9")', BLANK), page)
    assert bid_problem(WEB.parse_action("go_back()", BLANK), page) == ""


def test_page_diff() -> None:
    before = scenario("shop-product").state
    after = before.replace("[a18] link 'Cart (0)'", "[a18] link 'Cart (2)'")
    diff = page_diff(before, after)
    assert diff.startswith("--- before\n+++ after\n@@")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and "[a18]" in line]
    assert [line[:24] for line in changed] == [
        "-\t\t[a18] link 'Cart (0)'",
        "+\t\t[a18] link 'Cart (2)'",
    ]
    assert page_diff(before, before) == ""


def test_system_prompt_lists_the_actions() -> None:
    session, problems = new_session(WEB, scenario("flight-search"))
    assert problems == []
    assert "select_option(bid, options)" in session.system_prompt
    assert "noop(wait_ms=1000)" in session.system_prompt
    assert "Lisbon to Berlin" in session.system_prompt
    assert "{{" not in session.system_prompt


# -- every form of the 21 calls that is accepted, and how the turn writes it -------------

WEB_KEYWORD_FORMS: dict[str, tuple[str, dict[str, object]]] = {
    "noop(wait_ms=...)": ("noop", {"wait_ms": 250}),
    "scroll(delta_x=..., delta_y=...)": ("scroll", {"delta_x": 0, "delta_y": -120.5}),
    "keyboard_press(key=...)": ("keyboard_press", {"key": "ControlOrMeta+a"}),
    "keyboard_type(text=...)": ("keyboard_type", {"text": "Lisbon"}),
    "mouse_move(x=..., y=...)": ("mouse_move", {"x": 12, "y": 640.5}),
    "mouse_click(..., button=...)": ("mouse_click", {"x": 5, "y": 6, "button": "right"}),
    "mouse_dblclick(...)": ("mouse_dblclick", {"x": 5, "y": 6}),
    "mouse_down(...)": ("mouse_down", {"x": 5, "y": 6, "button": "middle"}),
    "mouse_up(...)": ("mouse_up", {"x": 5, "y": 6, "button": "left"}),
    "fill(bid=..., value=...)": ("fill", {"bid": "c27", "value": "Berlin"}),
    "fill(..., enable_autocomplete_menu=True)": (
        "fill",
        {"bid": "c27", "value": "Ber", "enable_autocomplete_menu": True},
    ),
    "fill(..., enable_autocomplete_menu=False)": (
        "fill",
        {"bid": "c27", "value": "", "enable_autocomplete_menu": False},
    ),
    "click(bid=..., button=..., modifiers=...)": (
        "click",
        {"bid": "a42", "button": "left", "modifiers": ["ControlOrMeta", "Shift"]},
    ),
    "hover(bid=...)": ("hover", {"bid": "a13"}),
    "tab_focus(index=...)": ("tab_focus", {"index": 0}),
    "new_tab()": ("new_tab", {}),
    "go_back()": ("go_back", {}),
    "go_forward()": ("go_forward", {}),
    "goto(url=...)": ("goto", {"url": "https://tracker.example/login"}),
    "tab_close()": ("tab_close", {}),
    "select_option(bid=..., options=...)": (
        "select_option",
        {"bid": "c32", "options": ["Economy"]},
    ),
    "send_msg_to_user(text=...)": ("send_msg_to_user", {"text": "Done: 2 packs in the cart."}),
    "report_infeasible(reason=...)": ("report_infeasible", {"reason": "No flights that day."}),
}


def web_turn(name: str, arguments: dict[str, object]) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"### Turn 1\n\n**Action:**\n```json\n{body}\n```"


def keyword_call(name: str, arguments: dict[str, object]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


@pytest.mark.parametrize(
    ("name", "arguments"), list(WEB_KEYWORD_FORMS.values()), ids=list(WEB_KEYWORD_FORMS)
)
def test_every_action_with_keyword_arguments(name: str, arguments: dict[str, object]) -> None:
    action = WEB.parse_action(keyword_call(name, arguments), BLANK)
    assert action.payload == {"name": name, "arguments": arguments}
    assert WEB.render_turn(1, action, None) == web_turn(name, arguments)
    # The same action from the action bar, and from its canonical call text.
    assert WEB.make_action({"name": name, "arguments": arguments}, BLANK) == action
    assert WEB.parse_action(call_text(name, arguments), BLANK).payload == action.payload


FILL = {"name": "fill", "arguments": {"bid": "b8", "value": "ana@example.org"}}
FILL_MENU = {
    "name": "fill",
    "arguments": {"bid": "b8", "value": "ana@example.org", "enable_autocomplete_menu": True},
}
WEB_FORMS: dict[str, tuple[str, dict[str, object]]] = {
    "positional call": ('fill("b8", "ana@example.org")', FILL),
    "keyword call": ('fill(bid="b8", value="ana@example.org")', FILL),
    "single quotes": ("fill('b8', 'ana@example.org')", FILL),
    "in a python fence": ('```python\nfill("b8", "ana@example.org")\n```', FILL),
    "in a bare fence": ('```\nfill("b8", "ana@example.org")\n```', FILL),
    "JSON name and arguments": (json.dumps(FILL), FILL),
    "JSON action and args as a list": (
        '{"action": "fill", "args": ["b8", "ana@example.org"]}',
        FILL,
    ),
    "JSON with parameters": (
        '{"name": "fill", "parameters": {"bid": "b8", "value": "ana@example.org"}}',
        FILL,
    ),
    "JSON arguments as text": (
        json.dumps({"name": "fill", "arguments": json.dumps(FILL["arguments"])}),
        FILL,
    ),
    "JSON with the arguments beside the name": (
        '{"action": "fill", "bid": "b8", "value": "ana@example.org"}',
        FILL,
    ),
    "JSON action_type": ('{"action_type": "fill", "bid": "b8", "value": "ana@example.org"}', FILL),
    "JSON holding the call text": ("{\"action\": \"fill('b8', 'ana@example.org')\"}", FILL),
    "an OpenAI tool call": (
        json.dumps(
            {"type": "function", "function": {"name": "fill", "arguments": FILL["arguments"]}}
        ),
        FILL,
    ),
    "JSON's true in a call": (
        'fill("b8", "ana@example.org", enable_autocomplete_menu=true)',
        FILL_MENU,
    ),
    "the third argument positionally": (
        'fill("b8", "ana@example.org", True)',
        FILL_MENU,
    ),
    "a bare name": ("go_back", {"name": "go_back", "arguments": {}}),
    "JSON without arguments": ('{"name": "tab_close"}', {"name": "tab_close", "arguments": {}}),
}


@pytest.mark.parametrize(("text", "payload"), list(WEB_FORMS.values()), ids=list(WEB_FORMS))
def test_every_form_is_accepted_and_written_as_the_benchmark_does(
    text: str, payload: dict[str, Any]
) -> None:
    action = WEB.parse_action(text, BLANK)
    assert action.payload == payload
    assert WEB.render_turn(1, action, None) == web_turn(payload["name"], payload["arguments"])


def test_the_prompt_lists_fill_with_its_autocomplete_flag() -> None:
    session, _ = new_session(WEB, scenario("flight-search"))
    assert "fill(bid, value, enable_autocomplete_menu=false)" in session.system_prompt


WEB_REFUSED: dict[str, tuple[str, str, str]] = {
    "a flag that is no flag": (
        'fill("b8", "x", enable_autocomplete_menu="yes")',
        "enable_autocomplete_menu",
        "fill: enable_autocomplete_menu must be True or False",
    ),
    "two calls": ('click("a1")\nclick("a2")', "name", "one browser call per turn; 2 were given"),
    "an unknown keyword": (
        'fill("b8", "x", autocomplete=True)',
        "autocomplete",
        "fill has no parameter 'autocomplete': fill(bid, value, enable_autocomplete_menu=false)",
    ),
    "JSON naming the action twice": (
        '{"name": "click", "action": "click", "bid": "a1"}',
        "action",
        "the action gives name and action: give one of them",
    ),
    "JSON with a stray key beside arguments": (
        '{"name": "click", "arguments": {"bid": "a1"}, "bid": "a2"}',
        "bid",
        "unexpected key 'bid' beside arguments",
    ),
    "JSON arguments text that is no JSON": (
        '{"name": "click", "arguments": "bid=a1"}',
        "arguments",
        "arguments given as text are not JSON",
    ),
    "a number too long for Python": (
        "mouse_click(1" + "0" * 5000 + ", 1)",
        "name",
        "a number is too long: numbers may have at most 1,000 digits",
    ),
    "a hex number too large to write out": (
        "mouse_click(0x" + "f" * 5000 + ", 1)",
        "x",
        "mouse_click: x: a number too large to write out",
    ),
    "an infinite coordinate": ("mouse_click(1e999, 1)", "x", "inf is not a JSON number"),
    "a JSON number too long": (
        '{"name": "mouse_click", "arguments": [' + "1" * 5000 + ", 1]}",
        "arguments",
        "a number of 5,000 digits; numbers may have at most 1,000",
    ),
    "JSON nested too deeply": (
        '{"name": "select_option", "arguments": ["a1", ' + "[" * 5000 + "]" * 5000 + "]}",
        "arguments",
        "nested too deeply",
    ),
    "options nested too deeply in a call": (
        "select_option('a1', " + "[" * 150 + "]" * 150 + ")",
        "options",
        "nested too deeply",
    ),
    "a call the parser cannot hold": (
        "noop(" + "-" * 19000 + "1)",
        "name",
        "the call is nested too deeply to read",
    ),
}


@pytest.mark.parametrize(
    ("text", "field", "reason"), list(WEB_REFUSED.values()), ids=list(WEB_REFUSED)
)
def test_refused_forms_say_why(text: str, field: str, reason: str) -> None:
    with pytest.raises(ActionError) as caught:
        WEB.parse_action(text, BLANK)
    assert caught.value.field == field
    assert reason in str(caught.value)
