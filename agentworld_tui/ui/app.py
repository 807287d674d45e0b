"""The Textual app: one tab per domain, one model shared by all of them.

The app only shows: turns run through the simulator service (``agentworld_tui.simulator``),
the open session file is an ``OpenWorkspace``, and each key is an ``action_`` method here
that hands off to the part that owns it (``tab_actions``, ``loading``, ``judging``,
``agent_serving``, ``saving``), each handed the app as a Protocol of what it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Input, TabbedContent, TabPane, Tabs, TextArea

from agentworld_tui.config import Settings, config_dir, sessions_dir
from agentworld_tui.domains import DOMAINS
from agentworld_tui.engines.base import Engine
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.workspace import OpenWorkspace
from agentworld_tui.ui import keys as app_keys
from agentworld_tui.ui.judging import TurnJudging
from agentworld_tui.ui.loading import ModelLoading
from agentworld_tui.ui.main_screen import MainScreen
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.saving import Saving
from agentworld_tui.ui.start import StartUp, collect_after_start, tab_label
from agentworld_tui.ui.tab_actions import TabActions
from agentworld_tui.ui.textual_private import (
    SafeCells,
    SteadyTabs,
    read_keys_as_sent,
    relabel,
)
from agentworld_tui.ui.twin_actions import TwinActions
from agentworld_tui.ui.widgets.status_bar import StatusBar, StatusInfo
from agentworld_tui.world.folders import use_user_folder
from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import Workspace

if TYPE_CHECKING:
    from agentworld_tui.simulator.shadow import Shadow
    from agentworld_tui.ui.agent_serving import AgentServing, TabServing

__all__ = ["AgentWorldApp", "MainScreen", "collect_after_start"]


class AgentWorldApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "agentworld"
    BINDINGS: ClassVar[list[BindingType]] = [*app_keys.BINDINGS]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The main screen's keys do nothing while a dialog is open (and reach it instead)."""
        return not (action in app_keys.MAIN_SCREEN_ACTIONS and len(self.screen_stack) > 1)

    def __init__(
        self,
        settings: Settings,
        *,
        engine: Engine | None = None,
        session_file: Path | None = None,
        offer_resume: bool = True,
        offer_models: bool = True,
        twin: tuple[str, Shadow] | None = None,
    ) -> None:
        """``twin``: a tab (its domain) and the twin started for it on the command line."""
        super().__init__()
        read_keys_as_sent()  # Alt+1 ... Alt+7 as tmux and xterm send them
        use_user_folder(config_dir())  # the user's prompts, scenarios, worlds and models
        self.settings = settings
        self.files = OpenWorkspace(SessionLibrary(sessions_dir()))
        self.loading = ModelLoading(self)
        self.simulator: Simulator = self.loading.simulator(engine)
        self.start_up = StartUp(
            self,
            self.loading,
            session_file=session_file,
            offer_resume=offer_resume and twin is None,
            offer_models=offer_models,
        )
        self.tab_actions = TabActions(self, self.start_up.apply)
        self.twin_actions = TwinActions(self, self.tab_actions.replace_session, twin)
        self.judging = TurnJudging(self, settings.generation)
        self.saving = Saving(self, settings.ui)
        self.tabs_ready = asyncio.Event()
        """Set once every domain's tab is built (the first before the first frame)."""
        self.model_ready = asyncio.Event()
        """Set once a turn can be sent: the model is loaded and every tab is built."""
        self._panes: dict[str, DomainPane] = {}
        self.serving: dict[str, TabServing] = {}
        """The tabs served to agents, by domain (``ui.agent_serving``)."""
        self._steady_cursor: dict[str, Input | TextArea] = {}
        self._safe_cells = SafeCells()

    # -- what panes and screens use ---------------------------------------------------------
    @property
    def engine(self) -> Engine | None:
        return self.simulator.engine

    @property
    def wait_seconds(self) -> float:
        return self.settings.ui.wait_seconds

    @property
    def library(self) -> SessionLibrary:
        return self.files.library

    @property
    def workspace(self) -> Workspace:
        return self.files.workspace

    def turn_problem(self) -> str:
        if not self.tabs_ready.is_set():  # the start session may still replace the tab
            return "still starting: send it again in a moment"
        return self.simulator.problem()

    def save_session(self, session: Session | None = None) -> str | None:
        """Save every tab (after each finished or interrupted turn); a failure is said."""
        return self.saving.save(session)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification is plain, sanitized text: its parts often came from a
        server, a file or the model (``markup`` is taken as Textual's is, and ignored)."""
        super().notify(
            sanitize(message),
            title=sanitize(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then ``SafeCells``: no character a terminal acts on is drawn,
        whatever a widget was handed."""
        return [*super().get_line_filters(), self._safe_cells]

    # -- layout -------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        # Only the first tab is built before the first frame; the rest follow right after it.
        with SteadyTabs(id="tabs", classes="backdrop"):
            for name in DOMAINS:
                label = tab_label(DOMAINS.title(name), busy=False)
                with TabPane(label, id=f"tab-{name}", classes="backdrop"):
                    if name == self.start_up.first_tab:
                        yield self.start_up.new_pane(name)
        with Vertical(id="bottom", classes="backdrop"):  # an update above never paints it
            yield StatusBar(id="status")
            yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        self.fit(event.size.width)

    def fit(self, width: int) -> None:
        """Under NARROW columns the reasoning panel waits to be asked for and the footer
        packs its keys tighter."""
        narrow = width < app_keys.NARROW
        self.screen_stack[0].set_class(narrow, "-narrow")
        with contextlib.suppress(NoMatches):
            self.screen_stack[0].query_one(Footer).compact = narrow

    def on_mount(self) -> None:
        self.fit(self.size.width)
        self.loading.start()
        self.start_up.pane_built(self.query_one(DomainPane))
        self.show_status()
        self.call_after_refresh(self.call_later, self.start_up.build_other_tabs)
        if self.twin_actions.at_start is not None:
            self.run_worker(self.twin_actions.attach_at_start(), group="twin-start")

    def add_pane(self, pane: DomainPane) -> None:
        self._panes[pane.domain.name] = pane
        self._panes = {n: self._panes[n] for n in DOMAINS if n in self._panes}  # tab order

    def tabs(self) -> TabbedContent:
        """The tabs live on the base screen, whatever dialog is on top."""
        return self.screen_stack[0].query_one("#tabs", TabbedContent)

    def panes(self) -> list[DomainPane]:
        """The tabs' panes built so far, in tab order."""
        return list(self._panes.values())

    def pane_for(self, domain: str) -> DomainPane | None:
        return self._panes.get(domain)

    @property
    def active_pane(self) -> DomainPane | None:
        try:
            active = self.tabs().active
        except (NoMatches, IndexError):  # not composed yet, or closing
            return None
        return self._panes.get(active.removeprefix("tab-"))

    def show_tab(self, domain: str) -> None:
        self.tabs().active = f"tab-{domain}"

    def on_steady_tabs_focus_strayed(self) -> None:
        self.focus_editor()

    def focus_editor(self) -> None:
        focus = getattr(self.active_pane, "focus_editor", None)
        if callable(focus):
            focus()

    # -- status -------------------------------------------------------------------------
    def on_domain_pane_status_changed(self, event: DomainPane.StatusChanged) -> None:
        self.mark_busy()
        if event.pane is self.active_pane:
            self.show_status()

    def on_domain_pane_turn_finished(self, event: DomainPane.TurnFinished) -> None:
        self.mark_busy()
        self.show_status()

    def show_counters(self, pane: DomainPane) -> None:
        """A pane's live counters changed during a frame it draws: the status line joins
        that frame's screen update (a message would arrive after it, costing one more)."""
        if pane is self.active_pane:
            self.show_status()

    def on_tabbed_content_tab_activated(self) -> None:
        self.show_status()
        self.call_after_refresh(self.focus_editor)

    def mark_busy(self) -> None:
        """A dot on the tabs whose turn runs; the focused editor's cursor holds still in
        a streaming tab (a blink is a screen update)."""
        try:
            tabs = self.tabs()
        except (IndexError, NoMatches):  # closing
            return
        for pane in self.panes():
            tab = tabs.get_tab(f"tab-{pane.domain.name}")
            label = tab_label(pane.domain.title, pane.busy)
            if str(tab.label) == label:
                continue
            relabel(tab, label)
            name = pane.domain.name
            if pane.busy:
                editor = self.focused
                if (
                    isinstance(editor, Input | TextArea)
                    and editor.cursor_blink
                    and pane in editor.ancestors
                ):
                    editor.cursor_blink = False
                    self._steady_cursor[name] = editor
            elif (steady := self._steady_cursor.pop(name, None)) is not None:
                steady.cursor_blink = True

    def show_status(self) -> None:
        pane = self.active_pane
        info = self.loading.status(pane.status if pane is not None else StatusInfo())
        info.queued = self.simulator.waiting()
        with contextlib.suppress(IndexError, NoMatches):  # closing
            self.screen_stack[0].query_one("#status", StatusBar).show(info)

    # -- keys: each hands off to the part that owns it (docs/architecture.md) -----------
    def action_stop(self) -> None:
        pane = self.active_pane
        if pane is not None and not pane.stop():
            pane.show_error("")

    def action_toggle_reasoning(self) -> None:
        if self.active_pane is not None:
            self.active_pane.toggle_reasoning()

    def action_retry(self) -> None:
        self.tab_actions.retry()

    def action_answer_now(self) -> None:
        self.tab_actions.answer_now()

    def action_raw_output(self) -> None:
        self.tab_actions.raw_output()

    def action_toggle_thinking(self) -> None:
        self.tab_actions.toggle_thinking()

    def action_edit_state(self) -> None:
        self.tab_actions.edit_state()

    def action_new_session(self) -> None:
        self.tab_actions.new_session()

    def action_sessions(self) -> None:
        self.tab_actions.sessions()

    def action_undo(self) -> None:
        self.tab_actions.undo()

    def action_redo(self) -> None:
        self.tab_actions.redo()

    def action_branches(self) -> None:
        self.tab_actions.branches()

    def action_replay(self) -> None:
        self.tab_actions.replay()

    def action_control(self) -> None:
        self.tab_actions.control()

    def action_world(self) -> None:
        self.tab_actions.world()

    def action_models(self) -> None:
        self.loading.pick()

    def action_judge(self) -> None:
        self.judging.judge_last_turn()

    def action_twin(self) -> None:
        self.twin_actions.open_dialog()

    def action_twin_view(self) -> None:
        self.twin_actions.toggle_view()

    def action_twin_summary(self) -> None:
        self.twin_actions.summary()

    async def action_agent(self) -> None:
        await self.agent_serving.toggle()

    @functools.cached_property
    def agent_serving(self) -> AgentServing:
        """Made on the first Ctrl+B: the MCP server's packages load only then."""
        from agentworld_tui.ui.agent_serving import AgentServing

        return AgentServing(self)

    def action_next_tab(self) -> None:
        self.tabs().query_one(Tabs).action_next_tab()

    def action_previous_tab(self) -> None:
        self.tabs().query_one(Tabs).action_previous_tab()

    def action_show_tab(self, number: int) -> None:
        names = list(DOMAINS)
        if 1 <= number <= len(names):
            self.show_tab(names[number - 1])

    def action_help(self) -> None:
        from agentworld_tui.ui.screens.help import HelpScreen, key_table

        keys = [b for b in app_keys.BINDINGS if not b.action.startswith("show_tab")]
        rows = key_table(keys, self.active_pane)
        rows.append((f"Alt+1 … Alt+{len(app_keys.TAB_KEYS)}", "Show the tab at that place"))
        self.push_screen(HelpScreen(rows))

    # Textual's takes a file name and a folder; F12 always saves in the screenshots folder.
    def action_screenshot(self) -> None:  # type: ignore[override]
        self.saving.screenshot()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette: Textual's own commands (its screenshot left out: F12 saves one in
        the screenshots folder), then every key's action."""
        for command in super().get_system_commands(screen):
            if command.title.lower() != "screenshot":
                yield command
        for binding in app_keys.BINDINGS:
            if binding.action not in ("quit", "screenshot"):
                # run_action: an action with arguments (``show_tab(2)``) is a string to parse
                action = functools.partial(self.run_action, binding.action)
                title = binding.tooltip if binding.action.startswith("show_tab") else None
                yield SystemCommand(title or binding.description, binding.tooltip or "", action)
        yield SystemCommand("Screenshot", "Save the screen as SVG", self.action_screenshot)

    async def on_unmount(self) -> None:
        if self.serving:  # closed some other way than Ctrl+Q (a test, a signal)
            await self.agent_serving.end_all()
        await self.twin_actions.close_all()  # every twin's sandbox or server goes with the app

    async def action_quit(self) -> None:
        if self.serving:
            await (
                self.agent_serving.end_all()
            )  # every agent's call is recorded before the last save
        self.saving.quit()
