"""The phone screen drawn from its UI hierarchy into character cells inside a phone
outline, and the geometry that maps a cell back to the node under it and to a pixel. Only
the app draws the screen, so the drawing lives here, beside the widget that shows it; the
hierarchy it reads is the domain's (``domains/android.py``)."""

from __future__ import annotations

import math
import textwrap
import unicodedata
from dataclasses import dataclass

from agentworld_tui.domains.android import UINode, parse_hierarchy, screen_size

MIN_COLS, MIN_ROWS = 12, 8
_LIGHT = "┌─┐│└┘"
_HEAVY = "┏━┓┃┗┛"


def _cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _clean(text: str) -> str:
    """One line of displayable text: control characters and line breaks become spaces."""
    return "".join(" " if unicodedata.category(c).startswith("C") else c for c in text).strip()


class _Canvas:
    """A grid of cells; a wide character takes its cell and an empty continuation cell."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.cells = [[" "] * cols for _ in range(rows)]

    def put(self, col: int, row: int, ch: str) -> None:
        width = _cell_width(ch)
        if width == 0 or not (0 <= row < self.rows and col >= 0 and col + width <= self.cols):
            return
        line = self.cells[row]
        for c in range(col, col + width):
            if line[c] == "" and c > 0:
                line[c - 1] = " "
            if c + 1 < self.cols and line[c + 1] == "" and _cell_width(line[c] or " ") == 2:
                line[c + 1] = " "
        line[col] = ch
        if width == 2:
            line[col + 1] = ""

    def write(self, col: int, row: int, text: str, limit: int) -> None:
        """``text`` from ``col``, cut so that it ends before column ``limit``."""
        for ch in text:
            width = _cell_width(ch)
            if width == 0:
                continue
            if col + width > limit:
                break
            self.put(col, row, ch)
            col += width

    def lines(self) -> list[str]:
        return ["".join(line) for line in self.cells]


def _text_width(text: str) -> int:
    return sum(_cell_width(c) for c in text)


def _cut(text: str, width: int) -> str:
    out, used = [], 0
    for ch in text:
        w = _cell_width(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(out)


def _span(start: int, end: int, pixels: int, cells: int) -> tuple[int, int]:
    """Pixels [start, end) as cells (first, last), each edge rounded to the nearest cell
    boundary so that views side by side never share a cell; at least one cell."""
    first = min(cells - 1, math.floor(start * cells / pixels + 0.5))
    last = min(cells, math.floor(end * cells / pixels + 0.5)) - 1
    return first, max(first, last)


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, with an ellipsis where something was cut."""
    if _text_width(text) <= width:
        return text
    return _cut(text, width - 1) + "…" if width > 1 else _cut(text, width)


@dataclass(frozen=True)
class Wireframe:
    """The drawn screen and the geometry to map cells back to nodes and pixels."""

    lines: list[str]
    nodes: list[UINode]
    screen: tuple[int, int]
    """Device screen (width, height) in pixels."""
    area: tuple[int, int, int, int]
    """The screen's cells inside the frame: (first col, first row, cols, rows)."""

    def cells(self, node: UINode) -> tuple[int, int, int, int] | None:
        """The cells a node covers: (col1, row1, col2, row2) inclusive; None if off-screen."""
        x1, y1, x2, y2 = node.bounds
        width, height = self.screen
        sx, sy, sw, sh = self.area
        x1, x2 = max(0, min(x1, width)), max(0, min(x2, width))
        y1, y2 = max(0, min(y1, height)), max(0, min(y2, height))
        if x2 <= x1 or y2 <= y1:
            return None
        c1, c2 = _span(x1, x2, width, sw)
        r1, r2 = _span(y1, y2, height, sh)
        return sx + c1, sy + r1, sx + c2, sy + r2

    def _covering(self, col: int, row: int) -> list[UINode]:
        found = []
        for node in self.nodes:
            box = self.cells(node)
            if box and box[0] <= col <= box[2] and box[1] <= row <= box[3]:
                found.append(node)
        return found

    def node_at(self, col: int, row: int) -> UINode | None:
        """The top-most node under a cell: the last one drawn there with a label or an
        action, else the deepest node covering it; None outside the screen."""
        covering = self._covering(col, row)
        shown = [n for n in covering if n.label or n.interactive]
        if shown:
            return shown[-1]
        return covering[-1] if covering else None

    def target_at(self, col: int, row: int) -> UINode | None:
        """The node a tap on this cell would hit: the top-most interactive one covering
        it, else whatever node is there."""
        interactive = [n for n in self._covering(col, row) if n.interactive]
        return interactive[-1] if interactive else self.node_at(col, row)

    def point_at(self, col: int, row: int) -> tuple[int, int] | None:
        """The device pixel at the centre of a cell; None outside the screen."""
        sx, sy, sw, sh = self.area
        if not (sx <= col < sx + sw and sy <= row < sy + sh):
            return None
        width, height = self.screen
        return int((col - sx + 0.5) * width / sw), int((row - sy + 0.5) * height / sh)

    def find(self, text: str) -> UINode | None:
        """The first node whose text, description or resource id is ``text``."""
        for node in self.nodes:
            if text in (node.text, node.content_desc, node.resource_id):
                return node
        return None


