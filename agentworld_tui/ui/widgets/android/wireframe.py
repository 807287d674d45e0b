"""The phone screen drawn from its UI hierarchy, in character cells.

A click on a cell picks the node a tap there would hit; the arrow keys move between the
screen's interactive nodes and Enter picks one. The picked node is shown reversed.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from agentworld_tui.domains.android import UINode
from agentworld_tui.ui.widgets.android.drawing import Wireframe, layout

_PICKED = Style(reverse=True)


class WireframeView(Widget, can_focus=True):
    DEFAULT_CSS = """
    WireframeView { width: 40; height: 1fr; background: $surface; }
    WireframeView:focus { background: $boost; }
    """
    BINDINGS = [
        Binding("down", "next_node", "Next node", show=False),
        Binding("up", "previous_node", "Previous node", show=False),
        Binding("enter", "pick", "Pick node", tooltip="Fill a tap on the node", show=False),
    ]

    class Picked(Message):
        def __init__(self, node: UINode, frame: Wireframe) -> None:
            super().__init__()
            self.node = node
            self.frame = frame

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hierarchy = ""
        self.frame: Wireframe | None = None
        self.picked: UINode | None = None

    def show(self, hierarchy: str) -> None:
        """Draw a new screen; the earlier pick no longer applies."""
        self.hierarchy = hierarchy
        self.picked = None
        self._layout()

    def _layout(self) -> None:
        size = self.content_region.size if self.is_mounted else None
        cols, rows = (size.width, size.height) if size and size.width else (40, 30)
        self.frame = layout(self.hierarchy, cols, rows)
        self.refresh()

    def on_resize(self) -> None:
        self._layout()

    def render(self) -> Text:
        if self.frame is None:
            return Text()
        lines = [Text(line) for line in self.frame.lines]
        box = self.frame.cells(self.picked) if self.picked is not None else None
        if box is not None:
            c1, r1, c2, r2 = box
            for row in range(r1, min(r2, len(lines) - 1) + 1):
                lines[row].stylize(_PICKED, c1, c2 + 1)
        return Text("\n").join(lines)

    # -- picking --------------------------------------------------------------------------
    def pick(self, node: UINode) -> None:
        assert self.frame is not None
        self.picked = node
        self.refresh()
        self.post_message(self.Picked(node, self.frame))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.frame is None:
            return
        node = self.frame.target_at(offset.x, offset.y)
        if node is not None:
            self.pick(node)

    def _interactive(self) -> list[UINode]:
        if self.frame is None:
            return []
        frame = self.frame
        return [n for n in frame.nodes if n.interactive and frame.cells(n) is not None]

    def _move(self, step: int) -> None:
        nodes = self._interactive()
        if not nodes:
            return
        if self.picked in nodes:
            index = max(0, min(len(nodes) - 1, nodes.index(self.picked) + step))
        else:
            index = 0 if step > 0 else len(nodes) - 1
        self.picked = nodes[index]
        self.refresh()

    def action_next_node(self) -> None:
        self._move(1)

    def action_previous_node(self) -> None:
        self._move(-1)

    def action_pick(self) -> None:
        if self.picked is not None:
            self.pick(self.picked)
