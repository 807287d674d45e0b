"""The app's start: the first tab before the first frame, the others right after it, then
the session to open (a ``--session`` file, or the last one, if the user resumes it)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rich.text import Text

from agentworld_tui.config import settings_path
from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.textual_private import closing
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import Workspace, WorkspaceError, open_or_new

if TYPE_CHECKING:
    from agentworld_tui.ui.app import AgentWorldApp

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
    found = getattr(importlib.import_module(module), cls)
    assert issubclass(found, DomainPane)
    return found


def first_scenario(domain: str) -> Scenario:
    scenarios, _ = load_scenarios(domain)
    return scenarios[0] if scenarios else Scenario("blank", "Blank")


def collect_after_start() -> None:
    """Turn the cyclic garbage collector back on if the launcher turned it off for start-up
    (``cli.cmd_app``): collect once, then freeze what start-up left alive, so that later
    full collections, which pause the screen, no longer walk every imported module."""
    import gc

    if gc.isenabled():
        return
    gc.collect()
    gc.freeze()
    gc.enable()


class StartUp:
    def __init__(self, app: AgentWorldApp) -> None:
        self.app = app
        self.first_tab = FIRST_TAB

    def new_pane(self, name: str) -> DomainPane:
        domain = DOMAINS[name]
        pane = pane_class(domain)(domain, first_scenario(name), self.app, id=f"pane-{name}")
        if not self.app.settings.ui.show_reasoning:
            pane.add_class("-reasoning-hidden")
        return pane

    def pane_built(self, pane: DomainPane) -> None:
        """A pane is mounted: it starts as the others did."""
        app = self.app
        for problem in pane.problems:
            app.notify(problem, severity="warning", timeout=10)
        error = app.simulator.engine_error
        if app.engine is None:
            self.no_model_help(pane)
        elif error:
            pane.screen_view.append_lines([Text(error, style="bold red")])

    async def build_other_tabs(self) -> None:
        """Build the tabs not yet shown (keys wait meanwhile), then open the start session,
        which may fill any of them."""
        app = self.app
        tabs = app.tabs()
        for name in DOMAINS:
            if app.pane_for(name) is not None:
                continue
            if closing(tabs):  # a quick quit: the app closes before its tabs are all built
                return
            pane = self.new_pane(name)
            await tabs.get_pane(f"tab-{name}").mount(pane)
            if closing(pane):  # it closed as the pane was mounted: parts may be missing
                return
            app.pane_built(pane)
        app.tabs_ready.set()
        app.loading.maybe_ready()
        self.open_start_session()
        collect_after_start()  # after the start session replaced what start-up made
        if app.engine is None and app.offer_models and not app.settings.server.url:
            app.loading.pick()

    def open_start_session(self) -> None:
        app = self.app
        if app.session_file is not None:
            try:
                self.apply(open_or_new(app.session_file))
            except WorkspaceError as exc:
                app.notify(
                    f"{exc}. The file was left untouched; this session is saved elsewhere.",
                    title="Session file",
                    severity="error",
                    timeout=20,
                )
            return
        if not app.offer_resume:
            return
        last = app.library.last_used()
        if last is None:
            return
        try:
            workspace = app.library.open(last)
        except WorkspaceError as exc:
            app.notify(str(exc), title="Last session", severity="warning", timeout=10)
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

        app.push_screen(
            ConfirmScreen(question, yes="Resume", no="Start fresh", default=True), answer
        )

    def apply(self, workspace: Workspace) -> None:
        """Show an opened session file: each of its tabs in its domain's pane (the first of
        a domain; others stay in the file as they are)."""
        app = self.app
        app.files.open(workspace)
        shown: set[str] = set()
        extra = 0
        for session in workspace.tabs:
            pane = app.pane_for(session.domain.name)
            if pane is None or session.domain.name in shown:
                extra += 1
                continue
            shown.add(session.domain.name)
            pane.replace_session(session)
        if workspace.tabs and 0 <= workspace.active_tab < len(workspace.tabs):
            app.show_tab(workspace.tabs[workspace.active_tab].domain.name)
        app.notify(f"Opened “{workspace.name}”.", timeout=4)
        if extra:
            app.notify(
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
