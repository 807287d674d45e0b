"""What the main screen's keys do to the tab on show: its turns, its history, what steers
it. Nothing here runs a turn itself (the pane asks the simulator), and nothing a user did
is erased: a replaced history is archived first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentworld_tui.domains import DOMAINS
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.workspace import OpenWorkspace
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.world import session as world_session
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import HistoryError, Session
from agentworld_tui.world.workspace import Workspace, WorkspaceError

BUSY = "Stop the running turn first (Esc)."


class TabActionsHost(TabsAndDialogs, Protocol):
    """What the tab's keys need of the app."""

    @property
    def simulator(self) -> Simulator: ...

    @property
    def files(self) -> OpenWorkspace:
        """The open session file."""
        ...

    def save_session(self, session: Session | None = None) -> str | None:
        """Save every tab; returns why it could not (already said), or None."""
        ...

    def turn_problem(self) -> str:
        """Why no turn can start now ("" when one can)."""
        ...


def idle_pane(host: TabsAndDialogs, *, agents_too: bool = False) -> DomainPane | None:
    """The tab on show, when no turn of it runs (else it says so and gives None); with
    ``agents_too``, also while an agent's call runs in it (what is set applies to its
    coming calls)."""
    pane = host.active_pane
    if agents_too and pane is not None and pane.agent is not None and pane.agent.driving:
        return pane
    if pane is not None and pane.busy:
        host.notify(BUSY, severity="warning")
        return None
    return pane


