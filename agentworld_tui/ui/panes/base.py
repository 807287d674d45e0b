"""What every domain's tab shares: its session, the streaming view, stop, retry.

A pane turns a validated Action into a turn through the simulator service, then draws the
turn's updates as a ``FramePacer`` hands them over (one per frame, never one redraw per
token). Subclasses decide how the action is edited and how an observation is shown.
"""

from __future__ import annotations

import time
from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from agentworld_tui.engines.base import Finished, GenerationParams
from agentworld_tui.simulator import Simulator, SimulatorError, TurnRun, TurnUpdate
from agentworld_tui.ui.frames import FramePacer
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.textual_private import closing
from agentworld_tui.ui.twinning import RunOptions, TabReality
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.ui.widgets.reasoning_panel import ReasoningPanel
from agentworld_tui.ui.widgets.status_bar import StatusInfo
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.sanitize import StreamSanitizer, one_line, sanitize
from agentworld_tui.world.session import Session, Turn, new_session

STATUS_SECONDS = 1.0
"""The status line holds counters: a few updates a second read as
live, and each one costs a repaint of more of the screen than the streamed text does."""
NOTE_STYLES = {"interrupted": "yellow", "no_answer": "bold yellow", "error": "bold red"}

__all__ = ["DomainPane", "PaneHost", "closing"]


def judgement_badge(judgement: object) -> str:
    """The line under a judged turn, with the benchmark's two decimals ("" when none or
    when the saved judgement is not of the shape it should be)."""
    judged = judgement.get("judgement") if isinstance(judgement, dict) else None
    if not isinstance(judged, dict):
        return ""
    total, normalised = judged.get("total"), judged.get("normalised")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (total, normalised)):
        return ""
    return f"★ judged {total:.2f}/5 ({normalised:.2f}/100)"


class PaneHost(Protocol):
    """What a pane needs of the app around it (handed to it when it is made)."""

    @property
    def simulator(self) -> Simulator: ...

    @property
    def wait_seconds(self) -> float: ...

    def turn_problem(self) -> str:
        """Why no turn can start now ("" when one can)."""
        ...

    def save_session(self, session: Session) -> str | None:
        """Save after a turn; returns why it could not, or None."""
        ...

    def show_counters(self, pane: DomainPane) -> None:
        """The pane's live counters changed during a frame it draws."""
        ...


class AgentLink(Protocol):
    """An agent acting in the tab (``ui.agent_serving``): while one is connected, its
    calls are the tab's turns and the person's keys steer it instead of typing actions."""

    @property
    def driving(self) -> bool:
        """Whether an agent is connected now."""
        ...

    def stop(self) -> bool:
        """Stop the agent's call in progress (generating or held); False when none."""
        ...

    def session_replaced(self) -> None:
        """The tab got another session: the agent's connection keeps the old one."""
        ...


DRIVEN = "An agent drives this tab: its calls are the turns here (Ctrl+B to steer it or stop)."


