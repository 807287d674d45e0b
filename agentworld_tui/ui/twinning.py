"""A tab's real twin in the app: starting it (from the dialog or the command line), sending
each turn through the simulator's shadow path while it lives, showing reality beside the
prediction, and tearing it down.

Reality cannot be undone. The twin follows one line of turns, the one its actions made;
when the tab shows another (an undo, an edited or regenerated turn, another branch, an
agent's call it did not see), its turns run in simulation only and the tab says so; going
back to the turns the twin followed (redo, the branches screen) twins them again. A new
session in the tab (Ctrl+N, Ctrl+E, a session opened, a recorded trajectory loaded), taking
the twin away in the dialog, or quitting closes the twin and removes its sandbox.

Nothing of ``reality`` is imported until a tab is twinned or shows a twinned session: the
app's first frame does not wait for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rich.text import Text

from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.reality.observation import RealObservation
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.reality.twin import TwinRunner
    from agentworld_tui.simulator import TurnRun, TurnUpdate
    from agentworld_tui.simulator.shadow import Shadow
    from agentworld_tui.ui.app import AgentWorldApp
    from agentworld_tui.ui.panes.base import DomainPane
    from agentworld_tui.ui.widgets.reality.twin_view import Mode, TwinView
    from agentworld_tui.world.domain import Scenario

TWIN_VIEW = "twin-view"
NOT_FOLLOWED = (
    "Reality cannot be undone: the twin stays where {where}. The turns shown now run in "
    "simulation only; redo (Shift+F6) or the branch the twin followed (F7) twins them again, "
    "Shift+F9 starts a fresh twin."
)
FOLLOWED_AGAIN = "Back on the turns the twin followed: the next turns go to reality too."


@dataclass(frozen=True)
class TwinChoice:
    """A twin asked for, in the dialog or on the command line: what to start, the side the
    agent receives, the task's check."""

    spec: TwinSpec
    deliver: Deliver = "real"
    check: str = ""


@dataclass
class LiveTwin:
    """A started twin beside one tab's session."""

    choice: TwinChoice
    shadow: Shadow
    session: Session
    acted: list[Turn] = field(default_factory=list)
    """The turns whose actions the twin carried out, in order (the very objects)."""

    def follows(self, session: Session) -> bool:
        """Whether ``session`` shows the turns the twin acted on, and no other after them:
        then the next action continues the twin's own history."""
        if session is not self.session or len(session.turns) != len(self.acted):
            return False
        return all(a is b for a, b in zip(session.turns, self.acted, strict=True))

    def describe(self) -> str:
        """One line: what the twin is (sanitized where it is shown)."""
        return describe_spec(self.choice.spec, sandbox_backend(self.shadow.runner))


def sandbox_backend(runner: TwinRunner) -> str:
    """The sandbox a started terminal or SWE twin runs in ("" for others): what "auto"
    became."""
    backend = getattr(getattr(runner.twin, "sandbox", None), "backend", "")
    return backend if isinstance(backend, str) else ""


def describe_spec(spec: TwinSpec, backend: str = "") -> str:
    found = spec.describe()
    if backend:
        found["backend"] = backend
    if spec.domain == "mcp":
        where = found.get("url") or " ".join(found.get("command") or [])
        return f"the real MCP server {where}"
    seed = found.get("seed") or "an empty folder"
    net = "with the network" if found.get("network") else "no network"
    if spec.on_host:
        return f"a shell ON THIS MACHINE, unsandboxed, in a copy of {seed}"
    return f"a {found.get('backend')} sandbox holding a copy of {seed} at {found.get('workdir')}, {net}"


@dataclass(frozen=True)
class StartedTwin:
    """A twin that started, ready to be put beside a tab."""

    choice: TwinChoice
    runner: TwinRunner
    first: RealObservation
    """Its first state (a terminal's screen; empty for others)."""
    tools: list[dict[str, Any]] | None = None
    """An MCP server's own tool list (None: not read)."""
    tools_problem: str = ""
    """Why the server's tool list could not be read."""