class TabActions:
    """The keys of the tab on show (``keys.py`` has the table, ``app.py`` an ``action_``
    method for each that calls the one of the same name here)."""

    def __init__(self, host: TabActionsHost, show_workspace: Callable[[Workspace], None]) -> None:
        self.host = host
        self.show_workspace = show_workspace
        """Show an opened session file in the tabs (``StartUp.apply``)."""

    def replace_session(self, pane: DomainPane, session: Session) -> bool:
        """Give ``pane`` a new session; the one it had is kept as a saved session first."""
        host = self.host
        try:
            said = host.files.replace(pane.session, session)
        except WorkspaceError as exc:
            host.notify(f"{exc}. The tab was left as it was.", severity="error", timeout=15)
            return False
        pane.replace_session(session)
        host.save_session()
        if said:
            host.notify(said, timeout=8)
        return True

    # -- one turn ----------------------------------------------------------------------
    def retry(self) -> None:
        host = self.host
        pane = host.active_pane
        if pane is None or pane.retry() or pane.busy:
            return
        if not pane.session.turns:  # otherwise the pane shows why it could not
            host.notify("Nothing to retry yet.", timeout=3)

    def answer_now(self) -> None:
        host = self.host
        pane = host.active_pane
        if not getattr(host.simulator.engine, "supports_answer_now", False):
            host.notify(
                "A remote server cannot be told to stop reasoning mid-stream; Esc stops the turn, "
                "or set a reasoning budget (--reasoning-budget).",
                timeout=6,
            )
            return
        if pane is not None and not pane.answer_now():
            host.notify("The model is not reasoning right now.", timeout=3)

    def raw_output(self) -> None:
        from agentworld_tui.ui.screens.raw_output import RawOutputScreen

        host = self.host
        pane = host.active_pane
        turns = (
            [t for t in pane.session.turns if t.raw or t.reasoning or t.observation] if pane else []
        )
        if not turns:
            host.notify("No turn with an output yet.", timeout=3)
            return
        host.push_screen(RawOutputScreen(turns[-1]))

    def toggle_thinking(self) -> None:
        host = self.host
        pane = host.active_pane
        if pane is None:
            return
        current = host.simulator.params.enable_thinking if pane.thinking is None else pane.thinking
        pane.thinking = not current
        state = "on" if pane.thinking else "off (faster, lower quality)"
        host.notify(f"Thinking {state} for {pane.domain.title}, from the next turn.", timeout=4)

    # -- the tab's history -------------------------------------------------------------
    def new_session(self) -> None:
        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        if not pane.session.turns:
            host.notify("This tab has no turns yet.", timeout=3)
            return
        session, problems = world_session.new_session(pane.domain, pane.session.scenario)
        for problem in problems:
            host.notify(problem, severity="warning")
        self.replace_session(pane, session)

    def edit_state(self) -> None:
        from agentworld_tui.ui.screens.state_editor import StateEditor

        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return

        def apply(scenario: Scenario | None) -> None:
            if scenario is None:
                return
            session, problems = world_session.new_session(pane.domain, scenario)
            for problem in problems:
                host.notify(problem, severity="warning")
            self.replace_session(pane, session)

        host.push_screen(
            StateEditor(pane.domain.name, pane.session.scenario, bool(pane.session.turns)), apply
        )

    def undo(self) -> None:
        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        try:
            turn = pane.session.undo()
        except HistoryError as exc:
            host.notify(str(exc), timeout=3)
            return
        if turn is None:
            host.notify("Nothing to undo.", timeout=3)
            return
        pane.show_session()
        host.save_session()
        kept = pane.session.branch.parent
        host.notify(
            f"Turn {turn.number} undone; it stays on branch {kept} (Shift+F6 brings it back).",
            timeout=6,
        )

    def redo(self) -> None:
        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        try:
            turn = pane.session.redo()
        except HistoryError as exc:
            host.notify(str(exc), timeout=3)
            return
        pane.show_session()
        host.save_session()
        host.notify(f"Turn {turn.number} is back.", timeout=4)

    def branches(self) -> None:
        from agentworld_tui.ui.screens.branches import BranchesScreen, HistoryEdit

        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        if not pane.session.turns:
            host.notify("No turns in this tab yet.", timeout=3)
            return

        def changed() -> None:
            pane.show_session()
            host.save_session()

        def run(edit: HistoryEdit | None) -> None:
            problem = host.turn_problem()
            if edit is None:
                return
            if problem:
                pane.show_error(problem)
                return
            session = pane.session
            try:
                if edit.action is None:
                    turn = session.regenerate(edit.number)
                else:
                    turn = session.fork(edit.number, edit.action)
            except HistoryError as exc:
                host.notify(str(exc), severity="warning")
                return
            pane.run_pending(turn)

        host.push_screen(BranchesScreen(pane.session, changed), run)

    def sessions(self) -> None:
        from agentworld_tui.ui.screens.sessions import SessionBrowser

        host = self.host
        if host.simulator.any_busy():
            host.notify(BUSY, severity="warning")
            return

        def opened(path: Path | None) -> None:
            if path is None:
                return
            try:
                self.show_workspace(host.files.library.open(path))
            except WorkspaceError as exc:
                host.notify(str(exc), severity="error", timeout=15)

        host.push_screen(SessionBrowser(host.files.library, on_renamed=host.files.renamed), opened)

    def replay(self) -> None:
        from agentworld_tui.ui.screens.replay import (
            ReplayScreen,
            TrajectoryChoice,
            TrajectoryPicker,
        )
        from agentworld_tui.world.trajectories import trajectory_session

        host = self.host

        def chosen(choice: TrajectoryChoice | None) -> None:
            if choice is None:
                return
            if choice.mode == "replay":
                host.push_screen(ReplayScreen(choice.trajectory, host.simulator), self.load_history)
            else:
                domain = DOMAINS[choice.trajectory.domain]
                self.load_history(trajectory_session(choice.trajectory, domain, choice.upto))

        host.push_screen(TrajectoryPicker(), chosen)

    def load_history(self, session: Session | None) -> None:
        """Put recorded turns into their domain's tab, to carry on from them; the tab's own
        turns are kept as a saved session."""
        host = self.host
        if session is None:
            return
        pane = host.pane_for(session.domain.name)
        if pane is None:
            host.notify(f"There is no {session.domain.title} tab.", severity="error")
            return
        if pane.busy:
            host.notify("Stop the tab's running turn first (Esc).", severity="warning")
            return
        if self.replace_session(pane, session):
            host.show_tab(pane.domain.name)
            host.notify(
                f"{len(session.turns)} recorded turns loaded into {pane.domain.title}.", timeout=5
            )

    # -- what steers the next turns ----------------------------------------------------
    def control(self) -> None:
        from agentworld_tui.ui.screens.perturbation_picker import ControlChoice, PerturbationPicker

        host = self.host
        pane = idle_pane(host, agents_too=True)
        if pane is None:
            return

        def chosen(choice: ControlChoice | None) -> None:
            if choice is not None:
                pane.session.control = choice.control
                pane.show_control()
                host.save_session()

        host.push_screen(PerturbationPicker(pane.domain.name, pane.session.control), chosen)

    def world(self) -> None:
        from agentworld_tui.ui.screens.world_editor import WorldChoice, WorldEditor

        host = self.host
        pane = idle_pane(host, agents_too=True)
        if pane is None:
            return

        def chosen(choice: WorldChoice | None) -> None:
            if choice is not None:
                pane.session.world = choice.world
                pane.show_control()
                host.save_session()

        host.push_screen(WorldEditor(pane.session.world), chosen)
