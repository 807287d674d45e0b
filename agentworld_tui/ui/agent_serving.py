"""A tab served to an agent: the simulated MCP server inside the app, and the person's
hand on it.

Ctrl+B serves the tab on show as an MCP server on 127.0.0.1 (``agents.mcp``): its tools
are the tab's domain as tools (the MCP tab's scenario tools, a terminal's keystrokes...),
and the agent that connects acts in the tab's own session, one agent at a time. Its calls
stream in the tab as turns; the person holds, edits and releases observations, stops a
call, and steers the coming calls with the tab's own perturbation (F9) and world (F10)
keys. The served session is saved where the app saves the tab.

Everything here runs on the app's event loop, where the server runs too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine
from typing import Any, Protocol

from rich.text import Text
from textual.css.query import NoMatches
from textual.screen import Screen

from agentworld_tui.agents.mcp.server import AgentServer, ServerError
from agentworld_tui.agents.mcp.sessions import OpenSession, SessionUnavailable
from agentworld_tui.agents.mcp.steering import (
    HOLD_EVERY,
    AgentConnection,
    AgentEvent,
    CallAnswered,
    CallRefused,
    ConnectionClosed,
    ConnectionOpened,
    ObservationHeld,
    TurnStarted,
)
from agentworld_tui.agents.mcp.toolset import ToolsetError, for_scenario
from agentworld_tui.config import Settings
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.workspace import OpenWorkspace
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.screens.agent import AgentScreen, HeldScreen
from agentworld_tui.ui.screens.sessions import ConfirmScreen
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Session

TAKEN = "this tab of the app is served to another agent already; one agent at a time"
HOLD_MODES = {"off": 0, "next": 1, "every": HOLD_EVERY}


class ServingHost(TabsAndDialogs, Protocol):
    """What serving a tab to agents needs of the app."""

    @property
    def settings(self) -> Settings: ...

    @property
    def simulator(self) -> Simulator: ...

    @property
    def files(self) -> OpenWorkspace:
        """The open session file (the served session is saved where the app saves it)."""
        ...

    @property
    def serving(self) -> dict[str, TabServing]:
        """The tabs served to agents now, by domain."""
        ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def save_session(self, session: Session | None = None) -> str | None: ...

    def mark_busy(self) -> None:
        """The tabs' busy marks follow what their turns (an agent's call too) do."""
        ...

    def run_worker(self, work: Coroutine[Any, Any, None], *, exclusive: bool = False) -> object: ...


class TabServing:
    """One tab served to agents: its server, the agent connected now, what the tab shows."""

    def __init__(self, host: ServingHost, pane: DomainPane) -> None:
        self.host = host
        self.pane = pane
        self.server: AgentServer | None = None
        self.url = ""
        self.connection: AgentConnection | None = None
        """The agent acting in the tab now (None: waiting for one)."""
        self.agents_seen = 0
        self.last_refusal = ""
        self.note = ""
        """What the agent screen should say about how serving started (another port)."""
        self._screen_for: object = None
        """The held observation a HeldScreen is open for."""

    # -- the pane's AgentLink -----------------------------------------------------------
    @property
    def driving(self) -> bool:
        return self.connection is not None and not self.connection.closed

    def stop(self) -> bool:
        connection = self.connection
        if connection is None or self.server is None or not connection.busy:
            return False
        return self.server.stop_call(connection.id)

    def session_replaced(self) -> None:
        self.host.notify(
            f"The {self.pane.domain.title} tab has a new session: it is no longer served "
            "to agents (Ctrl+B serves it again).",
            timeout=8,
        )
        self.host.run_worker(self.end(), exclusive=False)

    # -- the SessionStore the server opens connections from -----------------------------
    def open(self, domain: Domain, scenario: Scenario, title: str) -> OpenSession:
        if self.driving:
            raise SessionUnavailable(TAKEN)
        pane = self.pane

        def save() -> str | None:
            return self.host.save_session(pane.session)

        return OpenSession(
            pane.session,
            save,
            lambda: None,
            self.host.files.workspace.path,
            routing=pane.reality.agent_routing,
        )

    # -- serving ------------------------------------------------------------------------
    async def begin(self) -> str:
        """Start serving; returns the URL, or raises ServerError/ToolsetError."""
        pane = self.pane
        toolset = for_scenario(pane.domain, pane.session.scenario)
        server = AgentServer(self.host.simulator, toolset, sessions=self)
        server.subscribe(self.on_event)
        port = self.host.settings.ui.agent_port
        if port and any(s.url.endswith(f":{port}/mcp") for s in self.host.serving.values()):
            port = 0  # the port asked for is another tab's
        try:
            self.url = await server.start("127.0.0.1", port)
        except ServerError as exc:
            if not port:
                raise
            self.note = f"{exc}; serving on another port instead."
            self.url = await server.start("127.0.0.1", 0)
        self.server = server
        pane.agent = self
        self.show()
        return self.url

    async def end(self) -> None:
        """Stop serving: a call in progress ends interrupted for its agent, and is kept."""
        server = self.server
        if server is None:
            return
        self.server = None
        await server.stop()
        self.connection = None
        if self.pane.agent is self:
            self.pane.agent = None
        with contextlib.suppress(NoMatches):  # the app is closing: its widgets are gone
            self.pane.show_agent(None)
        serving = self.host.serving
        if serving.get(self.pane.domain.name) is self:
            del serving[self.pane.domain.name]

    @property
    def tools(self) -> list[str]:
        return [tool.name for tool in self.server.toolset.declared] if self.server else []

    @property
    def hold_mode(self) -> str:
        hold = self.connection.hold if self.connection is not None else self.next_hold
        return next((mode for mode, value in HOLD_MODES.items() if value == hold), "next")

    next_hold = 0
    """What a connection starts with: the person may choose before any agent connects."""

    def set_hold(self, mode: str) -> None:
        self.next_hold = HOLD_MODES[mode]
        if self.connection is not None and self.server is not None:
            count = self.next_hold
            self.server.hold(self.connection.id, None if count == HOLD_EVERY else count)
        self.show()

    # -- what happens ---------------------------------------------------------------------
    def on_event(self, event: AgentEvent) -> None:
        pane, host = self.pane, self.host
        if isinstance(event, ConnectionOpened):
            self.connection = event.connection
            self.agents_seen += 1
            if self.next_hold and self.server is not None:
                every = self.next_hold == HOLD_EVERY
                self.server.hold(event.connection.id, None if every else self.next_hold)
                if not every:
                    self.next_hold = 0  # the agent's next observation, not every agent's
            host.notify(
                f"{self.who(event.connection)} connected to the {pane.domain.title} tab.",
                title="Agent",
            )
        elif isinstance(event, TurnStarted):
            pane.follow(event.run)
        elif isinstance(event, ObservationHeld):
            self.offer_held()
        elif isinstance(event, CallAnswered):
            agent = event.call.turn.stats.get("agent", {})
            if "predicted" in agent or event.call.turn.status != "complete":
                pane.redraw_turns()
            self.close_held_screen()
        elif isinstance(event, CallRefused):
            self.last_refusal = f"{event.tool}: {event.message}"
        elif isinstance(event, ConnectionClosed) and event.connection is self.connection:
            self.connection = None
            self.close_held_screen()
            host.notify(
                f"{self.who(event.connection)} left the {pane.domain.title} tab.", title="Agent"
            )
        self.show()
        host.mark_busy()

    def who(self, connection: AgentConnection) -> str:
        return f"{connection.id} ({connection.client})" if connection.client else connection.id

    def doing(self) -> str:
        """What the agent's connection is doing, in a few words."""
        connection = self.connection
        if connection is None:
            return "waiting for an agent to connect"
        call = connection.call
        calls = f"{connection.calls} call{'s' if connection.calls != 1 else ''}"
        if connection.refused:
            calls += f", {connection.refused} refused"
        now = ""
        if call is not None and call.state == "running":
            now = f" · call {call.number} ({one_line(call.tool)[:40]}) running"
        elif call is not None and call.state == "held":
            now = f" · call {call.number} held for you"
        return f"{self.who(connection)} connected · {calls}{now}"

    def show(self) -> None:
        if self.server is None:
            return
        line = Text()
        line.append("⇄ agent ", style="bold green")
        line.append(self.doing())
        if self.hold_mode != "off":
            line.append(f" · holding {self.hold_mode}", style="bold yellow")
        line.append(f" · {self.url} · Ctrl+B", style="dim")
        self.pane.show_agent(line)

    # -- a held observation ---------------------------------------------------------------
    def offer_held(self) -> None:
        """Open the held observation for editing when nothing else is open; else say so."""
        connection = self.connection
        held = connection.held if connection is not None else None
        if held is None or self._screen_for is held:
            return
        host = self.host
        if len(host.screen_stack) > 1 or host.active_pane is not self.pane:
            host.notify(
                f"{self.who(held.call.connection)}'s observation is held in the "
                f"{self.pane.domain.title} tab: Ctrl+B there to edit and release it.",
                title="Agent",
                timeout=10,
            )
            return
        self._screen_for = held

        def done(_result: object) -> None:
            self._screen_for = None
            self.show()

        host.push_screen(HeldScreen(self, held), done)

    def close_held_screen(self) -> None:
        stack = self.host.screen_stack
        screen = stack[-1] if stack else None
        if isinstance(screen, HeldScreen) and screen.serving is self and screen.held.released:
            screen.dismiss(None)


