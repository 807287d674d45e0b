"""The Android pane: the wireframe beside the raw hierarchy, a click on the wireframe
filling a tap on the node under it, the action buttons, checks before sending, and the
next screen redrawn from the predicted hierarchy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pane_driver import error_text, finished, make_app, open_tab, scripted, styled, view_lines

from agentworld_tui.ui.panes.android import AndroidPane

INBOX = (
    '<hierarchy rotation="0">\n'
    '  <node class="android.widget.FrameLayout" bounds="[0,0][1080,2400]">\n'
    '    <node class="android.widget.TextView" text="Inbox" bounds="[40,160][1040,300]"/>\n'
    '    <node class="android.widget.Button" text="New chat" clickable="true" '
    'bounds="[40,2000][1040,2200]"/>\n'
    "  </node>\n"
    "</hierarchy>"
)


@pytest.fixture(scope="module")
def android_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scripted(tmp_path_factory.mktemp("m") / "android.gguf", INBOX)


async def test_clicking_a_button_in_the_wireframe_taps_it_and_the_screen_is_redrawn(
    android_model: Path,
) -> None:
    app = make_app(android_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "android", AndroidPane)
        frame = pane.wireframe.frame
        assert frame is not None
        assert any("[Sign in]" in line for line in frame.lines)
        assert "<hierarchy" in pane.screen_view.text  # the raw side
        assert styled(view_lines(pane))  # highlighted as XML
        sign_in = frame.find("Sign in")
        assert sign_in is not None
        box = frame.cells(sign_in)
        assert box is not None
        col, row = (box[0] + box[2]) // 2, box[1]
        await pilot.click(pane.wireframe, offset=(col, row))
        x, y = sign_in.center
        assert json.loads(pane.action_input.value) == {
            "action": "tap",
            "element": "Sign in",
            "x": x,
            "y": y,
        }
        assert pane.wireframe.picked == sign_in
        await pilot.press("enter")
        await finished(pilot, pane)
        turn = pane.session.turns[0]
        assert turn.action.payload["element"] == "Sign in"
        assert "Inbox" in pane.screen_view.text and "Sign in" not in pane.screen_view.text
        redrawn = pane.wireframe.frame
        assert redrawn is not None and any("Inbox" in line for line in redrawn.lines)
        assert any("[New chat]" in line for line in redrawn.lines)
        assert pane.wireframe.picked is None


async def test_buttons_build_actions_and_bad_ones_are_refused(android_model: Path) -> None:
    app = make_app(android_model)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "android", AndroidPane)
        await pilot.click("#node-type")
        assert "pick a node in the wireframe first" in error_text(pane)

        frame = pane.wireframe.frame
        assert frame is not None
        field = frame.find("Password")
        assert field is not None and field.editable
        pane.wireframe.focus()
        while pane.wireframe.picked != field:  # the arrow keys walk the interactive nodes
            await pilot.press("down")
        await pilot.press("enter")
        assert json.loads(pane.action_input.value)["action"] == "tap"
        await pilot.pause(0.3)
        await pilot.click("#node-type")
        assert json.loads(pane.action_input.value) == {
            "action": "type",
            "element": "Password",
            "text": "",
        }
        await pilot.press("enter")  # typing nothing is refused
        assert "text must be non-empty text" in error_text(pane)
        assert pane.action_input.has_class("-invalid")
        pane.action_input.value = '{"action": "tap", "x": 5000, "y": 10}'
        await pilot.press("enter")
        assert "outside the" in error_text(pane)
        pane.action_input.value = '{"action": "fling"}'
        await pilot.press("enter")
        assert "unknown action 'fling'" in error_text(pane)
        await pilot.pause()
        assert pane.session.turns == []

        await pilot.pause(0.3)
        await pilot.click("#direct-back")
        await finished(pilot, pane)
        assert pane.session.turns[0].action.payload == {"action": "back"}
        for number, direction in enumerate(("up", "down", "left", "right"), start=2):
            await pilot.pause(0.3)
            await pilot.click(f"#direct-swipe-{direction}")
            await finished(pilot, pane, number)
            payload = pane.session.turns[-1].action.payload
            assert payload == {"action": "swipe", "direction": direction}


async def test_long_press_and_open_app_forms() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "android", AndroidPane)
        frame = pane.wireframe.frame
        assert frame is not None
        node = frame.find("Forgot password?")
        assert node is not None
        box = frame.cells(node)
        assert box is not None
        await pilot.click(pane.wireframe, offset=(box[0] + 1, box[1]))
        await pilot.pause(0.3)
        await pilot.click("#node-long_press")
        data = json.loads(pane.action_input.value)
        assert data["action"] == "long_press" and data["element"] == "Forgot password?"
        await pilot.click("#open-app")
        assert pane.action_input.value == '{"action": "open_app", "app_name": ""}'
        await pilot.press(*"Maps")
        assert json.loads(pane.action_input.value) == {"action": "open_app", "app_name": "Maps"}


async def test_hostile_text_in_a_hierarchy_is_drawn_literally() -> None:
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await open_tab(app, pilot, "android", AndroidPane)
        hostile = (
            '<hierarchy><node class="android.widget.Button" clickable="true" '
            'text="[bold red]pwned[/] \x1b[2J" bounds="[0,0][1080,400]"/>'
            '<node class="android.widget.TextView" text="" bounds="[0,400][1080,2400]"/>'
            "</hierarchy>"
        )
        pane.wireframe.show(hostile)
        await pilot.pause()
        drawn = pane.wireframe.render().plain
        assert "[bold red]pwned[/]" in drawn
        assert "\x1b" not in drawn
