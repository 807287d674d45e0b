"""The agent in a served tab: how to connect one, who is connected, and the person's hand
on its calls (hold, edit and release an observation, stop a call, stop serving)."""

from __future__ import annotations

import json
from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, RadioButton, RadioSet, Static

from agentworld_tui.agents.mcp.steering import AgentConnection, HeldObservation
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.sanitize import sanitize

HOLD_LABELS = {
    "off": "Pass every observation on",
    "next": "Hold the next observation",
    "every": "Hold every observation",
}
MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 92%; height: auto; max-height: 94%; border: thick $primary; background: $surface;
    padding: 0 1;
}}
{name} .hint {{ color: $text-muted; height: auto; }}
{name} .buttons {{ height: auto; align-horizontal: right; }}
"""


class ServedTab(Protocol):
    """What these screens show of a tab served to agents (``ui.agent_serving.TabServing``)
    and what their buttons do to it."""

    @property
    def pane(self) -> DomainPane: ...

    @property
    def url(self) -> str: ...

    @property
    def note(self) -> str:
        """How serving started, when that is worth saying (on another port)."""
        ...

    @property
    def tools(self) -> list[str]: ...

    @property
    def connection(self) -> AgentConnection | None:
        """The agent connected now (None: waiting for one)."""
        ...

    @property
    def last_refusal(self) -> str: ...

    @property
    def hold_mode(self) -> str: ...

    def set_hold(self, mode: str) -> None: ...

    def who(self, connection: AgentConnection) -> str: ...

    def doing(self) -> str:
        """What the agent's connection is doing, in a few words."""
        ...

    def offer_held(self) -> None: ...

    def stop(self) -> bool: ...

    async def end(self) -> None: ...


def connect_lines(name: str, url: str) -> list[str]:
    """What to give an agent: Claude Code's command, and the mcpServers entry others read."""
    entry = {"mcpServers": {name: {"type": "http", "url": url}}}
    return [
        f"Address      {url}",
        f"Claude Code  claude mcp add --transport http {name} {url}",
        f"Config file  {json.dumps(entry)}",
    ]


class AgentScreen(ModalScreen[None]):
    DEFAULT_CSS = (
        MODAL_CSS.format(name="AgentScreen")
        + """
    AgentScreen #connect { height: auto; margin: 1 0 0 0; }
    AgentScreen #who { height: auto; }
    AgentScreen RadioSet { height: auto; }
    """
    )
    BINDINGS = [Binding("escape,ctrl+b", "close", "Close")]

    def __init__(self, serving: ServedTab) -> None:
        super().__init__()
        self.serving = serving

    def compose(self) -> ComposeResult:
        serving = self.serving
        pane = serving.pane
        name = f"agentworld-{pane.domain.name}"
        with Vertical():
            yield Label(
                Text(f"The {pane.domain.title} tab is served to agents (MCP, streamable HTTP)")
            )
            tools = ", ".join(serving.tools)
            lines = [*connect_lines(name, serving.url), f"Tools        {tools}"]
            if serving.note:
                lines.append(serving.note)
            yield Static(Text(sanitize("\n".join(lines))), id="connect")
            yield Static(id="who")
            with RadioSet(id="hold"):
                for mode, label in HOLD_LABELS.items():
                    yield RadioButton(label, value=serving.hold_mode == mode, id=f"hold-{mode}")
            yield Static(
                "Held observations open for editing (Edit held). F9 (perturbation) and F10 "
                "(world) steer the agent's coming calls; Esc in the tab stops its call.",
                classes="hint",
            )
            with Horizontal(classes="buttons"):
                yield Button("Edit held", id="edit", variant="primary")
                yield Button("Stop call", id="stop-call", variant="warning")
                yield Button("Stop serving", id="stop-serving", variant="error")
                yield Button("Close (Esc)", id="close")

    def on_mount(self) -> None:
        self.refresh_state()
        self.query_one(RadioSet).focus()
        self.set_interval(0.5, self.refresh_state)

    def refresh_state(self) -> None:
        serving = self.serving
        connection = serving.connection
        lines = [serving.doing()]
        if connection is not None and connection.save_error:
            lines.append(f"Not saved: {connection.save_error}")
        if serving.last_refusal:
            lines.append(f"Last refused call: {serving.last_refusal[:200]}")
        self.query_one("#who", Static).update(Text(sanitize("\n".join(lines))))
        held = connection.held if connection is not None else None
        self.query_one("#edit", Button).disabled = held is None
        self.query_one("#stop-call", Button).disabled = connection is None or not connection.busy

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        pressed = event.pressed.id or ""
        self.serving.set_hold(pressed.removeprefix("hold-"))

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        serving = self.serving
        if event.button.id == "edit":
            self.dismiss(None)
            serving.offer_held()
        elif event.button.id == "stop-call":
            serving.stop()
            self.refresh_state()
        elif event.button.id == "stop-serving":
            self.dismiss(None)
            await serving.end()
            self.app.notify(f"The {serving.pane.domain.title} tab is no longer served.")
        else:
            self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class HeldScreen(ModalScreen[None]):
    """A finished call's observation, held: the agent gets it as predicted, edited, or not
    at all. Esc leaves it held (Ctrl+B in the tab comes back to it)."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="HeldScreen")
        + """
    HeldScreen > Vertical { height: 90%; }
    HeldScreen Editor { height: 1fr; }
    """
    )
    BINDINGS = [
        Binding("escape", "keep", "Keep holding"),
        Binding("ctrl+s", "release", "Release", priority=True),
        Binding("ctrl+r", "release_predicted", "Release as predicted", priority=True),
    ]

    def __init__(self, serving: ServedTab, held: HeldObservation) -> None:
        super().__init__()
        self.serving = serving
        self.held = held

    def compose(self) -> ComposeResult:
        call = self.held.call
        who = self.serving.who(call.connection)
        with Vertical():
            yield Static(
                Text(
                    sanitize(
                        f"{who}'s call {call.number} ({call.tool}) is held: the agent gets "
                        "what is below when you release it"
                    )
                )
            )
            yield Editor(self.held.predicted, id="observation", soft_wrap=True)
            yield Static(
                "Ctrl+S releases the text as edited (the session keeps the prediction too); "
                "Ctrl+R releases the prediction; Esc keeps it held.",
                classes="hint",
            )
            with Horizontal(classes="buttons"):
                yield Button("Stop the call", id="stop", variant="warning")
                yield Button("Release as predicted (Ctrl+R)", id="predicted")
                yield Button("Release (Ctrl+S)", id="release", variant="primary")

    def on_mount(self) -> None:
        self.query_one(Editor).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "release":
            self.action_release()
        elif event.button.id == "predicted":
            self.action_release_predicted()
        else:
            self.held.stop()
            self.dismiss(None)

    def action_release(self) -> None:
        text = self.query_one(Editor).text
        unedited = text == sanitize(self.held.predicted)  # the editor shows it sanitized
        self._let_go(None if unedited else text)

    def action_release_predicted(self) -> None:
        self._let_go(None)

    def _let_go(self, text: str | None) -> None:
        if not self.held.release(text):
            self.app.notify("The agent's call ended already; nothing was sent.", timeout=6)
        self.dismiss(None)

    def action_keep(self) -> None:
        self.dismiss(None)
