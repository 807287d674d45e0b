"""A turn on its way, between the engine's thread and the session's.

The engine's thread only hands events in. The session's own thread (the app's event loop,
the command line's main thread, an agent server's loop) takes them out, batched into one
``TurnUpdate`` per frame or per wait; the first time that thread meets the last event, it
records the turn in the session and saves it, and only then shows it, so what anyone saw
is on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    PromptBuilt,
    PromptProgress,
    ReasoningDelta,
)
from agentworld_tui.simulator.turn import record
from agentworld_tui.world.session import Session, Turn

__all__ = ["Home", "RealSide", "Saver", "StreamRun", "TurnRun", "TurnUpdate", "home_on"]

if TYPE_CHECKING:
    from agentworld_tui.reality.observation import RealObservation
    from agentworld_tui.simulator.queue import GenerationJob

Home = Callable[[Callable[[], None]], None]
"""Runs a callable on the session's own thread, soon (``loop.call_soon_threadsafe``)."""
Saver = Callable[[Session], str | None]
"""Saves a session after a turn; returns why it could not, or None."""


@dataclass(frozen=True)
class RealSide:
    """A twinned turn's real side, as an event among the engine's: ``observation`` is
    reality's answer when it came; None says the world model has answered and the turn
    waits for reality."""

    observation: RealObservation | None


@dataclass
class TurnUpdate:
    """Everything that came for a turn since the last update, in one piece."""

    reasoning: str = ""
    """Reasoning text (untrusted: sanitize before display)."""
    answer: str = ""
    answer_reset: bool = False
    """Clear the answer shown so far before appending ``answer`` (a later block won)."""
    generated: int = 0
    """Tokens generated so far (0: no new count)."""
    reasoning_tokens: int | None = None
    phase: str | None = None
    """"reading prompt 40%", "reasoning", "answering" when it changed."""
    prompt: PromptBuilt | None = None
    real: RealObservation | None = None
    """Reality's answer to a twinned turn, when it came in this update (raw: sanitize
    before display, like model output)."""
    finished: Finished | None = None
    """A turn's last event: the turn is recorded and saved by the time an update has it."""
    final: object = None
    """The last event of any run (a turn's ``Finished``, a judgement's verdict)."""


class StreamRun:
    """What a turn and a judgement share: events handed in on the engine's thread, taken
    out on the session's as updates; the last event (``Finished`` for a turn, the verdict
    for a judgement) ends it, and is acted on once, on the session's thread."""

    def __init__(self, home: Home | None) -> None:
        self.home = home
        self.control = GenerationControl()
        self.completed = False
        self.on_complete: list[Callable[[Any], None]] = []
        """Called on the session's thread once the run is recorded (and saved)."""
        self._events: deque[object] = deque()
        self._final: object = None
        self._signal: threading.Event | None = None
        """Made by the first thread that blocks on the run (most runs are awaited, and an
        Event's lock and condition are objects the garbage collector scans)."""
        self._waker: Callable[[], None] | None = None
        self._future: asyncio.Future[Any] | None = None

    def is_final(self, event: object) -> bool:
        raise NotImplementedError

    def on_final(self, event: object) -> None:
        """Record the last event (on the session's thread, once)."""
        raise NotImplementedError

    # -- the engine's side ------------------------------------------------------------
    def sink(self, event: object) -> None:
        """Called on the engine's thread for every event."""
        if self.is_final(event):
            self._final = event
        self._events.append(event)
        signal = self._signal
        if signal is not None:
            signal.set()
        if self._final is not None and self.home is not None:
            self.home(self.complete)
        waker = self._waker
        if waker is not None:
            self._waker = None
            waker()

    # -- asking ---------------------------------------------------------------------
    def stop(self) -> None:
        self.control.cancel()

    # -- the session's side -----------------------------------------------------------
    def park(self, waker: Callable[[], None]) -> bool:
        """Have the engine's thread call ``waker`` at its next event (once); False when an
        event is already waiting (take it now instead)."""
        self._waker = waker
        if self._events:
            self._waker = None
            return False
        return True

    @property
    def pending(self) -> bool:
        """Whether events wait to be taken."""
        return bool(self._events)

    def complete(self) -> None:
        """Act on the last event (on the session's thread, once)."""
        final = self._final
        if self.completed or final is None:
            return
        self.completed = True
        self.on_final(final)
        if self._future is not None and not self._future.done():
            self._future.set_result(final)
        for callback in self.on_complete:
            callback(self)

    def take(self) -> TurnUpdate | None:
        """The events since the last call, as one update (None when there were none)."""
        events = self._events
        if not events:
            return None
        update = TurnUpdate()
        reasoning: list[str] = []
        answer: list[str] = []
        last: ReasoningDelta | AnswerDelta | None = None
        while events:
            event = events.popleft()
            kind = type(event)
            if kind is ReasoningDelta:
                assert isinstance(event, ReasoningDelta)
                reasoning.append(event.text)
                last = event
                update.reasoning_tokens = event.reasoning_tokens
                update.phase = "reasoning"
            elif kind is AnswerDelta:
                assert isinstance(event, AnswerDelta)
                if event.reset:
                    answer.clear()
                    update.answer_reset = True
                answer.append(event.text)
                last = event
                update.phase = "answering"
            elif kind is PromptProgress:
                assert isinstance(event, PromptProgress)
                if event.total:
                    update.phase = f"reading prompt {100 * event.evaluated // event.total}%"
            elif kind is PromptBuilt:
                assert isinstance(event, PromptBuilt)
                update.prompt = event
            elif kind is RealSide:
                assert isinstance(event, RealSide)
                if event.observation is None:
                    update.phase = "waiting for reality"
                else:
                    update.real = event.observation
            elif self.is_final(event):
                self.complete()
                update.final = event
                if isinstance(event, Finished):
                    update.finished = event
                break
        update.reasoning = "".join(reasoning)
        update.answer = "".join(answer)
        if last is not None:
            update.generated = last.generated
        return update

    def _next_event(self) -> object:
        """Block the calling thread until an event is there, and take it."""
        signal = self._signal
        if signal is None:
            signal = self._signal = threading.Event()
        while not self._events:
            signal.clear()
            if self._events:
                break
            signal.wait()
        return self._events.popleft()

    def _wait_final(self) -> object:
        while True:
            event = self._next_event()
            if self.is_final(event):
                self.complete()
                return event

    async def _result(self) -> Any:
        if self.completed and self._final is not None:
            return self._final
        if self._future is None:
            loop = asyncio.get_running_loop()
            if self.home is None:
                self.home = home_on(loop)
            self._future = loop.create_future()
            if self._final is not None:  # arrived before anyone waited
                self.complete()
        return await self._future


