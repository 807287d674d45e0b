"""What the main screen's keys do to the tab on show: its turns, its history, what steers
it. Each function takes the app; nothing here runs a turn itself (the pane asks the
simulator), and nothing a user did is erased: a replaced history is archived first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.world import session as world_session
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import HistoryError, Session
from agentworld_tui.world.workspace import WorkspaceError

if TYPE_CHECKING:
    from agentworld_tui.ui.app import AgentWorldApp

BUSY = "Stop the running turn first (Esc)."


def idle_pane(app: AgentWorldApp, *, agents_too: bool = False) -> DomainPane | None:
    """The tab on show, when no turn of it runs (else it says so and gives None); with
    ``agents_too``, also while an agent's call runs in it (what is set applies to its
    coming calls)."""
    pane = app.active_pane
    if agents_too and pane is not None and pane.agent is not None and pane.agent.driving:
        return pane
    if pane is not None and pane.busy:
        app.notify(BUSY, severity="warning")
        return None
    return pane


def replace_session(app: AgentWorldApp, pane: DomainPane, session: Session) -> bool:
    """Give ``pane`` a new session; the one it had is kept as a saved session first."""
    try:
        said = app.files.replace(pane.session, session)
    except WorkspaceError as exc:
        app.notify(f"{exc}. The tab was left as it was.", severity="error", timeout=15)
        return False
    pane.replace_session(session)
    app.save_session()
    if said:
        app.notify(said, timeout=8)
    return True


# -- one turn -------------------------------------------------------------------------------
def retry(app: AgentWorldApp) -> None:
    pane = app.active_pane
    if pane is not None and not pane.retry() and not pane.busy:
        app.notify("Nothing to retry yet.", timeout=3)


def answer_now(app: AgentWorldApp) -> None:
    pane = app.active_pane
    if not getattr(app.engine, "supports_answer_now", False):
        app.notify(
            "A remote server cannot be told to stop reasoning mid-stream; Esc stops the turn, "
            "or set a reasoning budget (--reasoning-budget).",
            timeout=6,
        )
        return
    if pane is not None and not pane.answer_now():
        app.notify("The model is not reasoning right now.", timeout=3)


def raw_output(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.raw_output import RawOutputScreen

    pane = app.active_pane
    turns = [t for t in pane.session.turns if t.raw or t.reasoning or t.observation] if pane else []
    if not turns:
        app.notify("No turn with an output yet.", timeout=3)
        return
    app.push_screen(RawOutputScreen(turns[-1]))


def toggle_thinking(app: AgentWorldApp) -> None:
    pane = app.active_pane
    if pane is None:
        return
    current = app.simulator.params.enable_thinking if pane.thinking is None else pane.thinking
    pane.thinking = not current
    state = "on" if pane.thinking else "off (faster, lower quality)"
    app.notify(f"Thinking {state} for {pane.domain.title}, from the next turn.", timeout=4)


# -- the tab's history ------------------------------------------------------------------------
def new_session(app: AgentWorldApp) -> None:
    pane = idle_pane(app)
    if pane is None:
        return
    if not pane.session.turns:
        app.notify("This tab has no turns yet.", timeout=3)
        return
    session, problems = world_session.new_session(pane.domain, pane.session.scenario)
    for problem in problems:
        app.notify(problem, severity="warning")
    replace_session(app, pane, session)


def edit_state(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.state_editor import StateEditor

    pane = idle_pane(app)
    if pane is None:
        return

    def apply(scenario: Scenario | None) -> None:
        if scenario is None:
            return
        session, problems = world_session.new_session(pane.domain, scenario)
        for problem in problems:
            app.notify(problem, severity="warning")
        replace_session(app, pane, session)

    app.push_screen(
        StateEditor(pane.domain.name, pane.session.scenario, bool(pane.session.turns)), apply
    )


def undo(app: AgentWorldApp) -> None:
    pane = idle_pane(app)
    if pane is None:
        return
    try:
        turn = pane.session.undo()
    except HistoryError as exc:
        app.notify(str(exc), timeout=3)
        return
    if turn is None:
        app.notify("Nothing to undo.", timeout=3)
        return
    pane.show_session()
    app.save_session()
    kept = pane.session.branch.parent
    app.notify(
        f"Turn {turn.number} undone; it stays on branch {kept} (Shift+F6 brings it back).",
        timeout=6,
    )


def redo(app: AgentWorldApp) -> None:
    pane = idle_pane(app)
    if pane is None:
        return
    try:
        turn = pane.session.redo()
    except HistoryError as exc:
        app.notify(str(exc), timeout=3)
        return
    pane.show_session()
    app.save_session()
    app.notify(f"Turn {turn.number} is back.", timeout=4)


def branches(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.branches import BranchesScreen, HistoryEdit

    pane = idle_pane(app)
    if pane is None:
        return
    if not pane.session.turns:
        app.notify("No turns in this tab yet.", timeout=3)
        return

    def changed() -> None:
        pane.show_session()
        app.save_session()

    def run(edit: HistoryEdit | None) -> None:
        problem = app.turn_problem()
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
            app.notify(str(exc), severity="warning")
            return
        pane.run_pending(turn)

    app.push_screen(BranchesScreen(pane.session, changed), run)


def sessions(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.sessions import SessionBrowser

    if app.simulator.any_busy():
        app.notify(BUSY, severity="warning")
        return

    def opened(path: Path | None) -> None:
        if path is None:
            return
        try:
            app.start_up.apply(app.library.open(path))
        except WorkspaceError as exc:
            app.notify(str(exc), severity="error", timeout=15)

    app.push_screen(SessionBrowser(app.library, on_renamed=app.files.renamed), opened)


def replay(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.replay import ReplayScreen, TrajectoryChoice, TrajectoryPicker
    from agentworld_tui.world.trajectories import trajectory_session

    def chosen(choice: TrajectoryChoice | None) -> None:
        if choice is None:
            return
        if choice.mode == "replay":
            app.push_screen(
                ReplayScreen(choice.trajectory, app.simulator), lambda s: load_history(app, s)
            )
        else:
            domain = DOMAINS[choice.trajectory.domain]
            load_history(app, trajectory_session(choice.trajectory, domain, choice.upto))

    app.push_screen(TrajectoryPicker(), chosen)


def load_history(app: AgentWorldApp, session: Session | None) -> None:
    """Put recorded turns into their domain's tab, to carry on from them; the tab's own
    turns are kept as a saved session."""
    if session is None:
        return
    pane = app.pane_for(session.domain.name)
    if pane is None:
        app.notify(f"There is no {session.domain.title} tab.", severity="error")
        return
    if pane.busy:
        app.notify("Stop the tab's running turn first (Esc).", severity="warning")
        return
    if replace_session(app, pane, session):
        app.show_tab(pane.domain.name)
        app.notify(
            f"{len(session.turns)} recorded turns loaded into {pane.domain.title}.", timeout=5
        )


# -- what steers the next turns ------------------------------------------------------------
def control(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.perturbation_picker import ControlChoice, PerturbationPicker

    pane = idle_pane(app, agents_too=True)
    if pane is None:
        return

    def chosen(choice: ControlChoice | None) -> None:
        if choice is not None:
            pane.session.control = choice.control
            pane.show_control()
            app.save_session()

    app.push_screen(PerturbationPicker(pane.domain.name, pane.session.control), chosen)


def world(app: AgentWorldApp) -> None:
    from agentworld_tui.ui.screens.world_editor import WorldChoice, WorldEditor

    pane = idle_pane(app, agents_too=True)
    if pane is None:
        return

    def chosen(choice: WorldChoice | None) -> None:
        if choice is not None:
            pane.session.world = choice.world
            pane.show_control()
            app.save_session()

    app.push_screen(WorldEditor(pane.session.world), chosen)


# -- the app --------------------------------------------------------------------------------
def screenshot(app: AgentWorldApp) -> None:
    """Save the screen as SVG in the screenshots folder and say where."""
    import time

    from agentworld_tui.config import data_dir
    from agentworld_tui.world.store import write_atomic

    configured = app.settings.ui.screenshots_dir
    folder = Path(configured).expanduser() if configured else data_dir() / "screenshots"
    path = folder / time.strftime("agentworld-%Y%m%d-%H%M%S.svg")
    counter = 1
    while path.exists():
        counter += 1
        path = path.with_name(time.strftime(f"agentworld-%Y%m%d-%H%M%S-{counter}.svg"))
    try:
        write_atomic(path, app.export_screenshot().encode("utf-8"))
    except OSError as exc:
        app.notify(f"Screenshot not saved: {exc.strerror or exc}", severity="error")
        return
    app.notify(f"Screenshot saved to {path}", title="Screenshot", timeout=8)


def quit(app: AgentWorldApp) -> None:
    """Quit; turns that could not be saved are saved once more, and if that fails too the
    user is asked before they are lost."""
    if any(p.session.turns for p in app.panes()) and app.save_session() is not None:
        from agentworld_tui.ui.screens.sessions import ConfirmScreen

        def answer(yes: bool | None) -> None:
            if yes:
                app.simulator.close()
                app.files.close()
                app.exit(0)

        app.push_screen(
            ConfirmScreen(
                "The session could not be saved (see the message). Quit anyway and lose "
                "the turns since the last save?",
                yes="Quit anyway",
                no="Stay",
            ),
            answer,
        )
        return
    app.simulator.close()
    app.files.close()
    app.exit(0)
