"""Untrusted text has one way onto the app's screen: the widgets that show or hold text
sanitize what they are handed (the views, every input field, every editor), and every
line any widget draws loses what a terminal acts on before it is written (``SafeCells``).
tests/test_app_pty.py drives the real app with hostile files and agents; these pin each
piece, and that no part of the app builds a field that skips them."""

from __future__ import annotations

import ast
from pathlib import Path

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from test_cli_output import HOSTILE, harmful
from textual.app import App, ComposeResult
from textual.color import Color

from agentworld_tui.ui.textual_private import SafeCells
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.world.sanitize import sanitize

UI = Path(__file__).resolve().parent.parent / "agentworld_tui" / "ui"
FIELD_CLASSES = {"Input": "widgets/field.py", "TextArea": "widgets/editor.py"}


def test_no_part_of_the_app_builds_a_field_that_skips_sanitizing() -> None:
    """Textual's Input and TextArea are built, or subclassed, only by the app's own Field
    and Editor: every other field is one of those."""
    found = []
    for path in UI.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(UI).as_posix()
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names = [node.func.id]
            elif isinstance(node, ast.ClassDef):
                names = [b.id for b in node.bases if isinstance(b, ast.Name)]
            found += [(where, n) for n in names if n in FIELD_CLASSES and FIELD_CLASSES[n] != where]
    assert found == []


class Fields(App[None]):
    def compose(self) -> ComposeResult:
        yield Field(HOSTILE, id="field")
        yield Editor(HOSTILE, id="editor")
        yield LineView(id="view")


async def test_fields_editors_and_views_hold_what_they_are_given_sanitized() -> None:
    app = Fields()
    async with app.run_test() as pilot:
        field, editor = app.query_one(Field), app.query_one(Editor)
        view = app.query_one(LineView)
        assert field.value == sanitize(HOSTILE) and editor.text == sanitize(HOSTILE)
        field.value = "again " + HOSTILE
        editor.text = "again " + HOSTILE
        editor.load_text("loaded " + HOSTILE)
        view.append("streamed " + HOSTILE)
        view.append_lines([Text("line " + HOSTILE, style="bold")])
        await pilot.pause()
        assert field.value == "again " + sanitize(HOSTILE)
        assert editor.text == "loaded " + sanitize(HOSTILE)
        assert view.text.split("\n")[:2] == [
            f"{p} {sanitize(HOSTILE)}" for p in ("streamed", "line")
        ]
        assert view.line(1).style == "bold"


def test_safe_cells_removes_what_a_terminal_acts_on_and_keeps_the_layout() -> None:
    segments = [
        Segment("plain ", Style(bold=True)),
        Segment("x" + HOSTILE + "\t\n", Style(color="red")),
        Segment("\x1b[2J", None, [(1, 0)]),  # a control segment is Textual's own: kept
    ]
    filtered = SafeCells().apply(segments, Color(0, 0, 0))
    assert [s.style for s in filtered] == [s.style for s in segments]
    assert filtered[0] == segments[0] and filtered[2] == segments[2]
    assert harmful(filtered[1].text, allowed="") == []
    assert cell_len(filtered[1].text) == cell_len(segments[1].text)


def test_safe_cells_hands_clean_lines_back_as_they_are() -> None:
    segments = [Segment("nothing to remove", Style(italic=True))]
    assert SafeCells().apply(segments, Color(0, 0, 0)) is segments