def start_twin(choice: TwinChoice) -> StartedTwin:
    """Start the twin, and read a real MCP server's tool list (blocking: call it off the
    event loop); a TwinStartError of one line says why it did not start."""
    runner, first = choice.spec.start()
    return with_server_tools(StartedTwin(choice, runner, first))


def with_server_tools(started: StartedTwin) -> StartedTwin:
    """An MCP twin's tools, listed by the server itself, so that the tab calls the tools
    reality has (blocking). No tool is called; a server that cannot list them keeps the
    tab's own list, and the reason is kept to be said."""
    spec = started.choice.spec
    if spec.domain != "mcp":
        return started
    from agentworld_tui.agents.mcp.capture import CaptureError, capture_blocking

    try:
        captured = capture_blocking(command=list(spec.command) or None, url=spec.url)
    except CaptureError as exc:
        return replace(started, tools_problem=str(exc))
    return replace(started, tools=captured.tools)


class TabReality:
    """What one tab knows of reality: its live twin (if any) and the view of each twinned
    turn. The pane calls the hooks below; each is cheap when the tab has no twin."""

    def __init__(self, pane: DomainPane) -> None:
        self.pane = pane
        self.twin: LiveTwin | None = None
        self.view: TwinView | None = None
        self.mode: Mode = "sides"
        self._following = True

    # -- the pane's hooks -----------------------------------------------------------------
    def send_options(self) -> dict[str, Any]:
        """``simulator.send``'s options for the next action: the shadow while the twin
        follows the turns shown."""
        twin = self.twin
        if twin is None or not self._check_following():
            return {}
        return {"shadow": twin.shadow}

    def turn_started(self, run: TurnRun) -> None:
        """A turn began in the tab (typed, retried, an agent's call, a pending turn)."""
        twin, turn = self.twin, run.turn
        shadowed = False
        if twin is not None:
            from agentworld_tui.simulator.shadow import ShadowRun

            # A new turn of the twin's session in shadow mode: its action goes to the
            # twin now (a retry's turn has its real side already).
            shadowed = isinstance(run, ShadowRun) and turn.reality is None
            if shadowed and run.session is twin.session:
                twin.acted.append(turn)
        if shadowed or turn.reality is not None:
            view = self.ensure_view()
            view.show_running(turn)
            real = getattr(run, "real", None)
            if real is not None:  # a retry: reality answered once already
                view.show_real(real.text, real.status.value, real.error)

    def drawn(self, update: TurnUpdate) -> None:
        """One frame of the running turn: reality's answer, when it came in it."""
        real = update.real
        if real is not None and self.view is not None:
            self.view.show_real(real.text, real.status.value, real.error)

    def turn_finished(self, turn: Turn) -> None:
        if self.view is not None and self.view.display:
            self.view.show_turn(turn)

    def turn_line(self, turn: Turn) -> Text | None:
        """The line under a twinned turn in the transcript (None for other turns)."""
        if turn.reality is None:
            return None
        from agentworld_tui.ui.widgets.reality.record import RealityRecord

        record = RealityRecord.of(turn)
        return record.line() if record is not None else None

    def session_shown(self) -> None:
        """The whole session is drawn again (start, load, undo, redo, branch switch)."""
        if self.twin is not None:
            self._check_following()
        session = self.pane.session
        twinned = self.twin is not None or session.twin is not None
        if not twinned and not any(t.reality is not None for t in session.turns):
            if self.view is not None:
                self.view.display = False
            return
        view = self.ensure_view()
        view.display = True
        view.show_turn(self.last_twinned())

    def session_replaced(self) -> None:
        """The tab got another session: a twin beside the old one is closed."""
        if self.twin is not None:
            self.untwin("the tab started afresh")

    # -- the view -------------------------------------------------------------------------
    def ensure_view(self) -> TwinView:
        """The twin view under the transcript, mounted the first time it is needed."""
        if self.view is None:
            from agentworld_tui.ui.widgets.reality.twin_view import TwinView

            self.view = TwinView(mode=self.mode, id=TWIN_VIEW)
            main = self.pane.query_one("#main")
            main.mount(self.view, after=self.pane.screen_view)
        self.view.display = True
        return self.view

    def last_twinned(self) -> Turn | None:
        return next((t for t in reversed(self.pane.session.turns) if t.reality is not None), None)

    def toggle_mode(self) -> Mode | None:
        """Side by side or diff; None when the tab shows no twinned turn."""
        if self.view is None or not self.view.display:
            return None
        self.mode = self.view.toggle()
        return self.mode

    def show_turn(self, number: int) -> None:
        turns = self.pane.session.turns
        if 1 <= number <= len(turns):
            self.ensure_view().show_turn(turns[number - 1])

    # -- the twin's life --------------------------------------------------------------------
    def twin_with(self, choice: TwinChoice, runner: TwinRunner, first: RealObservation) -> Shadow:
        """Put a started twin beside the tab's new session (``session``, made by the caller
        from the twin's first state and already in the tab)."""
        from agentworld_tui.simulator.shadow import Shadow

        shadow = Shadow(runner, choice.deliver, choice.spec, check=choice.check, first=first)
        session = self.pane.session
        session.twin = shadow.describe()
        backend = sandbox_backend(runner)
        if backend and session.twin.get("backend") == "auto":
            session.twin["backend"] = backend  # what "auto" chose
        self.twin = LiveTwin(choice, shadow, session)
        self._following = True
        self.session_shown()
        return shadow

    def untwin(self, why: str = "") -> concurrent.futures.Future[None] | None:
        """Close the twin (on a thread: closing a sandbox takes a moment); the session keeps
        every turn's record. Returns the closing, for those who must wait for it."""
        twin = self.twin
        if twin is None:
            return None
        self.twin = None
        if why:
            self.pane.app.notify(f"The {self.pane.domain.title} twin was closed: {why}.", timeout=6)
        return close_runner(twin.shadow.runner)

    def _check_following(self) -> bool:
        """Whether the twin follows the turns shown; says so when that changes."""
        twin = self.twin
        assert twin is not None
        following = twin.follows(self.pane.session)
        if following != self._following:
            self._following = following
            if following:
                self.pane.app.notify(FOLLOWED_AGAIN, timeout=6)
            else:
                last = twin.acted[-1].number if twin.acted else 0
                where = f"turn {last} left it" if last else "it started"
                self.pane.app.notify(
                    NOT_FOLLOWED.format(where=where), severity="warning", timeout=12
                )
        return following

    @property
    def following(self) -> bool:
        return self.twin is not None and self.twin.follows(self.pane.session)


