"""The app's start: the first tab before the first frame, the others right after it, then
the session to open (a ``--session`` file, or the last one, if the user resumes it)."""

from __future__ import annotations

import asyncio
import gc
import importlib
from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual.widgets import TabbedContent

from agentworld_tui.config import Settings, settings_path
from agentworld_tui.domains import DOMAINS
from agentworld_tui.simulator.workspace import OpenWorkspace
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.loading import ModelLoading
from agentworld_tui.ui.panes.base import DomainPane, PaneHost
from agentworld_tui.ui.textual_private import closing
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import Workspace, WorkspaceError, open_or_new

FIRST_TAB = "terminal"
"""The tab built before the first frame; the others are built right after it."""
NO_MODEL_HELP = "no-model-help"


def tab_label(title: str, busy: bool) -> str:
    """A tab's label; its width is the same busy or not, so the tabs never move."""
    return title + (" ●" if busy else "  ")


GENERIC_PANE = "agentworld_tui.ui.panes.generic:GenericPane"


def pane_class(domain: Domain) -> type[DomainPane]:
    """The pane the domain names (``Domain.pane``, "package.module:Class"), else the
    generic one that any domain can use."""
    module, _, cls = (domain.pane or GENERIC_PANE).partition(":")
    found: object = getattr(importlib.import_module(module), cls)
    assert isinstance(found, type) and issubclass(found, DomainPane)
    return found


def first_scenario(domain: str) -> Scenario:
    scenarios, _ = load_scenarios(domain)
    return scenarios[0] if scenarios else Scenario("blank", "Blank")


def collect_after_start() -> None:
    """Turn the cyclic garbage collector back on if the launcher turned it off for start-up
    (``cli.cmd_app``): collect once, then freeze what start-up left alive, so that later
    full collections, which pause the screen, no longer walk every imported module."""
    if gc.isenabled():
        return
    gc.collect()
    gc.freeze()
    gc.enable()


class StartHost(PaneHost, TabsAndDialogs, Protocol):
    """What the start needs of the app (each pane is handed the app as its ``PaneHost``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def files(self) -> OpenWorkspace:
        """The open session file."""
        ...

    @property
    def tabs_ready(self) -> asyncio.Event: ...

    def tabs(self) -> TabbedContent: ...

    def add_pane(self, pane: DomainPane) -> None:
        """A tab's pane is built: the app counts it among its panes."""
        ...


class StartUp:
    """The tabs built, and the session the app starts with shown in them."""

    def __init__(
        self,
        host: StartHost,
        loading: ModelLoading,
        *,
        session_file: Path | None,
        offer_resume: bool,
        offer_models: bool,
    ) -> None:
        self.host = host
        self.loading = loading
        self.session_file = session_file
        self.offer_resume = offer_resume and session_file is None
        self.offer_models = offer_models
        self.first_tab = FIRST_TAB

    def new_pane(self, name: str) -> DomainPane:
        domain = DOMAINS[name]
        pane = pane_class(domain)(domain, first_scenario(name), self.host, id=f"pane-{name}")
        if not self.host.settings.ui.show_reasoning:
            pane.add_class("-reasoning-hidden")
        return pane

    def pane_built(self, pane: DomainPane) -> None:
        """A pane is mounted: it starts as the others did."""
        host = self.host
        host.add_pane(pane)
        for problem in pane.problems:
            host.notify(problem, severity="warning", timeout=10)
        error = host.simulator.engine_error
        if host.simulator.engine is None:
            self.no_model_help(pane)
        elif error:
            pane.screen_view.append_lines([Text(error, style="bold red")])

    async def build_other_tabs(self) -> None:
        """Build the tabs not yet shown (keys wait meanwhile), then open the start session,
        which may fill any of them."""
        host = self.host
        tabs = host.tabs()
        for name in DOMAINS:
            if host.pane_for(name) is not None:
                continue
            if closing(tabs):  # a quick quit: the app closes before its tabs are all built
                return
            pane = self.new_pane(name)
            await tabs.get_pane(f"tab-{name}").mount(pane)
            if closing(pane):  # it closed as the pane was mounted: parts may be missing
                return
            self.pane_built(pane)
        host.tabs_ready.set()
        self.loading.maybe_ready()
        self.open_start_session()
        collect_after_start()  # after the start session replaced what start-up made
        if host.simulator.engine is None and self.offer_models and not host.settings.server.url:
            self.loading.pick()

    def open_start_session(self) -> None:
        host = self.host
        if self.session_file is not None:
            try:
                self.apply(open_or_new(self.session_file))
            except WorkspaceError as exc:
                host.notify(
                    f"{exc}. The file was left untouched; this session is saved elsewhere.",
                    title="Session file",
                    severity="error",
                    timeout=20,
                )
            return
        if not self.offer_resume:
            return
        library = host.files.library
        last = library.last_used()
        if last is None:
            return
        try:
            workspace = library.open(last)
        except WorkspaceError as exc:
            host.notify(str(exc), title="Last session", severity="warning", timeout=10)
            return
        if not workspace.turn_count:
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.apply(workspace)
            else:
                workspace.close()  # stays in the session browser, for another program too

        turns = workspace.turn_count
        tabs = len(workspace.tabs)
        question = (
            f"Resume “{workspace.name}” ({turns} turn{'s' * (turns != 1)} in "
            f"{tabs} tab{'s' * (tabs != 1)})?"
        )
        from agentworld_tui.ui.screens.sessions import ConfirmScreen

        host.push_screen(
            ConfirmScreen(question, yes="Resume", no="Start fresh", default=True), answer
        )

    def apply(self, workspace: Workspace) -> None:
        """Show an opened session file: each of its tabs in its domain's pane (the first of
        a domain; others stay in the file as they are)."""
        host = self.host
        host.files.open(workspace)
        shown: set[str] = set()
        extra = 0
        for session in workspace.tabs:
            pane = host.pane_for(session.domain.name)
            if pane is None or session.domain.name in shown:
                extra += 1
                continue
            shown.add(session.domain.name)
            pane.replace_session(session)
        if workspace.tabs and 0 <= workspace.active_tab < len(workspace.tabs):
            host.show_tab(workspace.tabs[workspace.active_tab].domain.name)
        host.notify(f"Opened “{workspace.name}”.", timeout=4)
        if extra:
            host.notify(
                f"The file has {extra} more tab{'s' * (extra != 1)} of a domain already shown; "
                "they are kept in the file as they are.",
                severity="warning",
                timeout=10,
            )

    def no_model_help(self, pane: DomainPane) -> None:
        lines = [
            "No model is configured yet.",
            "",
            "  Start with a GGUF file:    agentworld --model PATH.gguf",
            f"  or set it in {settings_path()}:",
            "      [model]",
            '      path = "/path/to/model.gguf"',
            "  or use a server:           agentworld --server http://HOST:PORT/v1",
            "  or press F3 to pick or download one.",
        ]
        pane.screen_view.append_lines([Text(line, style="yellow") for line in lines])
        pane.no_model_lines = len(lines)
