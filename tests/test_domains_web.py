"""Web: the 21 browser calls, read without evaluating anything; element picking; diffs."""

from __future__ import annotations

import json
from pathlib import Path

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