class DomainPane(Vertical):
    """One domain's tab."""

    DEFAULT_CSS = """
    DomainPane { height: 1fr; }
    DomainPane #scenario-row { height: 1; }
    DomainPane #scenario-line { height: 1; color: $text-muted; padding: 0 1; }
    DomainPane #agent-line { height: 1; padding: 0 1; background: $boost; }
    DomainPane #pane-body { height: 1fr; }
    DomainPane #main { width: 1fr; }
    DomainPane #screen { height: 1fr; }
    DomainPane .action-error { color: $error; height: auto; padding: 0 1; }
    DomainPane .hidden { display: none; }
    DomainPane.-reasoning-hidden #reasoning { display: none; }
    """

    class StatusChanged(Message):
        def __init__(self, pane: DomainPane) -> None:
            super().__init__()
            self.pane = pane

    class TurnFinished(Message):
        def __init__(self, pane: DomainPane, turn: Turn) -> None:
            super().__init__()
            self.pane = pane
            self.turn = turn

    @property
    def replaces_view(self) -> bool:
        """Whether each observation replaces the screen (web pages, phone screens) instead
        of adding to it (a terminal): the domain says."""
        return self.domain.replaces_state

    wraps_screen = False
    """Whether the screen wraps long lines (prose) instead of scrolling sideways."""

    @property
    def echo_kept(self) -> bool:
        """Whether the action's line stays above its observation in the transcript. A
        terminal's output echoes the command itself, and a whole-state tab shows only the
        state (its last action is on the line above the view instead)."""
        return not self.replaces_view

    def __init__(
        self, domain: Domain, scenario: Scenario, host: PaneHost, *, id: str | None = None
    ) -> None:
        super().__init__(id=id, classes="backdrop")  # see app.tcss
        self.domain = domain
        self.host = host
        self.session, self.problems = new_session(domain, scenario)
        self.run: TurnRun | None = None
        self.thinking: bool | None = None
        """This tab's own thinking switch; None follows the settings."""
        self.status = StatusInfo()
        self.frames = FramePacer(self, self.draw)
        self._turn_start: dict[int, int] = {}
        self._answer_start = 0
        self._taken_line: dict[int, Text | None] = {}
        self._answer_started = False
        self._reasoning_clean = StreamSanitizer()
        self._answer_clean = StreamSanitizer()
        self._first_token = 0.0
        self._status_at = 0.0
        self.no_model_lines = 0
        self.agent: AgentLink | None = None
        """The agent this tab is served to (None: not served)."""
        self._redraw_after_turn = False
        """Lines of the "no model" help at the top of the screen (gone once one loads)."""
        self.reality = TabReality(self)
        """The tab's real twin, when it has one, and its twinned turns' view."""

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # A screen update renders every widget whose container's area it touches: in a row
        # of its own, the scenario line is left out of the frames of the views below it.
        with Vertical(id="scenario-row", classes="backdrop"):
            yield Static(id="scenario-line")
        yield Static(id="agent-line", classes="hidden")
        with Horizontal(id="pane-body", classes="backdrop"):
            with Vertical(id="main", classes="backdrop"):
                yield from self.compose_screen()
                yield from self.compose_editor()
                yield Static(id="action-error", classes="action-error hidden")
            yield ReasoningPanel(id="reasoning")

    def compose_screen(self) -> ComposeResult:
        """The simulated screen: a LineView with id ``screen`` (a pane may put more beside it)."""
        yield LineView(wrap=self.wraps_screen, id="screen")

    def compose_editor(self) -> ComposeResult:
        """The domain's action editor."""
        yield from ()

    @property
    def screen_view(self) -> LineView:
        return self.query_one("#screen", LineView)

    @property
    def reasoning(self) -> ReasoningPanel:
        return self.query_one("#reasoning", ReasoningPanel)

    def on_mount(self) -> None:
        if closing(self):
            return
        self.show_session()

    def on_unmount(self) -> None:
        self.frames.stop()

    @property
    def busy(self) -> bool:
        return self.run is not None

    # -- showing a whole session --------------------------------------------------------
    def show_session(self) -> None:
        """Redraw the screen from the session (start, load, undo, branch switch)."""
        scenario = self.session.scenario
        self.show_control()
        view = self.screen_view
        view.clear()
        self._turn_start.clear()
        self.show_state(scenario.state)
        for turn in self.session.turns:
            if self.replaces_view:
                view.clear()
            start = self.turn_start_line()
            self._turn_start[turn.number] = start
            view.truncate(start)
            if self.echo_kept:
                self.show_echo(turn)
            self.show_observation(turn)
        last = self.session.turns[-1] if self.session.turns else None
        self.reasoning.view.clear()
        if last is not None and last.reasoning:
            self.reasoning.view.append(sanitize(last.reasoning))
        self.reasoning.set_title("Reasoning")
        self.reality.session_shown()

    def show_control(self) -> None:
        """The line above the screen: the scenario, and what steers the next turns."""
        scenario = self.session.scenario
        line = Text()
        control = self.session.control
        if control is not None:
            when = "every turn" if control.persistent else "next turn"
            name = one_line(control.preset or control.text)[:60]
            line.append(f"⚑ {name} ({when})  ", style="bold magenta")
        world = self.session.world
        if world is not None:
            line.append(f"◆ world: {one_line(world.title or world.name)}  ", style="bold cyan")
        line.append(one_line(scenario.title), style="bold")
        turns = self.session.turns
        if self.replaces_view and turns:
            line.append(f"  › {one_line(turns[-1].action.label)}", style="dim")
        elif scenario.description:
            line.append("  " + one_line(scenario.description))
        # One row whatever it says: no layout of the screen (a turn's end shows it again).
        self.query_one("#scenario-line", Static).update(line, layout=False)

    def show_agent(self, line: Text | None) -> None:
        """The line under the scenario's while the tab is served to agents (None hides it)."""
        widget = self.query_one("#agent-line", Static)
        if line is None:
            widget.set_class(True, "hidden")
            return
        widget.update(line, layout=False)
        widget.set_class(False, "hidden")

    def show_state(self, state: str) -> None:
        if state:
            self.screen_view.append_lines(self.highlight_observation(sanitize(state)))

    def highlight_observation(self, text: str) -> list[Text]:
        return highlight(text, self.domain.lexer)

    def highlight_turn(self, turn: Turn) -> list[Text]:
        """A finished turn's observation, coloured; panes whose colouring depends on the
        action (the file an editor showed) use ``domain.observation_lexer`` here."""
        return self.highlight_observation(sanitize(turn.observation))

    def turn_start_line(self) -> int:
        """Where a new turn's output begins on the screen."""
        view = self.screen_view
        return view.line_count

    def show_echo(self, turn: Turn) -> None:
        """The action's line, above its observation."""
        self.screen_view.append_lines([Text(f"› {one_line(turn.action.label)}", style="dim")])

    def show_observation(self, turn: Turn) -> None:
        """A finished turn, highlighted, with a note when it is not complete, and badges for
        a control instruction it was sent with and its judgement."""
        view = self.screen_view
        if turn.control:
            view.append_lines([Text(f"⚑ control: {one_line(turn.control)[:200]}", "magenta")])
        if turn.observation:
            view.append_lines(self.highlight_turn(turn))
        if turn.note:
            style = NOTE_STYLES.get(turn.status, "dim")
            view.append_lines([Text(f"[{one_line(turn.note)}]", style=style)])
        if turn.extraction:
            view.append_lines(
                [Text(f"[{one_line(turn.extraction)} · Ctrl+U shows the raw output]", "yellow")]
            )
        badge = judgement_badge(turn.judgement)
        if badge:
            view.append_lines([Text(badge, "cyan")])
        twinned = self.reality.turn_line(turn)
        if twinned is not None:
            view.append_lines([twinned])

    # -- one turn -------------------------------------------------------------------------
    def show_error(self, message: str) -> None:
        error = self.query_one("#action-error", Static)
        if not message and error.has_class("hidden"):
            return  # nothing shown, nothing to lay out (every turn's start clears it)
        error.update(Text(sanitize(message)))
        error.set_class(not message, "hidden")

    def send(self, action: Action) -> bool:
        """Start a turn for ``action``; False (with the reason shown) when it cannot."""
        if self.busy:
            self.show_error("the model is still working on the last action: Esc stops it")
            return False
        problem = self.turn_problem()
        if problem:
            self.show_error(problem)
            return False
        try:
            options = self._run_options()
            run = self.reality.send(self.host.simulator, self.session, action, options)
        except SimulatorError as exc:
            self.show_error(str(exc))
            return False
        self.show_error("")
        self._start(run)
        return True

    def turn_problem(self) -> str:
        """Why the person cannot start a turn in this tab now ("" when they can)."""
        if self.agent is not None and self.agent.driving:
            return DRIVEN
        return self.host.turn_problem()

    def follow(self, run: TurnRun) -> None:
        """Stream a turn that someone else started in this tab's session (an agent's call)."""
        self.show_error("")
        self._start(run)

    def redraw_turns(self) -> None:
        """Show the session again once the running turn is drawn (an agent's call whose
        observation changed after it streamed: edited, or never received)."""
        if self.run is None:
            self.show_session()
        else:
            self._redraw_after_turn = True

    def _run_options(self) -> RunOptions:
        return {
            "params": self.turn_params(),
            "owner": self.domain.title,
            "save": self.host.save_session,
        }

    def _start(self, run: TurnRun) -> None:
        turn = run.turn
        start = self.turn_start_line()
        self._turn_start[turn.number] = start
        view = self.screen_view
        # A line the turn takes over (a terminal's bare prompt) comes back on a retry.
        self._taken_line[turn.number] = view.line(start).copy() if start < view.line_count else None
        self.show_echo(turn)
        self._answer_start = view.line_count if self.echo_kept else start
        self._answer_started = False
        self._reasoning_clean = StreamSanitizer()
        self._answer_clean = StreamSanitizer()
        self.reasoning.view.clear()
        self.reasoning.set_title("Reasoning")  # its count is written when the turn ends
        self._first_token = 0.0
        self.run = run
        engine = self.host.simulator.engine
        budget = run.params.reasoning_budget
        self.status = StatusInfo(reasoning_budget=budget, phase="waiting")
        self.frames.follow(run, local=engine is None or not engine.info.remote)
        self.reality.turn_started(run)
        self.post_message(self.StatusChanged(self))

    def turn_params(self) -> GenerationParams:
        return self.host.simulator.with_thinking(self.thinking)

    def stop(self) -> bool:
        if self.agent is not None and self.agent.stop():
            return True
        if self.run is None:
            return False
        self.run.stop()
        return True

    def answer_now(self) -> bool:
        if self.run is None or not self.status.phase.startswith("reasoning"):
            return False
        self.run.answer_now()
        return True

    def retry(self) -> bool:
        """Ask again for the last turn; its earlier answer stays among its attempts."""
        if self.busy or not self.session.turns:
            return False
        problem = self.turn_problem()
        if problem:
            self.show_error(problem)
            return False
        turn = self.session.turns[-1]
        start = self._turn_start.get(turn.number, self.screen_view.line_count)
        try:
            run = self.host.simulator.retry(self.session, **self._run_options())
        except SimulatorError as exc:
            self.show_error(str(exc))
            return False
        self.screen_view.truncate(start)
        taken = self._taken_line.get(turn.number)
        if taken is not None and not self.replaces_view:
            self.screen_view.append_lines([taken])
        if self.replaces_view:
            self.show_session_without(turn)
        self._start(run)
        return True

    def run_pending(self, turn: Turn) -> bool:
        """Run a turn that a history edit left pending (a regenerated turn, an edited
        action on a new branch): redraw the branch up to it, then stream it as ``send`` does."""
        problem = self.turn_problem()
        if problem:
            self.show_error(problem)
            return False
        try:
            run = self.host.simulator.resume(self.session, turn, **self._run_options())
        except SimulatorError as exc:
            self.show_error(str(exc))
            return False
        self.show_error("")
        self.show_session()
        if self.replaces_view:
            self.show_session_without(turn)
        else:
            self.screen_view.truncate(self._turn_start.get(turn.number, 0))
        self._start(run)
        return True

    def show_session_without(self, turn: Turn) -> None:
        """Redraw up to the turn before ``turn`` (views that show one state at a time)."""
        view = self.screen_view
        view.clear()
        earlier = [t for t in self.session.turns if t.number < turn.number and t.shown]
        if earlier:
            view.append_lines(self.highlight_observation(sanitize(earlier[-1].observation)))
        else:
            self.show_state(self.session.scenario.state)

    def toggle_reasoning(self) -> None:
        """Show or hide the reasoning panel (a choice that outlasts the window's width)."""
        shown = self.reasoning.display
        self.set_class(shown, "-reasoning-hidden")
        self.set_class(not shown, "-reasoning-shown")

    # -- the turn's updates, a frame at a time ---------------------------------------------
    def draw(self, update: TurnUpdate) -> None:
        """One frame of the running turn (``FramePacer`` calls it)."""
        status = self.status
        phase = status.phase
        if update.prompt is not None:
            status.omitted_turns = update.prompt.omitted_turns
            status.context_used = update.prompt.tokens
            if update.prompt.omitted_turns:
                self.app.notify(
                    f"The {update.prompt.omitted_turns} oldest turns no longer fit the context "
                    "and were left out of the prompt.",
                    title=self.domain.title,
                    severity="warning",
                )
        if update.reasoning_tokens is not None:
            status.reasoning_tokens = update.reasoning_tokens
        if update.phase is not None:
            status.phase = update.phase
        if update.generated:
            self._count(update.generated)
        if update.reasoning:
            self.reasoning.view.append(self._reasoning_clean.feed(update.reasoning))
        if update.answer or update.answer_reset:
            self._apply_answer(update.answer, update.answer_reset)
        if update.real is not None:
            self.reality.drawn(update)
        if update.finished is not None:
            self._finish(update.finished)
            self.post_message(self.StatusChanged(self))
        elif self._status_due(phase):
            # The live counters are in the status line; the reasoning panel's title is
            # written when the turn ends (an update at the panel's top while its bottom
            # grows would have the screen repaint the whole panel between them).
            self.host.show_counters(self)  # drawn with this frame, not in one of its own

    def _status_due(self, phase_before: str) -> bool:
        """Whether the counters should be shown again (a new phase always is)."""
        now = time.monotonic()
        if self.status.phase == phase_before and now - self._status_at < STATUS_SECONDS:
            return False
        self._status_at = now
        return True

    def _count(self, generated: int) -> None:
        now = time.monotonic()
        if not self._first_token:
            self._first_token = now
        run = self.run
        status = self.status
        prompt = run.prompt.tokens if run is not None and run.prompt is not None else 0
        status.context_used = prompt + generated
        status.generated = generated
        began = run.started_at if run is not None and run.started_at else now
        status.elapsed = now - began  # the time in the queue is not the turn's
        span = now - self._first_token
        if span > 0 and generated > 1:
            status.tokens_per_second = (generated - 1) / span

    def _reasoning_title(self) -> None:
        budget = self.status.reasoning_budget
        limit = f" / budget {budget:,}" if budget else ""
        self.reasoning.set_title(f"Reasoning · {self.status.reasoning_tokens:,} tokens{limit}")

    def _apply_answer(self, text: str, reset: bool) -> None:
        assert self.run is not None
        view = self.screen_view
        if not self._answer_started or reset:
            self._answer_started = True
            self._answer_clean = StreamSanitizer()
            if self.replaces_view:
                view.clear()
                self._turn_start[self.run.turn.number] = 0
                if self.echo_kept:
                    self.show_echo(self.run.turn)
                self._answer_start = view.line_count if self.echo_kept else 0
            view.truncate(self._answer_start)
        view.append(self._answer_clean.feed(text))

    def _finish(self, event: Finished) -> None:
        run = self.run
        assert run is not None
        turn = run.turn
        self.run = None
        view = self.screen_view
        if self.replaces_view and turn.observation:
            view.clear()
            self._turn_start[turn.number] = 0
            if self.echo_kept:
                self.show_echo(turn)
        else:
            view.truncate(self._answer_start)
            if self.replaces_view and not turn.observation:
                self.show_session_without(turn)
                self.show_echo(turn)
        self.show_observation(turn)
        self.status.phase = turn.status.replace("_", " ") if turn.status != "complete" else ""
        stats = event.stats
        self.status.tokens_per_second = stats.tokens_per_second or self.status.tokens_per_second
        self.status.generated = stats.generated_tokens
        self.status.elapsed = stats.elapsed
        self.status.context_used = stats.prompt_tokens + stats.generated_tokens
        self.status.n_ctx = stats.n_ctx
        if event.reasoning and not self.reasoning.view.text.strip():
            self.reasoning.view.append(sanitize(event.reasoning))
        self._reasoning_title()
        self.show_control()  # a next-turn-only instruction is gone now
        if run.save_error:
            self.show_error(f"Not saved: {run.save_error}")
        if self._redraw_after_turn:
            self._redraw_after_turn = False
            self.show_session()
        self.reality.turn_finished(turn)
        self.post_message(self.TurnFinished(self, turn))

    # -- session lifecycle --------------------------------------------------------------
    def replace_session(self, session: Session) -> None:
        if self.agent is not None:
            self.agent.session_replaced()
        self.reality.session_replaced()
        if self.run is not None:
            self.run.stop()
            self.frames.stop()
            self.run = None
        self.session = session
        self.status = StatusInfo()
        self.show_session()
        self.post_message(self.StatusChanged(self))
