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
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from rich.text import Text
from textual.app import App
from textual.widget import Widget

from agentworld_tui.world.domain import Domain
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.engines.base import GenerationParams
    from agentworld_tui.reality.observation import RealObservation
    from agentworld_tui.reality.routing import Decision, RuleSet, ToolInfo
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.reality.traces import TraceStore
    from agentworld_tui.reality.twin import TwinRunner
    from agentworld_tui.simulator import Saver, Simulator, TurnRun, TurnUpdate
    from agentworld_tui.simulator.routing import RoutedSession
    from agentworld_tui.simulator.shadow import Shadow
    from agentworld_tui.ui.widgets.reality.twin_view import Mode, TwinView
    from agentworld_tui.world.action import Action

log = logging.getLogger("agentworld.twin")

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
    rules: RuleSet | None = None
    """Routing rules for the calls (None: every call shadowed)."""
    traces: str = ""
    """A trace store's path ("": no grounding), opened when the twin starts."""
    grounding_budget: int | None = None
    """Tokens the real examples may take (None: the default)."""


@dataclass(frozen=True)
class TwinRouting:
    """Routing and grounding given on the command line for the twin started there: the
    rules (None: every call shadowed), the trace store, opened (closed with the twin),
    and the grounding budget (None: the default)."""

    rules: RuleSet | None = None
    store: TraceStore | None = None
    grounding_budget: int | None = None


@dataclass
class LiveTwin:
    """A started twin beside one tab's session."""

    choice: TwinChoice
    shadow: Shadow
    session: Session
    acted: list[Turn] = field(default_factory=list)
    """The turns whose actions the twin carried out, or that its rules kept from it, in
    order (the very objects)."""
    routed: RoutedSession | None = None
    """The session's calls, routed by the twin's rules (without rules every call is
    shadowed) and grounded in its trace store; None only for a twin made by hand."""

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
    store: TraceStore | None = None
    """The trace store that grounds the world model (``choice.traces``, opened); closed
    with the twin."""

    def close(self) -> None:
        """Close the twin and its trace store (blocking)."""
        try:
            self.runner.close()
        finally:
            if self.store is not None:
                self.store.close()


def start_twin(choice: TwinChoice) -> StartedTwin:
    """Open the trace store, start the twin, and read a real MCP server's tool list
    (blocking: call it off the event loop); a TwinStartError of one line says why it did
    not start (nothing is left open then)."""
    from agentworld_tui.reality.spec import TwinStartError

    store = None
    if choice.traces:
        from pathlib import Path

        from agentworld_tui.reality.traces import TraceStoreError, open_store

        try:
            store = open_store(Path(choice.traces).expanduser())
        except TraceStoreError as exc:
            raise TwinStartError(f"the trace store: {exc}") from None
    try:
        runner, first = choice.spec.start()
    except BaseException:
        if store is not None:
            store.close()
        raise
    return with_server_tools(StartedTwin(choice, runner, first, store=store))


def close_started(started: StartedTwin) -> concurrent.futures.Future[None]:
    """Close a started twin that no tab took, and its store, on a thread of its own."""
    return _closing(started.close)


def tool_infos(started: StartedTwin, scenario_tools: object) -> tuple[ToolInfo, ...]:
    """The tools as routing rules see them: the real server's own list with its
    annotations, or (where it could not be read) the tab's scenario tools."""
    from agentworld_tui.reality.routing import ToolInfo

    listed = started.tools if started.tools is not None else scenario_tools
    if not isinstance(listed, list):
        return ()
    infos: list[ToolInfo] = []
    for definition in listed:
        if isinstance(definition, dict):
            try:
                infos.append(ToolInfo.from_definition(definition))
            except ValueError:
                continue
    return tuple(infos)


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


