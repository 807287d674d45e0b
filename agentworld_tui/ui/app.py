"""The Textual app: one tab per domain, one model shared by all of them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import UPDATE_PERIOD, Screen
from textual.widget import Widget
from textual.widgets import Footer, Static, Tab, TabbedContent, TabPane, Tabs

from agentworld_tui.config import Settings, settings_path
from agentworld_tui.domains import DOMAINS
from agentworld_tui.engines.base import Engine, GenerationParams
from agentworld_tui.engines.queue import CallJob, EngineQueue, TurnJob
from agentworld_tui.launch import UserError, generation_params, make_engine
from agentworld_tui.ui.panes.base import DomainPane, closing
from agentworld_tui.ui.update_clock import UpdateClock
from agentworld_tui.ui.widgets.status_bar import StatusBar, StatusInfo
from agentworld_tui.ui.widgets.still import keep_rows
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Turn

if TYPE_CHECKING:
    from agentworld_tui.ui.screens.judge_view import JudgeRequest
from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import Workspace, WorkspaceError, open_or_new

PANES: dict[str, str] = {
    "terminal": "terminal:TerminalPane",
    "mcp": "mcp:McpPane",
    "web": "web:WebPane",
    "android": "android:AndroidPane",
    "search": "search:SearchPane",
    "swe": "swe:SwePane",
    "os": "os:OsPane",
}
"""Each domain's pane, as module:class under agentworld_tui.ui.panes (imported when built)."""
FIRST_TAB = "terminal"
"""The tab built before the first frame; the others are built right after it."""


class MainScreen(Screen[None]):
    """The tabs' screen. It starts with the first tab's command line focused, so the first
    frame shows where typing goes. (Textual would focus the first focusable widget, the tab
    bar, and restyle it twice when the editor took the focus after the first frame.)"""

    AUTO_FOCUS = "#keystrokes"  # the terminal tab's command line (FIRST_TAB)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        keep_rows(self)  # its children cover it: it never changes while a tab streams
        self._clock: UpdateClock | None = None
        self._resumed = False

    @property
    def _update_timer(self) -> UpdateClock:  # type: ignore[override]
        """The screen's updates run on the loop's own timer (``UpdateClock``)."""
        if self._clock is None:
            self._clock = UpdateClock(self, UPDATE_PERIOD)
        return self._clock

    def on_unmount(self) -> None:
        self._update_timer.pause()

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """The first resume, at start, restyles nothing: every widget was styled as it was
        mounted, and styling them all again was 3% of the work to the first frame. Later
        resumes (after a screen above closes) restyle as Textual does."""
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False

    def _on_resize(self, event: events.Resize) -> None:
        """A resize to the size the screen is laid out at lays nothing out again. At start
        Textual sends three (the app's, and two the screen sends itself after its layouts),
        each a full layout of every widget (2% of the work to the first frame); a layout
        that is due for another reason still comes with the next refresh."""
        if event.size == self._compositor.size:
            event.stop()
            event.prevent_default()  # Screen's own handler would lay the screen out


def pane_class(name: str) -> type[DomainPane]:
    import importlib

    module, _, cls = PANES.get(name, "generic:GenericPane").partition(":")
    found = getattr(importlib.import_module(f"agentworld_tui.ui.panes.{module}"), cls)
    assert issubclass(found, DomainPane)
    return found


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


def tab_label(title: str, busy: bool) -> str:
    """A tab's label; its width is the same busy or not, so the tabs never move."""
    return title + (" ●" if busy else "  ")


def relabel(tab: Tab, label: str) -> None:
    """A new label of the same width (``tab_label``): the tab is drawn again, without the
    layout of the whole screen (and the message to every widget that it brings) that
    ``Tab.label`` asks for, twice a turn."""
    tab._label = Content(label)
    Static.update(tab, tab._label, layout=False)


def first_scenario(domain: str) -> Scenario:
    scenarios, _ = load_scenarios(domain)
    return scenarios[0] if scenarios else Scenario("blank", "Blank")


# Keys bound with priority, so that editors cannot swallow them, but only on the main screen.
MAIN_SCREEN_ACTIONS = {
    "retry",
    "answer_now",
    "toggle_reasoning",
    "edit_state",
    "new_session",
    "sessions",
    "undo",
    "branches",
    "replay",
    "screenshot",
    "models",
    "toggle_thinking",
    "control",
    "world",
    "judge",
}


class AgentWorldApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "agentworld"
    BINDINGS = [
        Binding("escape", "stop", "Stop", tooltip="Stop generating; what came stays"),
        Binding("ctrl+r", "retry", "Retry", tooltip="Ask again for the last turn", priority=True),
        Binding(
            "ctrl+g",
            "answer_now",
            "Answer now",
            tooltip="End the reasoning and answer",
            priority=True,
        ),
        Binding(
            "ctrl+t",
            "toggle_reasoning",
            "Reasoning",
            tooltip="Show or hide the reasoning",
            priority=True,
        ),
        Binding(
            "ctrl+e", "edit_state", "Start state", tooltip="Edit the starting state", priority=True
        ),
        Binding("ctrl+n", "new_session", "New", tooltip="Start this tab afresh", priority=True),
        Binding(
            "ctrl+o",
            "sessions",
            "Sessions",
            tooltip="Open, rename or delete saved sessions",
            priority=True,
        ),
        Binding(
            "f6", "undo", "Undo turn", tooltip="Remove the last turn of this tab", priority=True
        ),
        # Priority: text editors bind F7 (select all) for themselves.
        Binding(
            "f7",
            "branches",
            "Branches",
            tooltip="Switch, regenerate or edit earlier turns",
            priority=True,
        ),
        Binding(
            "f8", "replay", "Replay", tooltip="Open AgentWorldBench trajectories", priority=True
        ),
        Binding(
            "f12",
            "screenshot",
            "Screenshot",
            tooltip="Save the screen as SVG",
            show=False,
            priority=True,
        ),
        Binding(
            "f3", "models", "Models", tooltip="Choose, download or switch the model", priority=True
        ),
        Binding(
            "f4",
            "toggle_thinking",
            "Thinking",
            tooltip="Thinking on/off for this tab",
            priority=True,
        ),
        Binding(
            "f9",
            "control",
            "Control",
            tooltip="Inject a perturbation into the next turns",
            priority=True,
        ),
        Binding("f10", "world", "World", tooltip="Attach or edit a fictional world", priority=True),
        Binding(
            "f11",
            "judge",
            "Judge",
            tooltip="Judge the last turn against a reference",
            priority=True,
        ),
        Binding("f1", "help", "Help", tooltip="Keys and commands"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The main screen's keys do nothing while a dialog is open (and reach it instead)."""
        return not (action in MAIN_SCREEN_ACTIONS and len(self.screen_stack) > 1)

    def __init__(
        self,
        settings: Settings,
        *,
        engine: Engine | None = None,
        session_file: Path | None = None,
        offer_resume: bool = True,
        offer_models: bool = True,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.library = SessionLibrary()
        self.session_file = session_file
        self.offer_resume = offer_resume and session_file is None
        self.offer_models = offer_models
        self.workspace: Workspace = self.library.new()
        self.params: GenerationParams = generation_params(settings)
        self.engine_error = ""
        if engine is None:
            try:
                engine = make_engine(settings)
            except UserError as exc:
                self.engine_error = str(exc)
        self.engine = engine
        self.queue = EngineQueue(engine)
        self.model_ready = asyncio.Event()
        """Set once a turn can be sent: the model is loaded and every tab is built."""
        self._model_loaded = False
        self._panes: dict[str, DomainPane] = {}
        self._steady_cursor: dict[str, Widget] = {}
        self.tabs_ready = asyncio.Event()
        """Set once every domain's tab is built (the first is built before the first frame,
        the others right after it)."""
        self.model_status = StatusInfo(model="no model")
        if engine is not None:
            self.model_status.model = engine.info.name
            self.model_status.phase = "loading model"

    # -- layout -------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        # Only the first tab is built before the first frame; the rest follow right after it.
        with TabbedContent(id="tabs", classes="backdrop"):
            for name in DOMAINS:
                with TabPane(
                    tab_label(DOMAINS.title(name), busy=False), id=f"tab-{name}", classes="backdrop"
                ):
                    if name == FIRST_TAB:
                        yield self._new_pane(name)
        with Vertical(id="bottom", classes="backdrop"):  # an update above never paints it
            yield StatusBar(id="status")
            # A frame that brings the status line's counters renders every widget between
            # the view and the footer's area (Textual updates the region around all the
            # changes); the footer does not change while a tab streams.
            yield keep_rows(Footer())

    def _new_pane(self, name: str) -> DomainPane:
        return pane_class(name)(DOMAINS[name], first_scenario(name), id=f"pane-{name}")

    def on_mount(self) -> None:
        from agentworld_tui.launch import settings_problems

        for problem in settings_problems:
            self.notify(problem, title="Settings", severity="warning", timeout=15)
        if self.engine is None:
            self.model_status.phase = ""
        else:
            self.queue.load(self._load_progress, self._load_done)
        self._pane_built(self.query_one(DomainPane))
        keep_rows(self.tabs().query_one(Tabs))  # every frame of a tab renders the bar
        self._show_status()
        self.call_after_refresh(self.call_later, self._build_other_tabs)

    def _pane_built(self, pane: DomainPane) -> None:
        """A pane is mounted: the app knows it from now on, and it starts as the others did."""
        self._panes[pane.domain.name] = pane
        self._panes = {n: self._panes[n] for n in DOMAINS if n in self._panes}  # tab order
        for problem in pane.problems:
            self.notify(problem, severity="warning", timeout=10)
        if self.engine is None:
            self._no_model_help(pane)
        elif self.engine_error:
            pane.screen_view.append_lines([Text(self.engine_error, style="bold red")])

    async def _build_other_tabs(self) -> None:
        """Build the tabs not yet shown (keys wait meanwhile: about 0.4 s here), then open the
        start session, which may fill any of them."""
        tabs = self.tabs()
        for name in DOMAINS:
            if name in self._panes:
                continue
            if closing(tabs):  # a quick quit: the app closes before its tabs are all built
                return
            pane = self._new_pane(name)
            await tabs.get_pane(f"tab-{name}").mount(pane)
            if closing(pane):  # it closed as the pane was mounted: parts may be missing
                return
            self._pane_built(pane)
        self.tabs_ready.set()
        self._maybe_ready()
        self._open_start_session()
        collect_after_start()  # after the start session replaced what start-up made
        if self.engine is None and self.offer_models and not self.settings.server.url:
            self.action_models()

    # -- saved sessions -----------------------------------------------------------------
    def _open_start_session(self) -> None:
        if self.session_file is not None:
            try:
                self._apply_workspace(open_or_new(self.session_file))
            except WorkspaceError as exc:
                self.notify(
                    f"{exc}. The file was left untouched; this session is saved elsewhere.",
                    title="Session file",
                    severity="error",
                    timeout=20,
                )
            return
        if not self.offer_resume:
            return
        last = self.library.last_used()
        if last is None:
            return
        try:
            workspace = self.library.open(last)
        except WorkspaceError as exc:
            self.notify(str(exc), title="Last session", severity="warning", timeout=10)
            return
        if not workspace.turn_count:
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._apply_workspace(workspace)

        question = (
            f"Resume “{workspace.name}” ({workspace.turn_count} turns in "
            f"{len(workspace.tabs)} tabs)?"
        )
        from agentworld_tui.ui.screens.sessions import ConfirmScreen

        self.push_screen(ConfirmScreen(question, yes="Resume", no="Start fresh"), answer)

    def _apply_workspace(self, workspace: Workspace) -> None:
        panes = {pane.domain.name: pane for pane in self.panes()}
        for session in workspace.tabs:
            pane = panes.get(session.domain.name)
            if pane is not None:
                pane.replace_session(session)
        self.workspace = workspace
        if workspace.tabs and 0 <= workspace.active_tab < len(workspace.tabs):
            name = workspace.tabs[workspace.active_tab].domain.name
            self.tabs().active = f"tab-{name}"
        self.notify(f"Opened “{workspace.name}”.", timeout=4)

    def save_workspace(self) -> None:
        """Save every tab now (after each finished or interrupted turn)."""
        panes = [p for p in self.panes() if p.session.turns]
        self.workspace.tabs = [p.session for p in panes]
        active = self.active_pane
        self.workspace.active_tab = panes.index(active) if active in panes else 0
        try:
            if (
                self.workspace.path is not None
                and self.workspace.path.parent == self.library.folder
            ):
                self.library.save(self.workspace)
            else:
                self.workspace.save()
        except WorkspaceError as exc:
            self.notify(
                f"{exc}. Your turns are still here; free some space and they are saved "
                "with the next turn.",
                title="Not saved",
                severity="error",
                timeout=20,
            )

    def action_sessions(self) -> None:
        if any(p.busy for p in self.panes()):
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return

        def opened(path: Path | None) -> None:
            if path is None:
                return
            try:
                self._apply_workspace(self.library.open(path))
            except WorkspaceError as exc:
                self.notify(str(exc), severity="error", timeout=15)

        from agentworld_tui.ui.screens.sessions import SessionBrowser

        self.push_screen(SessionBrowser(self.library), opened)

    def action_undo(self) -> None:
        pane = self.active_pane
        if pane is None or pane.busy or not pane.session.turns:
            self.notify("Nothing to undo.", timeout=3)
            return
        pane.session.undo()
        pane.show_session()
        self.save_workspace()

    def action_branches(self) -> None:
        from agentworld_tui.ui.screens.branches import BranchesScreen, HistoryEdit
        from agentworld_tui.world.session import HistoryError

        pane = self.active_pane
        if pane is None or len(self.screen_stack) > 1:  # not over another dialog
            return
        if pane.busy:
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return
        if not pane.session.turns:
            self.notify("No turns in this tab yet.", timeout=3)
            return

        def changed() -> None:
            pane.show_session()
            self.save_workspace()

        def run(edit: HistoryEdit | None) -> None:
            if edit is None or not self.can_generate(pane):
                return
            session = pane.session
            try:
                if edit.action is None:
                    turn = session.regenerate(edit.number)
                else:
                    turn = session.fork(edit.number, edit.action)
            except HistoryError as exc:
                self.notify(str(exc), severity="warning")
                return
            pane.run_pending(turn)

        self.push_screen(BranchesScreen(pane.session, changed), run)

    def action_replay(self) -> None:
        from agentworld_tui.ui.screens.replay import (
            ReplayScreen,
            TrajectoryChoice,
            TrajectoryPicker,
        )
        from agentworld_tui.world.trajectories import trajectory_session

        if len(self.screen_stack) > 1:  # not over another dialog or a replay
            return

        def chosen(choice: TrajectoryChoice | None) -> None:
            if choice is None:
                return
            if choice.mode == "replay":
                self.push_screen(ReplayScreen(choice.trajectory), self.load_history)
            else:
                domain = DOMAINS[choice.trajectory.domain]
                self.load_history(trajectory_session(choice.trajectory, domain, choice.upto))

        self.push_screen(TrajectoryPicker(), chosen)

    def load_history(self, session: Session | None) -> None:
        """Put recorded turns into their domain's tab, to carry on from them."""
        if session is None:
            return
        pane = next((p for p in self.panes() if p.domain.name == session.domain.name), None)
        if pane is None:
            self.notify(f"There is no {session.domain.title} tab.", severity="error")
            return
        if pane.busy:
            self.notify("Stop the tab's running turn first (Esc).", severity="warning")
            return

        def load(yes: bool | None = True) -> None:
            if not yes or pane is None:
                return
            pane.replace_session(session)
            self.tabs().active = f"tab-{pane.domain.name}"
            self.save_workspace()
            self.notify(
                f"{len(session.turns)} recorded turns loaded into {pane.domain.title}.", timeout=5
            )

        if pane.session.turns:
            question = (
                f"Replace the {pane.domain.title} tab's {len(pane.session.turns)} turns with "
                f"the recorded ones? (Saved sessions stay in the session browser.)"
            )
            from agentworld_tui.ui.screens.sessions import ConfirmScreen

            self.push_screen(ConfirmScreen(question, yes="Replace"), load)
        else:
            load()

    def action_screenshot(self) -> None:
        """Save the screen as SVG in the screenshots folder and say where."""
        import time

        from agentworld_tui.config import data_dir
        from agentworld_tui.world.store import write_atomic

        configured = self.settings.ui.screenshots_dir
        folder = Path(configured).expanduser() if configured else data_dir() / "screenshots"
        path = folder / time.strftime("agentworld-%Y%m%d-%H%M%S.svg")
        counter = 1
        while path.exists():
            counter += 1
            path = path.with_name(time.strftime(f"agentworld-%Y%m%d-%H%M%S-{counter}.svg"))
        try:
            write_atomic(path, self.export_screenshot().encode("utf-8"))
        except OSError as exc:
            self.notify(f"Screenshot not saved: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Screenshot saved to {path}", title="Screenshot", timeout=8)

    def _no_model_help(self, pane: DomainPane) -> None:
        lines = [
            "No model is configured yet.",
            "",
            "  Start with a GGUF file:    agentworld --model PATH.gguf",
            f"  or set it in {settings_path()}:",
            "      [model]",
            '      path = "/path/to/model.gguf"',
            "  or use a server:           agentworld --server http://HOST:PORT/v1",
        ]
        pane.screen_view.append_lines([Text(line, style="yellow") for line in lines])

    def tabs(self) -> TabbedContent:
        """The tabs live on the base screen, whatever dialog is on top."""
        return self.screen_stack[0].query_one("#tabs", TabbedContent)

    def panes(self) -> list[DomainPane]:
        """The tabs' panes built so far, in tab order (kept by the app: a query of the
        screen would walk every widget of every tab, and this is asked once a second
        while a turn streams)."""
        return list(self._panes.values())

    @property
    def active_pane(self) -> DomainPane | None:
        try:
            active = self.tabs().active
        except (NoMatches, IndexError):  # not composed yet, or closing
            return None
        return self._panes.get(active.removeprefix("tab-"))

    def _focus_editor(self) -> None:
        pane = self.active_pane
        focus = getattr(pane, "focus_editor", None)
        if callable(focus):
            focus()

    # -- the model ----------------------------------------------------------------------
    def _from_engine(self, callback: Callable[..., object], *args: object) -> None:
        """Run ``callback`` on the app's thread for the engine thread, which can outlive the
        app (a model still loading when it quits): once the app has closed, nothing runs."""

        def run() -> None:
            if self.is_running:
                callback(*args)

        if not self.is_running:
            return
        with contextlib.suppress(RuntimeError):  # it has closed just now
            self.call_from_thread(run)

    def _load_progress(self, message: str) -> None:
        self._from_engine(self._set_phase, message)

    def _set_phase(self, message: str) -> None:
        self.model_status.phase = "" if message == "ready" else message
        self._show_status()

    def _load_done(self, error: str | None) -> None:
        self._from_engine(self._loaded, error)

    def _loaded(self, error: str | None) -> None:
        if error:
            self.engine_error = error
            self.model_status.phase = "model failed to load"
            self.notify(error, title="Model", severity="error", timeout=30)
            for pane in self.panes():
                pane.screen_view.append_lines([Text(error, style="bold red")])
        else:
            assert self.engine is not None
            info = self.engine.info
            self.model_status.model = info.name
            self.model_status.where = info.where
            self.model_status.n_ctx = info.n_ctx
            self.model_status.phase = ""
            self._model_loaded = True
            self._maybe_ready()
        self._show_status()

    def _maybe_ready(self) -> None:
        if self._model_loaded and self.tabs_ready.is_set():
            self.model_ready.set()

    def action_models(self) -> None:
        from agentworld_tui.ui.screens.model_picker import ModelPicker

        if any(p.busy for p in self.panes()):
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return
        self.push_screen(ModelPicker(), self.use_model)

    def use_model(self, path: Path | None) -> None:
        """Load ``path`` in place of the current model and remember it in the settings."""
        self.call_after_refresh(self._focus_editor)
        if path is None:
            return
        from agentworld_tui.config import save_settings

        self.settings.model.path = str(path)
        self.settings.server.url = ""
        try:
            save_settings(self.settings)
        except OSError as exc:
            self.notify(f"could not save the settings: {exc}", severity="warning")
        try:
            engine = make_engine(self.settings)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.engine, self.engine_error = engine, ""
        self.model_ready.clear()
        self._model_loaded = False
        self.model_status = StatusInfo(model=engine.info.name, phase="loading model")
        self.queue.switch(engine, self._load_progress, self._load_done)
        self._show_status()

    def can_generate(self, pane: DomainPane) -> bool:
        if not self.tabs_ready.is_set():  # the start session may still replace the tab
            pane.show_error("still starting: send it again in a moment")
            return False
        if self.engine is None or self.engine_error:
            pane.show_error(self.engine_error or "no model is configured")
            return False
        return True

    def submit(self, job: TurnJob) -> None:
        self.queue.submit(job)
        self._mark_busy()

    # -- status -------------------------------------------------------------------------
    def on_domain_pane_status_changed(self, event: DomainPane.StatusChanged) -> None:
        self._mark_busy()
        if event.pane is self.active_pane:
            self._show_status()

    def show_counters(self, pane: DomainPane) -> None:
        """A pane's live counters changed during a frame it draws: the status line joins
        that frame's screen update (a message would arrive after it, costing one more)."""
        if pane is self.active_pane:
            self._show_status()

    def on_tabbed_content_tab_activated(self) -> None:
        self._show_status()
        self.call_after_refresh(self._focus_editor)

    def _mark_busy(self) -> None:
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
            # The focused editor's cursor holds still while its tab streams (a blink is a
            # screen update) and blinks again afterwards. Only that one: an unfocused
            # Input told to blink would run its blink timer unseen.
            name = pane.domain.name
            if pane.busy:
                editor = self.focused
                blinking = editor is not None and getattr(editor, "cursor_blink", False)
                if editor is not None and blinking and pane in editor.ancestors:
                    editor.cursor_blink = False  # type: ignore[attr-defined]
                    self._steady_cursor[name] = editor
            elif (editor := self._steady_cursor.pop(name, None)) is not None:
                editor.cursor_blink = True  # type: ignore[attr-defined]

    def _show_status(self) -> None:
        pane = self.active_pane
        base = self.model_status
        info = StatusInfo(model=base.model, where=base.where, n_ctx=base.n_ctx, phase=base.phase)
        if pane is not None:
            ps = pane.status
            info.context_used = ps.context_used
            info.generated, info.elapsed = ps.generated, ps.elapsed
            info.tokens_per_second = ps.tokens_per_second
            info.reasoning_tokens, info.reasoning_budget = ps.reasoning_tokens, ps.reasoning_budget
            info.omitted_turns = ps.omitted_turns
            info.phase = base.phase or ps.phase
            if ps.n_ctx:
                info.n_ctx = ps.n_ctx
        info.queued = [job.owner for job in self.queue.waiting()]
        with contextlib.suppress(IndexError, NoMatches):  # closing
            self.screen_stack[0].query_one("#status", StatusBar).show(info)

    def on_domain_pane_turn_finished(self, event: DomainPane.TurnFinished) -> None:
        self._mark_busy()
        self._show_status()
        self.save_workspace()

    # -- actions ------------------------------------------------------------------------
    def action_stop(self) -> None:
        pane = self.active_pane
        if pane is not None and not pane.stop():
            pane.show_error("")

    def action_retry(self) -> None:
        pane = self.active_pane
        if pane is not None and not pane.retry() and not pane.busy:
            self.notify("Nothing to retry yet.", timeout=3)

    def action_answer_now(self) -> None:
        pane = self.active_pane
        if not getattr(self.engine, "supports_answer_now", False):
            self.notify("A remote server cannot be told to stop reasoning mid-stream.", timeout=4)
            return
        if pane is not None and not pane.answer_now():
            self.notify("The model is not reasoning right now.", timeout=3)

    def action_toggle_thinking(self) -> None:
        pane = self.active_pane
        if pane is None:
            return
        current = self.params.enable_thinking if pane.thinking is None else pane.thinking
        pane.thinking = not current
        state = "on" if pane.thinking else "off (faster, lower quality)"
        self.notify(f"Thinking {state} for {pane.domain.title}, from the next turn.", timeout=4)

    def _idle_pane(self) -> DomainPane | None:
        pane = self.active_pane
        if pane is not None and pane.busy:
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return None
        return pane

    def action_control(self) -> None:
        from agentworld_tui.ui.screens.perturbation_picker import ControlChoice, PerturbationPicker

        pane = self._idle_pane()
        if pane is None:
            return

        def chosen(choice: ControlChoice | None) -> None:
            if choice is None:
                return
            pane.session.control = choice.control
            pane.show_control()
            self.save_workspace()

        self.push_screen(PerturbationPicker(pane.domain.name, pane.session.control), chosen)

    def action_world(self) -> None:
        from agentworld_tui.ui.screens.world_editor import WorldChoice, WorldEditor

        pane = self._idle_pane()
        if pane is None:
            return

        def chosen(choice: WorldChoice | None) -> None:
            if choice is None:
                return
            pane.session.world = choice.world
            pane.show_control()
            self.save_workspace()

        self.push_screen(WorldEditor(pane.session.world), chosen)

    def action_judge(self) -> None:
        from agentworld_tui.ui.screens.judge_view import JudgeSetup

        pane = self._idle_pane()
        if pane is None:
            return
        turns = [t for t in pane.session.turns if t.observation]
        if not turns:
            self.notify("No turn with an observation to judge yet.", timeout=4)
            return
        turn = turns[-1]
        name = self.engine.info.name if self.engine is not None else ""

        def chosen(request: JudgeRequest | None) -> None:
            if request is not None:
                self._judge(pane, turn, request)

        self.push_screen(JudgeSetup(turn.stats.get("reference", ""), loaded_model=name), chosen)

    def _judge(self, pane: DomainPane, turn: Turn, request: JudgeRequest) -> None:
        from agentworld_tui.engines.judge import run_judge
        from agentworld_tui.world.judge import turn_judge_messages

        messages, problems = turn_judge_messages(pane.session, turn, request.reference)
        for problem in problems:
            self.notify(problem, severity="warning")
        self.notify(f"Judging turn {turn.number}…", timeout=3)

        def done(verdict: object, error: str | None) -> None:
            self._from_engine(self._judged, pane, turn, verdict, error)

        if request.judge is None:
            self.queue.call(
                CallJob(
                    lambda engine: run_judge(engine, messages, reference=request.reference), done
                )
            )
            return
        spec = request.judge

        def judged_elsewhere(_engine: object = None) -> object:
            from agentworld_tui.evaluation.judging import make_judge_engine

            engine = make_judge_engine(spec)
            engine.load()
            try:
                return run_judge(engine, messages, reference=request.reference)
            finally:
                engine.unload()

        if not spec.server:
            # A judge model of its own decodes on the engine thread too, in turn with the
            # tabs' turns: a second decoding thread halves llama.cpp's speed (engines/queue.py).
            self.queue.call(CallJob(judged_elsewhere, done, needs_model=False))
            return

        def on_its_thread() -> None:  # a server: nothing here waits for the tabs' turns
            from agentworld_tui.engines.base import EngineError

            try:
                verdict = judged_elsewhere()
            except EngineError as exc:
                done(None, str(exc))
                return
            done(verdict, None)

        threading.Thread(target=on_its_thread, name="judge", daemon=True).start()

    def _judged(self, pane: DomainPane, turn: Turn, verdict: object, error: str | None) -> None:
        from agentworld_tui.ui.screens.judge_view import JudgeView
        from agentworld_tui.world.judge import Verdict

        if error or not isinstance(verdict, Verdict):
            self.notify(f"The judge failed: {error}", severity="error", timeout=15)
            return
        turn.judgement = verdict.to_dict()
        self.save_workspace()
        if not pane.busy:
            pane.show_session()
        self.push_screen(JudgeView(verdict, title=f"Turn {turn.number}"))

    def action_toggle_reasoning(self) -> None:
        pane = self.active_pane
        if pane is not None:
            pane.toggle_reasoning()

    def action_new_session(self) -> None:
        pane = self.active_pane
        if pane is None:
            return
        if pane.busy:
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return
        from agentworld_tui.world.session import new_session

        session, _ = new_session(pane.domain, pane.session.scenario)
        pane.replace_session(session)

    def action_edit_state(self) -> None:
        from agentworld_tui.ui.screens.state_editor import StateEditor

        pane = self.active_pane
        if pane is None:
            return
        if pane.busy:
            self.notify("Stop the running turn first (Esc).", severity="warning")
            return

        def apply(scenario: Scenario | None) -> None:
            if scenario is None:
                return
            from agentworld_tui.world.session import new_session

            session, problems = new_session(pane.domain, scenario)
            for problem in problems:
                self.notify(problem, severity="warning")
            pane.replace_session(session)

        self.push_screen(
            StateEditor(pane.domain.name, pane.session.scenario, bool(pane.session.turns)), apply
        )

    def action_help(self) -> None:
        from agentworld_tui.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self._key_table()))

    def _key_table(self) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        seen: set[str] = set()
        sources: list[Iterable[Binding | tuple[str, ...]]] = [self.BINDINGS]
        pane = self.active_pane
        if pane is not None:
            for widget in pane.query("*"):
                sources.append(type(widget).BINDINGS)
        for bindings in sources:
            for binding in bindings:
                if not isinstance(binding, Binding) or not binding.description:
                    continue
                key = binding.key.replace("ctrl+", "Ctrl+").replace(",", " / ")
                if key in seen:
                    continue
                seen.add(key)
                rows.append((key, binding.tooltip or binding.description))
        return rows

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.action != "quit":
                action = getattr(self, f"action_{binding.action}")
                yield SystemCommand(binding.description, binding.tooltip or "", action)

    async def action_quit(self) -> None:
        self.queue.close()
        self.exit(0)

    def save_screenshot_to(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(self.save_screenshot(path=str(folder)))