class TurnRun(StreamRun):
    """One turn: ask it to stop or answer now from anywhere; take its updates on the
    session's thread, where it is recorded in the session and saved."""

    def __init__(
        self,
        session: Session,
        turn: Turn,
        params: GenerationParams,
        *,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> None:
        super().__init__(home)
        self.session, self.turn, self.params = session, turn, params
        self.owner, self.save = owner, save
        self.queued_at = time.monotonic()
        self.started_at = 0.0
        """When the engine began this turn (0 while it waits in the queue)."""
        self.prompt: PromptBuilt | None = None
        self.save_error: str | None = None
        self.reality: dict[str, Any] | None = None
        """A twinned turn's reality record, recorded with the turn (see ``ShadowRun``)."""

    def is_final(self, event: object) -> bool:
        return type(event) is Finished

    def sink(self, event: object) -> None:
        if type(event) is PromptBuilt:
            assert isinstance(event, PromptBuilt)
            self.prompt = event
            self.started_at = time.monotonic()
        super().sink(event)

    def answer_now(self) -> None:
        self.control.answer_now()

    @property
    def job(self) -> GenerationJob:
        """The generation: the turn's conversation, with the turn's grounding examples (a
        section of its current message only: the history stays as written)."""
        from agentworld_tui.simulator.queue import GenerationJob

        conversation = self.session.conversation(self.turn)
        shown = (self.turn.grounding or {}).get("text")
        if isinstance(shown, str) and shown:
            from agentworld_tui.reality.grounding import grounded

            conversation = grounded(conversation, shown)
        return GenerationJob(self.owner, conversation, self.params, self.sink, self.control)

    def on_final(self, event: object) -> None:
        assert isinstance(event, Finished)
        if self.prompt is not None:
            self.turn.omitted_turns = self.prompt.omitted_turns
        record(
            self.session, self.turn, event, started=self.prompt is not None, reality=self.reality
        )
        if self.save is not None:
            self.save_error = self.save(self.session)

    @property
    def delivered(self) -> str:
        """What the agent receives for this turn once it is recorded: reality's answer
        when a twin's was delivered, else the prediction (raw: sanitize before display)."""
        return self.turn.shown_text

    @property
    def finished(self) -> Finished | None:
        """The last event, once the turn is recorded."""
        final = self._final
        return final if self.completed and isinstance(final, Finished) else None

    def events(self) -> Iterator[EngineEvent]:
        """The events as they come, for a caller that waits on its own thread (the command
        line); the turn is recorded and saved before the last one is handed out."""
        while True:
            event = self._next_event()
            if type(event) is Finished:
                self.complete()
            yield event  # type: ignore[misc]
            if type(event) is Finished:
                return

    def wait(self) -> Finished:
        """Block until the turn is recorded (on the calling thread, which owns the session)."""
        final = self._wait_final()
        assert isinstance(final, Finished)
        return final

    async def result(self) -> Finished:
        """Wait on the session's event loop for the recorded turn (the loop becomes the
        run's ``home`` if it had none)."""
        final = await self._result()
        assert isinstance(final, Finished)
        return final


def home_on(loop: asyncio.AbstractEventLoop) -> Home:
    """A ``Home`` on an event loop; once the loop has closed, nothing runs."""

    def call(callback: Callable[[], None]) -> None:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed just now
                loop.call_soon_threadsafe(callback)

    return call
