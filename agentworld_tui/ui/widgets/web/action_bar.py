"""The browser action bar: the 21 actions in a list, and the call being written with the
picked action's signature beside it. Enter asks the pane to check and send the call."""

from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Select

from agentworld_tui.domains.web import ACTIONS, Param, signature
from agentworld_tui.ui.widgets.field import Field

_PLACEHOLDER = {"number": 0, "integer": 0, "modifiers": []}


def _placeholder(param: Param) -> str:
    return json.dumps(_PLACEHOLDER.get(param.kind, ""))


def call_template(name: str) -> str:
    """``fill("", "")``: the action with a blank for each required parameter."""
    blanks = [_placeholder(p) for p in ACTIONS[name] if p.required]
    return f"{name}({', '.join(blanks)})"


class ActionBar(Vertical):
    DEFAULT_CSS = """
    ActionBar { height: auto; }
    ActionBar #action-row { height: 3; }
    ActionBar #action-kind { width: 34; }
    ActionBar #call { width: 1fr; }
    ActionBar #call.-invalid { border: tall $error; }
    ActionBar #signature { height: 1; color: $text-muted; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        options = [(name, name) for name in ACTIONS]
        with Horizontal(id="action-row"):
            yield Select(options, prompt="Action", id="action-kind", allow_blank=True)
            yield Field(
                placeholder='a browser call, e.g. click("a42"); Enter sends',
                id="call",
                select_on_focus=False,
            )
        yield Label(id="signature")

    @property
    def call(self) -> Input:
        return self.query_one("#call", Input)

    def show_signature(self, name: str) -> None:
        text = Text(signature(name), style="bold") if name in ACTIONS else Text("")
        if name not in ACTIONS:
            text.append("Pick an action, or click an element of the page (Enter on a row).")
        self.query_one("#signature", Label).update(text)

    def set_call(self, text: str, cursor: int | None = None) -> None:
        """Put a call in the input (from a picked element), keeping the list in step."""
        name = text.split("(", 1)[0]
        select = self.query_one("#action-kind", Select)
        if name in ACTIONS and select.value != name:
            select.value = name
        self.call.value = text
        self.call.cursor_position = len(text) if cursor is None else cursor
        self.show_signature(name)

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        name = event.value if isinstance(event.value, str) else ""
        if name and not self.call.value.startswith(f"{name}("):
            template = call_template(name)
            quote = template.find('"')
            self.set_call(template, quote + 1 if quote >= 0 else None)
            self.call.focus()
        self.show_signature(name)
