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

import concurrent.futures
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from rich.text import Text
from textual.app import App
from textual.widget import Widget

from agentworld_tui.world.domain import Domain
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.reality.observation import RealObservation
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.reality.twin import TwinRunner
    from agentworld_tui.simulator import TurnRun, TurnUpdate
    from agentworld_tui.simulator.shadow import Shadow
    from agentworld_tui.ui.widgets.reality.twin_view import Mode, TwinView

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


class ShadowOption(TypedDict, total=False):
    """``Simulator.send``'s shadow, while the twin follows the turns shown."""

    shadow: Shadow


class RealityPane(Protocol):
    """What a tab's reality uses of its pane (``DomainPane``, which imports this module)."""

    @property
    def session(self) -> Session: ...

    @property
    def domain(self) -> Domain: ...

    @property
    def app(self) -> App[Any]: ...

    @property
    def screen_view(self) -> Widget:
        """The simulated screen (the twin view goes under it)."""
        ...

    def query_one(self, selector: str) -> Widget: ...


class TabReality:
    """What one tab knows of reality: its live twin (if any) and the view of each twinned
    turn. The pane calls the hooks below; each is cheap when the tab has no twin."""

    def __init__(self, pane: RealityPane) -> None:
        self.pane = pane
        self.twin: LiveTwin | None = None
        self.view: TwinView | None = None
        self.mode: Mode = "sides"
        self._following = True

    # -- the pane's hooks -----------------------------------------------------------------
    def send_options(self) -> ShadowOption:
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