class RunOptions(TypedDict):
    """What every turn a pane starts is run with."""

    params: GenerationParams
    owner: str
    save: Saver


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
        self._routed_run: tuple[TurnRun, Decision | None] | None = None
        """The running turn the rules routed, and their decision, until it is settled."""

    # -- the pane's hooks -----------------------------------------------------------------
    def send(
        self, simulator: Simulator, session: Session, action: Action, options: RunOptions
    ) -> TurnRun:
        """Start the turn of a person's action: where the twin's rules send it (without
        rules: shadowed) while the twin follows the turns shown, grounded in the trace
        store when the world model answers; else simulated. Raises SimulatorError as
        ``Simulator.send`` does."""
        routed = self.agent_routing()
        if routed is None:
            return simulator.send(session, action, **options)
        from agentworld_tui.reality.traces import call_of

        decision = routed.decide(call_of(session.domain.name, action.payload)[0])
        grounding = routed.grounding(action, decision)  # a lookup of a few milliseconds
        run = routed.send(simulator, action, decision, grounding, **options)
        assert self.twin is not None
        self.twin.acted.append(run.turn)
        self._routed_run = (run, decision)
        return run

    def agent_routing(self) -> RoutedSession | None:
        """How a call in the tab goes, the person's or an agent's (the tab served with
        Ctrl+B): by the twin's rules while the twin follows the turns shown; None:
        simulated."""
        twin = self.twin
        if twin is None or twin.routed is None or not self._check_following():
            return None
        return twin.routed

    def turn_started(self, run: TurnRun) -> None:
        """A turn began in the tab (typed, retried, an agent's call, a pending turn)."""
        twin, turn = self.twin, run.turn
        shadowed = routed = False
        if twin is not None:
            from agentworld_tui.simulator.shadow import ShadowRun

            # A new turn of the twin's session in shadow mode: its action goes to the
            # twin now (a retry's turn has its real side already).
            shadowed = isinstance(run, ShadowRun) and turn.reality is None
            routed = any(t is turn for t in twin.acted)
            if not routed and turn.route is not None and run.session is twin.session:
                twin.acted.append(turn)  # an agent's call, routed by the twin's rules
                routed = True
            if shadowed and run.session is twin.session and not routed:
                twin.acted.append(turn)
        if shadowed or routed or turn.reality is not None:
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
        self._settle(turn)
        if self.view is not None and self.view.display:
            self.view.show_turn(turn)

    def _settle(self, turn: Turn) -> None:
        """A routed turn ended: a shadowed call whose reality failed falls back as its rule
        says (the turn records it), and reality's answers go into the trace store."""
        pending, self._routed_run = self._routed_run, None
        twin = self.twin
        if pending is None or pending[0].turn is not turn or twin is None or twin.routed is None:
            return
        run, decision = pending
        routed = twin.routed
        before = turn.route
        why = routed.settle(run, decision)
        if why:
            turn.note = f"reality could not answer: {why}"
        if (turn.route != before or why) and run.save is not None:
            run.save(run.session)
        found = routed.exchanges(run)
        if found:

            def keep() -> None:
                try:
                    routed.keep(found)
                except Exception:  # the store closed meanwhile: the turn stands
                    log.exception("a real answer was not kept in the trace store")

            threading.Thread(target=keep, name="trace-keep", daemon=True).start()

    def turn_line(self, turn: Turn) -> Text | None:
        """The line under a twinned or routed turn in the transcript (None for others)."""
        if turn.reality is None and turn.route is None and turn.grounding is None:
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
        if not twinned and not any(_recorded(t) for t in session.turns):
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
        return next((t for t in reversed(self.pane.session.turns) if _recorded(t)), None)

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
    def twin_with(self, started: StartedTwin, tools: tuple[ToolInfo, ...] = ()) -> Shadow:
        """Put a started twin beside the tab's new session (``session``, made by the caller
        from the twin's first state and already in the tab), its calls routed by the
        choice's rules (read against ``tools``) and grounded in its trace store."""
        from agentworld_tui.simulator.shadow import Shadow

        choice, runner = started.choice, started.runner
        shadow = Shadow(
            runner, choice.deliver, choice.spec, check=choice.check, first=started.first
        )
        session = self.pane.session
        session.twin = shadow.describe()
        backend = sandbox_backend(runner)
        if backend and session.twin.get("backend") == "auto":
            session.twin["backend"] = backend  # what "auto" chose
        from agentworld_tui.reality.grounding import DEFAULT_BUDGET, Grounder
        from agentworld_tui.simulator.routing import Reality

        store = started.store
        reality = Reality(
            runner,
            choice.spec,
            choice.deliver,
            choice.rules,
            tools,
            Grounder(store, budget=choice.grounding_budget or DEFAULT_BUDGET)
            if store is not None
            else None,
            store if store is not None and store.writable else None,
            started.first,
        )
        if choice.rules is not None:
            session.twin["routes"] = choice.rules.source
        routed = reality.open(session)  # without rules: every call shadowed
        self.twin = LiveTwin(choice, shadow, session, routed=routed)
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
        self._routed_run = None
        if why:
            self.pane.app.notify(f"The {self.pane.domain.title} twin was closed: {why}.", timeout=6)
        store = (
            twin.routed.reality.grounder.store
            if twin.routed and twin.routed.reality.grounder
            else None
        )

        def close() -> None:
            try:
                twin.shadow.runner.close()
            finally:
                if store is not None:
                    store.close()

        return _closing(close)

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


def _recorded(turn: Turn) -> bool:
    """Whether a turn has a record of reality to show: a twin's answer, or a route."""
    return turn.reality is not None or turn.route is not None


def close_runner(runner: TwinRunner) -> concurrent.futures.Future[None]:
    """Close a twin on a thread of its own; the future says when it is gone."""
    return _closing(runner.close)


def _closing(close: Callable[[], None]) -> concurrent.futures.Future[None]:
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def run() -> None:
        try:
            close()
        finally:
            done.set_result(None)

    threading.Thread(target=run, name="twin-close", daemon=True).start()
    return done