def close_runner(runner: TwinRunner) -> concurrent.futures.Future[None]:
    """Close a twin on a thread of its own; the future says when it is gone."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def close() -> None:
        try:
            runner.close()
        finally:
            done.set_result(None)

    threading.Thread(target=close, name="twin-close", daemon=True).start()
    return done


# -- what the keys do ---------------------------------------------------------------------------
def open_dialog(app: AgentWorldApp, pane: DomainPane) -> None:
    """Shift+F9: the twin dialog for the tab on show."""
    from agentworld_tui.ui.screens.twin import TwinDialog, TwinDialogResult

    reality = pane.reality
    current = reality.twin.describe() if reality.twin is not None else ""

    def chosen(result: TwinDialogResult | None) -> None:
        if result is None:
            return
        if result.started is None:
            reality.untwin()
            app.notify(f"The {pane.domain.title} tab is no longer twinned.", timeout=5)
            return
        if pane.busy:
            close_runner(result.started.runner)
            app.notify("The tab was busy: the twin was not attached.", severity="warning")
            return
        attach(app, pane, result.started)

    app.push_screen(TwinDialog(pane.domain.name, pane.domain.title, current=current), chosen)


def attach(app: AgentWorldApp, pane: DomainPane, started: StartedTwin) -> bool:
    """Twin ``pane`` with a started twin: the tab starts afresh (its turns are kept as a
    saved session), from the twin's first state where it has one (a terminal's screen) and
    with a real server's own tools, so that both sides start alike. False (the twin
    closed) when the tab could not."""
    from agentworld_tui.world.session import new_session

    choice, runner = started.choice, started.runner
    pane.reality.untwin()
    scenario = twin_scenario(app, pane.session.scenario, started)
    session, problems = new_session(pane.domain, scenario)
    for problem in problems:
        app.notify(problem, severity="warning")
    if not app.tab_actions.replace_session(pane, session):
        close_runner(runner)
        return False
    pane.reality.twin_with(choice, runner, started.first)
    app.save_session()
    side = "reality's answer" if choice.deliver == "real" else "the world model's prediction"
    app.notify(
        f"Twinned with {describe_spec(choice.spec, sandbox_backend(runner))}. Each action "
        f"goes to both; the agent receives {side}.",
        title=pane.domain.title,
        timeout=8,
    )
    return True


def twin_scenario(app: AgentWorldApp, scenario: Scenario, started: StartedTwin) -> Scenario:
    """What a twinned tab starts from: the twin's own first state (a terminal's screen; a
    sandbox's folder holds what the user seeded, not a shipped scenario's repository), or,
    for MCP, the real server's tools (the tab's own where the server cannot list them)."""
    from agentworld_tui.world.domain import Scenario

    spec = started.choice.spec
    title = f"Twin: {describe_spec(spec, sandbox_backend(started.runner))}"
    if spec.domain != "mcp":
        workdir = spec.describe().get("workdir", "")
        about = (
            f"The repository at {workdir}, as the twin holds it." if spec.domain == "swe" else ""
        )
        return Scenario("twin", title, about, state=started.first.text)
    if started.tools is None:
        if started.tools_problem:
            app.notify(
                f"{started.tools_problem}: the tab keeps its own tool list.",
                severity="warning",
                timeout=10,
            )
        return replace(scenario, title=title)
    from agentworld_tui.domains.tool_call import ToolListError, tools_from_data, with_tools

    try:
        tools = tools_from_data(started.tools)
    except ToolListError as exc:
        app.notify(
            f"The server's tool list is unusable ({exc}): the tab keeps its own.",
            severity="warning",
            timeout=10,
        )
        return replace(scenario, title=title)
    return with_tools(Scenario("twin", title, "The tools the real server lists."), tools)


async def attach_shadow(app: AgentWorldApp, domain: str, shadow: Shadow) -> bool:
    """Put a twin started on the command line (``--twin`` and its flags) beside its tab,
    and show that tab."""
    pane = app.pane_for(domain)
    if pane is None or shadow.spec is None or shadow.first is None:
        close_runner(shadow.runner)
        return False
    choice = TwinChoice(shadow.spec, deliver=shadow.deliver, check=shadow.check)
    started = StartedTwin(choice, shadow.runner, shadow.first)
    started = await asyncio.to_thread(with_server_tools, started)
    if not attach(app, pane, started):
        return False
    app.show_tab(domain)
    return True


def toggle_view(app: AgentWorldApp, pane: DomainPane) -> None:
    """Shift+F10: prediction and reality side by side, or their diff."""
    mode = pane.reality.toggle_mode()
    if mode is None:
        app.notify(
            f"The {pane.domain.title} tab shows no twinned turn (Shift+F9 twins it).", timeout=4
        )


def summary(app: AgentWorldApp, pane: DomainPane) -> None:
    """Shift+F11: the session's figures beside reality, and the task's check."""
    from agentworld_tui.ui.screens.twin_summary import TwinSummary

    session = pane.session
    if session.twin is None and not any(t.reality is not None for t in session.turns):
        app.notify(f"The {pane.domain.title} tab is not twinned (Shift+F9 twins it).", timeout=4)
        return
    twin = pane.reality.twin
    shadow = twin.shadow if twin is not None and twin.session is session else None

    def picked(number: int | None) -> None:
        if number is not None:
            pane.reality.show_turn(number)

    app.push_screen(TwinSummary(session, shadow, save=app.save_session), picked)


async def close_all(app: AgentWorldApp) -> None:
    """Close every tab's twin and wait for them (quitting)."""
    closing = [f for p in app.panes() if (f := p.reality.untwin()) is not None]
    if app.start_twin is not None:  # the app closed before its tabs were built
        closing.append(close_runner(app.start_twin[1].runner))
        app.start_twin = None
    for future in closing:
        await asyncio.wrap_future(future)