def confirm_question(title: str) -> str:
    return (
        f"Serve the {title} tab to agents? An MCP server starts on 127.0.0.1 (this machine "
        "only): a program that connects acts in this tab's session, one at a time, and its "
        "calls are turns here. Y serves; Esc or Enter cancels."
    )


class AgentServing:
    """Ctrl+B: serve the tab on show once the person confirms (then show how to connect),
    or steer the agent in a tab served already."""

    def __init__(self, host: ServingHost) -> None:
        self.host = host

    async def toggle(self) -> None:
        host = self.host
        pane = host.active_pane
        if pane is None:
            return
        serving = host.serving.get(pane.domain.name)
        if serving is not None:
            host.push_screen(AgentScreen(serving))
            return

        async def serve(yes: bool | None) -> None:
            if yes and pane.domain.name not in host.serving:
                await self.start(pane)

        question = confirm_question(pane.domain.title)
        host.push_screen(ConfirmScreen(question, yes="Serve (Y)", no="Cancel"), serve)

    async def start(self, pane: DomainPane) -> None:
        """Serve ``pane``'s tab; the agent screen says where (it covers the screen: no toast
        over its buttons)."""
        host = self.host
        serving = TabServing(host, pane)
        try:
            await serving.begin()
        except (ServerError, ToolsetError) as exc:
            host.notify(f"The tab cannot be served: {exc}", severity="error", timeout=12)
            return
        host.serving[pane.domain.name] = serving
        host.push_screen(AgentScreen(serving))

    async def end_all(self) -> None:
        """Stop serving every tab (before the app quits): every agent's call is recorded."""
        for serving in list(self.host.serving.values()):
            await serving.end()