def layout(hierarchy: str, cols: int, rows: int) -> Wireframe:
    """Draw a hierarchy into a phone outline of ``cols`` x ``rows`` cells.

    Clickable and editable views get a box where they are at least 3 rows high and 4
    columns wide (heavy when focused), otherwise brackets (``[OK]``; ``«Name»`` when
    focused); inputs show their text followed by ``_`` up to their width; checkable
    views show ``[x]``/``[ ]``; other views with text show it, and an icon whose
    description does not fit its width shows ``▣``. Views are drawn in
    document order, so children sit on top of their parents; a boxed view clears what
    is under it, as a dialog covers the screen behind it.
    """
    cols, rows = max(cols, MIN_COLS), max(rows, MIN_ROWS)
    nodes = parse_hierarchy(hierarchy)
    canvas = _Canvas(cols, rows)
    canvas.write(0, 0, "╭" + "─" * (cols - 2) + "╮", cols)
    canvas.write(0, rows - 1, "╰" + "─" * (cols - 2) + "╯", cols)
    for row in range(1, rows - 1):
        canvas.put(0, row, "│")
        canvas.put(cols - 1, row, "│")
    speaker = "━" * max(2, (cols - 2) // 5)
    canvas.write((cols - len(speaker)) // 2, 1, speaker, cols - 1)
    canvas.put(cols // 2, rows - 2, "○")
    frame = Wireframe([], nodes, screen_size(nodes), (1, 2, cols - 2, rows - 4))
    labelled_below = _labelled_descendants(nodes)
    for node in nodes:
        box = frame.cells(node)
        if box is not None:
            _draw(canvas, node, box, node.index in labelled_below)
    return Wireframe(canvas.lines(), frame.nodes, frame.screen, frame.area)


def wireframe(hierarchy: str, cols: int, rows: int) -> list[str]:
    """The phone-shaped drawing alone (see ``layout`` for the cell -> node mapping)."""
    return layout(hierarchy, cols, rows).lines


def _labelled_descendants(nodes: list[UINode]) -> set[int]:
    """Indexes of nodes that have a descendant with a label."""
    has: set[int] = set()
    for node in nodes:
        if node.label:
            parent = node.parent
            seen = 0
            while parent >= 0 and parent not in has and seen < len(nodes):
                has.add(parent)
                parent = nodes[parent].parent if parent < len(nodes) else -1
                seen += 1
    return has


def _draw(canvas: _Canvas, node: UINode, box: tuple[int, int, int, int], inner_text: bool) -> None:
    c1, r1, c2, r2 = box
    width, height = c2 - c1 + 1, r2 - r1 + 1
    label = _clean(node.label)
    if not label and node.interactive and not inner_text and node.short_id:
        label = node.short_id
    if node.checkable:
        label = ("[x] " if node.checked else "[ ] ") + label
    if not label and not node.interactive:
        return
    if not node.interactive and not node.text and _text_width(label) > width:
        label = "▣"  # an icon whose description does not fit: mark it, do not spill text
    # A clickable row whose texts are its children's is left to them: a box would only
    # collide with their lines.
    boxed = node.interactive and not inner_text and height >= 3 and width >= 4
    if boxed:
        tl, h, tr, v, bl, br = tuple(_HEAVY if node.focused else _LIGHT)
        for row in range(r1, r2 + 1):
            for col in range(c1, c2 + 1):
                canvas.put(col, row, " ")
        canvas.write(c1, r1, tl + h * (width - 2) + tr, c2 + 1)
        canvas.write(c1, r2, bl + h * (width - 2) + br, c2 + 1)
        for row in range(r1 + 1, r2):
            canvas.put(c1, row, v)
            canvas.put(c2, row, v)
        c1, r1, c2, r2 = c1 + 1, r1 + 1, c2 - 1, r2 - 1
        width, height = c2 - c1 + 1, r2 - r1 + 1
    bracketed = node.interactive and not node.editable and bool(label) and not node.checkable
    if not boxed and bracketed:
        label = ("«" + label + "»") if node.focused else ("[" + label + "]")
    if not label:
        return
    if node.editable:
        text = _cut(label, width)
        line = text + "_" * (width - _text_width(text))
        canvas.write(c1, r1 + (height - 1) // 2, line, c2 + 1)
        return
    closing = label[-1] if not boxed and bracketed else ""
    wrapped = textwrap.wrap(label, width=max(1, width), break_long_words=False) or [label]
    if len(wrapped) > height:
        wrapped = [*wrapped[: height - 1], " ".join(wrapped[height - 1 :])]
    wrapped = [_fit(line, width) for line in wrapped]
    if closing and not wrapped[-1].endswith(closing):
        wrapped[-1] = _fit(wrapped[-1][:-1] + "……", width - 1) + closing
    top = r1 + (height - len(wrapped)) // 2
    centred = node.interactive and not node.checkable
    for k, line in enumerate(wrapped):
        col = c1 + (width - _text_width(line)) // 2 if centred else c1
        canvas.write(col, top + k, line, c2 + 1)
