"""Android: a phone screen from its UI hierarchy, drawn as a wireframe beside the raw
hierarchy.

Picking a node in the wireframe (a click, or the arrow keys and Enter) fills a tap on it;
the buttons turn the picked node into a long press or a typing action, or send the actions
that need no node (swipes, back, home). The action is JSON, checked before it is sent.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Input, Label

from agentworld_tui.domains.android import AndroidDomain, UINode, node_action
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.android.wireframe import WireframeView
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Turn

NODE_BUTTONS = {"tap": "Tap", "long_press": "Long press", "type": "Type"}
DIRECT_BUTTONS: dict[str, dict[str, Any]] = {
    "swipe-up": {"action": "swipe", "direction": "up"},
    "swipe-down": {"action": "swipe", "direction": "down"},
    "swipe-left": {"action": "swipe", "direction": "left"},
    "swipe-right": {"action": "swipe", "direction": "right"},
    "back": {"action": "back"},
    "home": {"action": "home"},
}


class AndroidPane(DomainPane):
    DEFAULT_CSS = """
    AndroidPane #device { height: 1fr; }
    AndroidPane #device #screen { width: 1fr; }
    AndroidPane #android-buttons { height: 1; }
    AndroidPane #android-buttons Button { margin: 0 1 0 0; width: auto; min-width: 6; }
    AndroidPane #android-buttons Button.arrow { margin: 0; min-width: 3; }
    AndroidPane #swipe-label { margin: 0 1 0 0; color: $text-muted; }
    AndroidPane #android-action { height: 3; }
    AndroidPane #android-action.-invalid { border: tall $error; }
    """

    BINDINGS = [Binding("ctrl+s", "send", "Send", tooltip="Send the action", show=False)]

    domain: AndroidDomain

    def action_send(self) -> None:
        self.send_action(self.action_input.value)

    def compose_screen(self) -> ComposeResult:
        with Horizontal(id="device", classes="backdrop"):
            yield WireframeView(id="wireframe")
            yield LineView(id="screen")

    def compose_editor(self) -> ComposeResult:
        with Horizontal(id="android-buttons"):
            for kind, label in NODE_BUTTONS.items():
                yield Button(label, id=f"node-{kind}", compact=True)
            yield Label("Swipe", id="swipe-label")
            for direction, arrow in (("up", "↑"), ("down", "↓"), ("left", "←"), ("right", "→")):
                yield Button(
                    arrow,
                    id=f"direct-swipe-{direction}",
                    classes="arrow",
                    compact=True,
                    tooltip=f"Swipe {direction}",
                )
            yield Button("Back", id="direct-back", compact=True)
            yield Button("Home", id="direct-home", compact=True)
            yield Button("Open app", id="open-app", compact=True)
        yield Field(
            placeholder='{"action": "tap", "element": "OK"}: pick a node, Enter sends',
            id="android-action",
            select_on_focus=False,
        )

    @property
    def wireframe(self) -> WireframeView:
        return self.query_one("#wireframe", WireframeView)

    @property
    def action_input(self) -> Input:
        return self.query_one("#android-action", Input)

    def focus_editor(self) -> None:
        self.action_input.focus()

    # -- the screen -----------------------------------------------------------------------
    def hierarchy(self) -> str:
        """The screen now: the last predicted hierarchy, else the starting one."""
        shown = [t.observation for t in self.session.turns if t.shown]
        return sanitize(shown[-1] if shown else self.session.scenario.state)

    def show_session(self) -> None:
        super().show_session()
        self.wireframe.show(self.hierarchy())

    def show_observation(self, turn: Turn) -> None:
        super().show_observation(turn)
        if self.run is None:
            self.wireframe.show(self.hierarchy())

    def highlight_observation(self, text: str) -> list[Text]:
        return highlight(text, "json" if text.lstrip()[:1] in "[{" else "xml")

    def highlight_turn(self, turn: Turn) -> list[Text]:
        text = sanitize(turn.observation)
        return highlight(text, self.domain.observation_lexer(turn.action, text))

    # -- building actions -----------------------------------------------------------------
    def fill(self, data: dict[str, Any], cursor_in: str = "") -> None:
        """Put an action in the input; ``cursor_in`` names a text field to type into."""
        text = json.dumps(data, ensure_ascii=False)
        cursor = len(text)
        if cursor_in:
            cursor = text.find(f'"{cursor_in}": ""') + len(f'"{cursor_in}": "')
        self.action_input.value = text
        self.action_input.cursor_position = cursor
        self.action_input.remove_class("-invalid")
        self.show_error("")

    def on_wireframe_view_picked(self, event: WireframeView.Picked) -> None:
        event.stop()
        self.fill(node_action(event.node, "tap", nodes=event.frame.nodes))
        self.focus_editor()

    def _picked(self) -> UINode | None:
        node = self.wireframe.picked
        if node is None:
            self.show_error("pick a node in the wireframe first (click it, or arrows and Enter)")
        return node

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button = event.button.id or ""
        if button.startswith("node-"):
            node = self._picked()
            frame = self.wireframe.frame
            if node is not None and frame is not None:
                kind = button.removeprefix("node-")
                self.fill(
                    node_action(node, kind, nodes=frame.nodes), "text" if kind == "type" else ""
                )
                self.focus_editor()
        elif button.startswith("direct-"):
            self.fill(DIRECT_BUTTONS[button.removeprefix("direct-")])
            self.send_action(self.action_input.value)
        elif button == "open-app":
            self.fill({"action": "open_app", "app_name": ""}, "app_name")
            self.focus_editor()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "android-action":
            event.stop()
            self.send_action(event.value)

    def send_action(self, text: str) -> bool:
        try:
            action = self.domain.parse_action(text, self.session.scenario)
        except ActionError as exc:
            self.action_input.add_class("-invalid")
            where = f" ({exc.field})" if exc.field and exc.field not in str(exc) else ""
            self.show_error(f"{exc}{where}")
            return False
        self.action_input.remove_class("-invalid")
        return self.send(action)
