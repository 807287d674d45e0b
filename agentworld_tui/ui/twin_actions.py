"""The twin keys of the tab on show (Shift+F9 twin, Shift+F10 its view, Shift+F11 its
summary), the twin started on the command line, and closing every twin with the app.

What a twin does beside its tab (each turn's shadow, the view, following the turns) is
``ui/twinning.py``; nothing of ``reality`` is imported here until a tab is twinned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.tab_actions import idle_pane
from agentworld_tui.ui.twinning import (
    StartedTwin,
    TwinChoice,
    close_runner,
    describe_spec,
    sandbox_backend,
    with_server_tools,
)
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, new_session

if TYPE_CHECKING:
    from agentworld_tui.simulator.shadow import Shadow


class TwinActionsHost(TabsAndDialogs, Protocol):
    """What the twin keys need of the app."""

    @property
    def tabs_ready(self) -> asyncio.Event: ...

    def save_session(self, session: Session | None = None) -> str | None: ...


class TwinActions:
    def __init__(
        self,
        host: TwinActionsHost,
        replace_session: Callable[[DomainPane, Session], bool],
        at_start: tuple[str, Shadow] | None = None,
    ) -> None:
        self.host = host
        self.replace_session = replace_session
        """Give a pane a new session, the old one kept (``TabActions.replace_session``)."""
        self.at_start = at_start
        """A tab (its domain) and the twin started for it on the command line, until the
        tabs are built and it is put beside that tab."""

    # -- the keys -----------------------------------------------------------------------
    def open_dialog(self) -> None:
        """Shift+F9: the twin dialog for the tab on show."""
        from agentworld_tui.ui.screens.twin import TwinDialog, TwinDialogResult

        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        reality = pane.reality
        current = reality.twin.describe() if reality.twin is not None else ""

        def chosen(result: TwinDialogResult | None) -> None:
            if result is None:
                return
            if result.started is None:
                reality.untwin()
                host.notify(f"The {pane.domain.title} tab is no longer twinned.", timeout=5)
                return
            if pane.busy:
                close_runner(result.started.runner)
                host.notify("The tab was busy: the twin was not attached.", severity="warning")
                return
            self.attach(pane, result.started)

        host.push_screen(TwinDialog(pane.domain.name, pane.domain.title, current=current), chosen)

    def toggle_view(self) -> None:
        """Shift+F10: prediction and reality side by side, or their diff."""
        pane = self.host.active_pane
        if pane is not None and pane.reality.toggle_mode() is None:
            self.host.notify(
                f"The {pane.domain.title} tab shows no twinned turn (Shift+F9 twins it).",
                timeout=4,
            )

    def summary(self) -> None:
        """Shift+F11: the session's figures beside reality, and the task's check."""
        from agentworld_tui.ui.screens.twin_summary import TwinSummary

        host = self.host
        pane = host.active_pane
        if pane is None:
            return
        session = pane.session
        if session.twin is None and not any(t.reality is not None for t in session.turns):
            host.notify(
                f"The {pane.domain.title} tab is not twinned (Shift+F9 twins it).", timeout=4
            )
            return
        twin = pane.reality.twin
        shadow = twin.shadow if twin is not None and twin.session is session else None

        def picked(number: int | None) -> None:
            if number is not None:
                pane.reality.show_turn(number)

        host.push_screen(TwinSummary(session, shadow, save=host.save_session), picked)

    # -- a twin beside a tab ------------------------------------------------------------
    def attach(self, pane: DomainPane, started: StartedTwin) -> bool:
        """Twin ``pane`` with a started twin: the tab starts afresh (its turns are kept as
        a saved session), from the twin's first state where it has one (a terminal's
        screen) and with a real server's own tools, so that both sides start alike. False
        (the twin closed) when the tab could not."""
        host = self.host
        choice, runner = started.choice, started.runner
        pane.reality.untwin()
        scenario = self.twin_scenario(pane.session.scenario, started)
        session, problems = new_session(pane.domain, scenario)
        for problem in problems:
            host.notify(problem, severity="warning")
        if not self.replace_session(pane, session):
            close_runner(runner)
            return False
        pane.reality.twin_with(choice, runner, started.first)
        host.save_session()
        side = "reality's answer" if choice.deliver == "real" else "the world model's prediction"
        host.notify(
            f"Twinned with {describe_spec(choice.spec, sandbox_backend(runner))}. Each action "
            f"goes to both; the agent receives {side}.",
            title=pane.domain.title,
            timeout=8,
        )
        return True

    def twin_scenario(self, scenario: Scenario, started: StartedTwin) -> Scenario:
        """What a twinned tab starts from: the twin's own first state (a terminal's screen;
        a sandbox's folder holds what the user seeded, not a shipped scenario's repository),
        or, for MCP, the real server's tools (the tab's own where the server cannot list
        them)."""
        spec = started.choice.spec
        title = f"Twin: {describe_spec(spec, sandbox_backend(started.runner))}"
        if spec.domain != "mcp":
            workdir = spec.describe().get("workdir", "")
            about = (
                f"The repository at {workdir}, as the twin holds it."
                if spec.domain == "swe"
                else ""
            )
            return Scenario("twin", title, about, state=started.first.text)
        if started.tools is None:
            if started.tools_problem:
                self.host.notify(
                    f"{started.tools_problem}: the tab keeps its own tool list.",
                    severity="warning",
                    timeout=10,
                )
            return replace(scenario, title=title)
        from agentworld_tui.domains.tool_call import ToolListError, tools_from_data, with_tools

        try:
            tools = tools_from_data(started.tools)
        except ToolListError as exc:
            self.host.notify(
                f"The server's tool list is unusable ({exc}): the tab keeps its own.",
                severity="warning",
                timeout=10,
            )
            return replace(scenario, title=title)
        return with_tools(Scenario("twin", title, "The tools the real server lists."), tools)

    async def attach_at_start(self) -> None:
        """Put the twin started on the command line (``--twin`` and its flags) beside its
        tab once the tabs are built, and show that tab."""
        await self.host.tabs_ready.wait()
        if self.at_start is None:
            return
        domain, shadow = self.at_start
        self.at_start = None
        pane = self.host.pane_for(domain)
        if pane is None or shadow.spec is None or shadow.first is None:
            close_runner(shadow.runner)
            return
        choice = TwinChoice(shadow.spec, deliver=shadow.deliver, check=shadow.check)
        started = StartedTwin(choice, shadow.runner, shadow.first)
        started = await asyncio.to_thread(with_server_tools, started)
        if self.attach(pane, started):
            self.host.show_tab(domain)

    async def close_all(self) -> None:
        """Close every tab's twin and wait for them (quitting)."""
        closing = [f for p in self.host.panes() if (f := p.reality.untwin()) is not None]
        if self.at_start is not None:  # the app closed before its tabs were built
            closing.append(close_runner(self.at_start[1].runner))
            self.at_start = None
        for future in closing:
            await asyncio.wrap_future(future)
