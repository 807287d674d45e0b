"""The app's drawing of an Android screen: the phone wireframe, with cell -> node mapping.

The checks use the shipped scenarios at 38x44 cells: the screen area is then 36x40 cells
inside the frame, 30 x 60 pixels per cell on a 1080x2400 screen.
"""

from __future__ import annotations

from agentworld_tui.domains.android import AndroidDomain, node_action, parse_hierarchy
from agentworld_tui.ui.widgets.android.drawing import layout, wireframe
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios

ANDROID = AndroidDomain()
COLS, ROWS = 38, 44


def scenario(name: str) -> Scenario:
    return {s.name: s for s in load_scenarios("android")[0]}[name]


def test_wireframe_of_the_sign_in_screen() -> None:
    frame = layout(scenario("messenger-login").state, COLS, ROWS)
    lines = frame.lines
    assert len(lines) == ROWS
    assert all(len(line) == COLS for line in lines)
    assert lines[0] == "╭" + "─" * 36 + "╮" and lines[-1] == "╰" + "─" * 36 + "╯"
    assert "○" in lines[-2]
    assert frame.area == (1, 2, 36, 40)
    # Sign in: bounds [90,1560][990,1710] -> cells 4..33, rows 28..30, a light box with
    # the label centred in its middle row.
    assert lines[28][4] == "┌" and lines[28][33] == "┐" and lines[30][4] == "└"
    assert lines[29][15:22] == "Sign in"
    # The focused input: a heavy box, text then underscores to its width.
    assert lines[19][4] == "┏" and lines[21][33] == "┛"
    assert lines[20][5:32] == "Phone number or email" + "_" * 6
    # The unfocused password field [90,1230][990,1380] is two rows high (23..24): an
    # underlined line, no box.
    assert lines[23][4:12] == "Password" and lines[23][12:34] == "_" * 22
    assert lines[24].strip("│ ") == ""
    # A checkbox shows its state; plain text is left-aligned at its bounds.
    assert lines[26][4:8] == "[ ] "
    assert lines[16][4:23] == "Sign in to continue"


def test_cells_map_back_to_nodes_and_pixels() -> None:
    state = scenario("messenger-login").state
    frame = layout(state, COLS, ROWS)
    button = frame.target_at(15, 29)
    assert button is not None and button.text == "Sign in"
    assert frame.node_at(30, 28) == button  # on the box border, still the button
    field = frame.target_at(6, 20)
    assert field is not None and field.short_id == "input_login"
    assert frame.node_at(0, 0) is None and frame.node_at(20, 1) is None  # the frame itself
    blank = frame.node_at(2, 5)
    assert blank is not None and blank.resource_id == "android:id/content"
    assert frame.target_at(2, 5) == blank
    x, y = frame.point_at(15, 29) or (0, 0)
    assert (x, y) == (435, 1650)
    assert 90 <= x < 990 and 1560 <= y < 1710
    assert frame.point_at(0, 29) is None
    assert frame.cells(button) == (4, 28, 33, 30)
    # Selecting the node fills a tap on it, which the domain accepts.
    tap = node_action(button)
    assert tap == {"action": "tap", "element": "Sign in", "x": 540, "y": 1635}
    assert ANDROID.make_action(tap, scenario("messenger-login")).payload == tap
    assert node_action(field, "type") == {
        "action": "type",
        "element": "Phone number or email",
        "text": "",
    }


def test_wireframe_of_the_settings_list() -> None:
    frame = layout(scenario("settings-home").state, COLS, ROWS)
    lines = frame.lines
    # Title [168,546][1032,606] -> col 7, row 11; its summary on the next row.
    assert lines[11][7:25] == "Network & internet"
    assert lines[12][7:33] == "Wi-Fi, mobile, data usage,"
    assert lines[12][34] == "…"  # cut at the view's width
    # The clickable row holds the texts: no box is drawn over them.
    assert "┌" not in "".join(lines[10:40])
    row = frame.target_at(30, 11)
    assert row is not None and row.short_id == "network" and row.clickable
    title = frame.node_at(10, 11)
    assert title is not None and title.text == "Network & internet"
    assert node_action(row, nodes=frame.nodes)["element"] == "Network & internet"
    assert node_action(row)["element"] == "com.android.settings:id/network"
    # An icon whose description does not fit is a mark, not spilled text.
    assert lines[8][4] == "▣" and lines[8][7:22] == "Search settings"


def test_wireframe_of_the_home_screen() -> None:
    frame = layout(scenario("launcher-home").state, COLS, ROWS)
    lines = frame.lines
    # Gmail [0,1440][270,1740] -> cells 1..9, rows 26..30, centred in the middle row.
    assert lines[26][1:10] == "┌───────┐"
    assert lines[28][3:8] == "Gmail"
    gmail = frame.target_at(5, 27)
    assert gmail is not None and gmail.text == "Gmail"
    # Long names are cut with an ellipsis inside their box ([270,1800][540,2100]).
    assert lines[34][10:19] == "│Messag…│"
    search = frame.find("Google search")
    assert search is not None and frame.target_at(20, 38) == search


def test_wide_characters_keep_the_grid() -> None:
    xml = (
        '<hierarchy><node class="android.widget.FrameLayout" bounds="[0,0][1080,2400]">'
        '<node class="android.widget.TextView" text="東京の天気 晴れ" bounds="[0,600][1080,660]" />'
        '<node class="android.widget.Button" text="OK\x1b[31m" clickable="true" '
        'bounds="[0,660][1080,720]" /></node></hierarchy>'
    )
    lines = wireframe(xml, 24, 20)
    for line in lines:
        assert sum(2 if "\u3000" <= c <= "\u9fff" else 1 for c in line) == 24
    assert any("東京" in line for line in lines)
    assert not any("\x1b" in line for line in lines)


def test_small_sizes_are_raised_to_a_minimum() -> None:
    lines = wireframe(scenario("settings-home").state, 3, 2)
    assert len(lines) == 8 and all(len(line) == 12 for line in lines)


def test_a_deeply_nested_answer_gives_no_nodes_and_no_crash() -> None:
    assert parse_hierarchy("[" * 5000 + "]" * 5000) == []
    assert wireframe("{" * 3000, COLS, ROWS)[0].startswith("╭")
