"""What every domain's tab shares: its session, the streaming view, stop, retry.

A pane turns a validated Action into a turn on the shared engine queue, then applies the
engine's events in batches at a frame rate (never one redraw per token). Subclasses decide
how the action is edited and how an observation is shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineEvent,
    Finished,
    GenerationParams,
    PromptBuilt,
    PromptProgress,
    ReasoningDelta,
)
from agentworld_tui.engines.queue import TurnJob
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.update_clock import raise_in_handler
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.ui.widgets.reasoning_panel import ReasoningPanel
from agentworld_tui.ui.widgets.status_bar import StatusInfo
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.sanitize import StreamSanitizer, sanitize
from agentworld_tui.world.session import Session, Turn, new_session

if TYPE_CHECKING:
    from agentworld_tui.ui.app import AgentWorldApp

FRAME_SECONDS = 1 / 30
MAX_FRAME_SECONDS = 1 / 3
UI_SHARE = 0.008
"""While a local model streams, every core may be decoding (and the engine thread needs the
GIL between tokens), so whatever the app does comes out of the model's time: the gap
between frames grows while the main thread used more than this share of one core since
the last frame (everything it did: the frames, the screen updates they cause, the status
line, timers) and shrinks while it used less, between FRAME_SECONDS and MAX_FRAME_SECONDS.
A model on a server takes nothing from this machine: frames come every FRAME_SECONDS.
On a busy two-core virtual machine a frame of a streaming view costs the main thread
1-2.5 ms (the more when the view scrolls), and the model about as much: 0.8% of a core
gives four to five frames a second at 40 tokens a second, as 1% did before the status
line, the views' rows and the reasoning panel's border got cheaper to draw."""
STATUS_SECONDS = 1.0
"""The status line holds counters: a few updates a second read as
live, and each one costs a repaint of more of the screen than the streamed text does."""
NOTE_STYLES = {"interrupted": "yellow", "no_answer": "bold yellow", "error": "bold red"}


def closing(node: Widget) -> bool:
    """Whether ``node`` is being removed or its app is closing: Textual then skips mounts,
    so a container composed meanwhile may lack some of its parts (a quick quit as the tabs
    not shown first are built)."""
    return node._pruning or not node.is_attached


class DomainPane(Vertical):
    """One domain's tab."""

    DEFAULT_CSS = """
    DomainPane { height: 1fr; }
    DomainPane #scenario-row { height: 1; }
    DomainPane #scenario-line { height: 1; color: $text-muted; padding: 0 1; }
    DomainPane #pane-body { height: 1fr; }
    DomainPane #main { width: 1fr; }
    DomainPane #screen { height: 1fr; }
    DomainPane .action-error { color: $error; height: auto; padding: 0 1; }
    DomainPane .hidden { display: none; }
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

    replaces_view = False
    """Whether each observation replaces the screen (web pages, phone screens) instead of
    adding to it (a terminal)."""

    wraps_screen = False
    """Whether the screen wraps long lines (prose) instead of scrolling sideways."""

    def __init__(self, domain: Domain, scenario: Scenario, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="backdrop")  # see app.tcss
        self.domain = domain
        self.session, self.problems = new_session(domain, scenario)
        self.job: TurnJob | None = None
        self.thinking: bool | None = None
        """This tab's own thinking switch; None follows the settings."""
        self.status = StatusInfo()
        self._events: deque[EngineEvent] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._parked: asyncio.AbstractEventLoop | None = None
        """Set while the pane waits for the engine's next event with no frame due: the
        engine thread wakes it when it hands one over (see ``_sink``)."""
        self._turn_start: dict[int, int] = {}
        self._taken_line: dict[int, Text | None] = {}
        self._answer_started = False
        self._reasoning_clean = StreamSanitizer()
        self._answer_clean = StreamSanitizer()
        self._started = 0.0
        self._first_token = 0.0
        self._status_at = 0.0
        self._next_frame = 0.0
        self._gap = FRAME_SECONDS
        self._last_frame: tuple[float, float] | None = None
        """When the last frame began: wall clock and main-thread CPU time."""
        self._local = True
        """The turn's model runs on this machine (its frames are paced, see UI_SHARE)."""

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # A screen update renders every widget whose container's area it touches: in a row
        # of its own, the scenario line is left out of the frames of the views below it.
        with Vertical(id="scenario-row", classes="backdrop"):
            yield Static(id="scenario-line")
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

    @property
    def awt_app(self) -> AgentWorldApp:
        from agentworld_tui.ui.app import AgentWorldApp

        assert isinstance(self.app, AgentWorldApp)
        return self.app

    def on_mount(self) -> None:
        if closing(self):
            return
        self.show_session()

    def on_unmount(self) -> None:
        self._parked = None
        if self._timer is not None:
            self._timer.cancel()

    @property
    def busy(self) -> bool:
        return self.job is not None

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
            self.show_observation(turn)
        last = self.session.turns[-1] if self.session.turns else None
        self.reasoning.view.clear()
        if last is not None and last.reasoning:
            self.reasoning.view.append(sanitize(last.reasoning))
        self.reasoning.set_title("Reasoning")

    def show_control(self) -> None:
        """The line above the screen: the scenario, and what steers the next turns."""
        scenario = self.session.scenario
        line = Text()
        control = self.session.control
        if control is not None:
            when = "every turn" if control.persistent else "next turn"
            name = control.preset or " ".join(control.text.split())[:60]
            line.append(f"⚑ {name} ({when})  ", style="bold magenta")
        world = self.session.world
        if world is not None:
            line.append(f"◆ world: {world.title or world.name}  ", style="bold cyan")
        line.append(scenario.title, style="bold")
        if scenario.description:
            line.append("  " + " ".join(scenario.description.split()))
        # One row whatever it says: no layout of the screen (a turn's end shows it again).
        self.query_one("#scenario-line", Static).update(line, layout=False)

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
        """Show the action while the model works on it."""
        self.screen_view.append_lines([Text(f"› {turn.action.label}", style="dim")])

    def show_observation(self, turn: Turn) -> None:
        """A finished turn, highlighted, with a note when it is not complete, and badges for
        a control instruction it was sent with and its judgement."""
        view = self.screen_view
        if turn.control:
            first = " ".join(turn.control.split())
            view.append_lines([Text(f"⚑ control: {first[:200]}", style="magenta")])
        if turn.observation:
            view.append_lines(self.highlight_turn(turn))
        if turn.note:
            style = NOTE_STYLES.get(turn.status, "dim")
            view.append_lines([Text(f"[{turn.note}]", style=style)])
        judged = (turn.judgement or {}).get("judgement")
        if judged:
            view.append_lines(
                [Text(f"★ judged {judged['total']:.2f}/5 ({judged['normalised']:.0f}/100)", "cyan")]
            )

    # -- one turn -------------------------------------------------------------------------
    def show_error(self, message: str) -> None:
        error = self.query_one("#action-error", Static)
        if not message and error.has_class("hidden"):
            return  # nothing shown, nothing to lay out (every turn's start clears it)
        error.update(Text(message))
        error.set_class(not message, "hidden")

    def send(self, action: Action) -> bool:
        """Start a turn for ``action``; False (with the reason shown) when it cannot."""
        if self.busy:
            self.show_error("the model is still working on the last action: Esc stops it")
            return False
        if not self.awt_app.can_generate(self):
            return False
        self.show_error("")
        turn = self.session.begin_turn(action)
        self._start(turn)
        return True

    def _start(self, turn: Turn) -> None:
        start = self.turn_start_line()
        self._turn_start[turn.number] = start
        view = self.screen_view
        # A line the turn takes over (a terminal's bare prompt) comes back on a retry.
        self._taken_line[turn.number] = view.line(start).copy() if start < view.line_count else None
        self.show_echo(turn)
        self._answer_started = False
        self._reasoning_clean = StreamSanitizer()
        self._answer_clean = StreamSanitizer()
        self.reasoning.view.clear()
        self.reasoning.set_title("Reasoning")  # its count is written when the turn ends
        self._started = time.monotonic()
        self._first_token = 0.0
        self._last_frame = None  # the main thread's share is measured from the first frame
        engine = self.awt_app.engine
        self._local = engine is None or not engine.info.remote  # frames paced (UI_SHARE)
        budget = self.awt_app.params.reasoning_budget
        self.status = StatusInfo(reasoning_budget=budget, phase="waiting")
        self.job = TurnJob(
            owner=self.domain.title,
            session=self.session,
            turn=turn,
            params=self.turn_params(),
            sink=self._sink,
        )
        self.awt_app.submit(self.job)
        self._schedule_frame()
        self.post_message(self.StatusChanged(self))

    def turn_params(self) -> GenerationParams:
        params = self.awt_app.params
        if self.thinking is not None and self.thinking != params.enable_thinking:
            params = replace(params, enable_thinking=self.thinking)
        return params

    def stop(self) -> bool:
        if self.job is None:
            return False
        self.awt_app.queue.cancel(self.job)
        return True

    def answer_now(self) -> bool:
        if self.job is None or not self.status.phase.startswith("reasoning"):
            return False
        self.job.control.answer_now()
        return True

    def retry(self) -> bool:
        """Ask again for the last turn; its earlier answer stays among its attempts."""
        if self.busy or not self.session.turns:
            return False
        if not self.awt_app.can_generate(self):
            return False
        turn = self.session.turns[-1]
        self.session.retry()
        start = self._turn_start.get(turn.number, self.screen_view.line_count)
        self.screen_view.truncate(start)
        taken = self._taken_line.get(turn.number)
        if taken is not None and not self.replaces_view:
            self.screen_view.append_lines([taken])
        if self.replaces_view:
            self.show_session_without(turn)
        self._start(turn)
        return True

    def run_pending(self, turn: Turn) -> None:
        """Run a turn that a history edit left pending (a regenerated turn, an edited
        action on a new branch): redraw the branch up to it, then stream it as ``send`` does."""
        self.show_error("")
        self.show_session()
        if self.replaces_view:
            self.show_session_without(turn)
        self._start(turn)

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
        panel = self.reasoning
        panel.display = not panel.display

    # -- events from the engine thread ----------------------------------------------------
    def _sink(self, event: EngineEvent) -> None:
        """Takes the engine's events on its thread; wakes the pane only when it is parked
        (a wake-up per token would cost the main thread more than the frames do)."""
        self._events.append(event)
        loop = self._parked
        if loop is not None:
            self._parked = None
            with contextlib.suppress(RuntimeError):  # the app has closed its loop
                loop.call_soon_threadsafe(self._unpark)

    def _schedule_frame(self) -> None:
        """Wake for the next frame when it is due, not on every tick of a fixed clock (a
        tick costs as much as a small frame). The wake-up is the event loop's own timer: a
        Textual timer is a task of its own, started anew for each frame. With no event to
        draw and no frame due, the pane parks until the engine thread hands one over,
        instead of looking for one every so often (waking the main thread costs it about a
        quarter of a millisecond on a busy virtual machine, even to do nothing)."""
        if self._timer is not None:
            return
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        if not self._events and self._next_frame <= now:
            self._parked = loop
            if not self._events:
                return
            self._parked = None  # one came before the flag was up (it may wake us too)
        # A frame just drawn took every event: wake when the next one is due, not sooner.
        wait = max(FRAME_SECONDS, self._next_frame - now)
        self._timer = loop.call_later(wait, self._wake)

    def _unpark(self) -> None:
        """Runs in the engine thread's context, where no app is active: the frames it
        schedules run in the pane's, as its handlers do (outside it, every lookup of
        ``self.app`` walks up the widget tree)."""
        if self.job is None or closing(self):
            return
        with self.app._context(), self._context():
            self._schedule_frame()

    def _wake(self) -> None:
        """The frame runs in the loop's own callback: through the pane's queue (a message
        to wake it, a callback, their dispatch) a wake-up cost more than a small frame.
        An error still goes through the queue, so it ends the app as a handler's does."""
        try:
            self._frame_timer()
        except Exception as error:  # raised again in the pane's handler
            self._timer = None
            raise_in_handler(self, error)

    def _frame_timer(self) -> None:
        self._timer = None
        if closing(self):  # its views may be gone already (a quit as a turn ends)
            return
        self._drain()
        if self.job is not None:
            self._schedule_frame()

    def _drain(self) -> None:
        if not self._events or not self._frame_due():
            return
        reasoning: list[str] = []
        answer: list[AnswerDelta] = []
        finished: Finished | None = None
        status = self.status
        phase = status.phase
        # A frame gathers hundreds of deltas: the counts and the phase are the last ones,
        # set once (the loop body is most of what a delta costs the main thread).
        last: ReasoningDelta | AnswerDelta | None = None
        last_reasoning: ReasoningDelta | None = None
        new_phase: str | None = None
        events = self._events
        while events:
            event = events.popleft()
            kind = type(event)
            if kind is ReasoningDelta:
                reasoning.append(event.text)
                last = last_reasoning = event
                new_phase = "reasoning"
            elif kind is AnswerDelta:
                last = event
                new_phase = "answering"
                if event.reset:
                    self._apply_answers(answer)
                answer.append(event)
            elif kind is PromptProgress:
                if event.total:
                    new_phase = f"reading prompt {100 * event.evaluated // event.total}%"
            elif kind is PromptBuilt:
                status.omitted_turns = event.omitted_turns
                if event.omitted_turns:
                    self.app.notify(
                        f"The {event.omitted_turns} oldest turns no longer fit the context "
                        "and were left out of the prompt.",
                        title=self.domain.title,
                        severity="warning",
                    )
            elif kind is Finished:
                finished = event
        if last_reasoning is not None:
            status.reasoning_tokens = last_reasoning.reasoning_tokens
        if new_phase is not None:
            status.phase = new_phase
        generated = last.generated if last is not None else 0
        if generated:
            self._count(generated)
        if reasoning:
            self.reasoning.view.append(self._reasoning_clean.feed("".join(reasoning)))
        self._apply_answers(answer)
        if finished is not None:
            self._finish(finished)
        elif not self._status_due(phase):
            # The live counters are in the status line; the reasoning panel's title is
            # written when the turn ends (an update at the panel's top while its bottom
            # grows would have the screen repaint the whole panel between them).
            return
        if finished is None:
            self.awt_app.show_counters(self)  # drawn with this frame, not in one of its own
            return
        self.post_message(self.StatusChanged(self))

    def _frame_due(self) -> bool:
        """Whether a frame is due; the main thread's share of a core since the last frame
        sets the gap to the next (see UI_SHARE)."""
        now = time.monotonic()
        if now < self._next_frame:
            return False
        if not self._local:
            self._next_frame = now + FRAME_SECONDS
            return True
        cpu = time.thread_time()
        if self._last_frame is not None:
            wall, before = self._last_frame
            # Over the gap the last frame was meant to cover, not the whole wait: a frame
            # that comes late because the engine was silent (parked) would otherwise have
            # its cost thinned out by the silence, and the next frames come too fast.
            share = (cpu - before) / max(min(now - wall, self._gap), FRAME_SECONDS)
            # The square root damps the correction, so the gap settles instead of swinging.
            gap = self._gap * (max(share, 1e-4) / UI_SHARE) ** 0.5
            self._gap = min(MAX_FRAME_SECONDS, max(FRAME_SECONDS, gap))
        self._last_frame = (now, cpu)
        self._next_frame = now + self._gap
        return True

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
        self.status.generated = generated
        self.status.elapsed = now - self._started
        span = now - self._first_token
        if span > 0 and generated > 1:
            self.status.tokens_per_second = (generated - 1) / span

    def _reasoning_title(self) -> None:
        budget = self.status.reasoning_budget
        limit = f" / budget {budget:,}" if budget else ""
        self.reasoning.set_title(f"Reasoning · {self.status.reasoning_tokens:,} tokens{limit}")

    def _apply_answers(self, pending: list[AnswerDelta]) -> None:
        """A frame's answer deltas as one (a reset can only be the first of them)."""
        if pending:
            first = pending[0]
            text = "".join(event.text for event in pending)
            self._apply_answer(AnswerDelta(text, pending[-1].generated, first.reset))
            pending.clear()

    def _apply_answer(self, event: AnswerDelta) -> None:
        assert self.job is not None
        view = self.screen_view
        start = self._turn_start[self.job.turn.number]
        if not self._answer_started or event.reset:
            self._answer_started = True
            self._answer_clean = StreamSanitizer()
            if self.replaces_view:
                view.clear()
                self._turn_start[self.job.turn.number] = start = 0
            view.truncate(start)
        view.append(self._answer_clean.feed(event.text))

    def _finish(self, event: Finished) -> None:
        job = self.job
        assert job is not None
        turn = job.turn
        self.job = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._parked = None
        view = self.screen_view
        if self.replaces_view and turn.observation:
            view.clear()
            self._turn_start[turn.number] = 0
        else:
            view.truncate(self._turn_start[turn.number])
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
        self.post_message(self.TurnFinished(self, turn))

    # -- session lifecycle --------------------------------------------------------------
    def replace_session(self, session: Session) -> None:
        if self.job is not None:
            self.stop()
        self.session = session
        self.status = StatusInfo()
        self.show_session()
        self.post_message(self.StatusChanged(self))
