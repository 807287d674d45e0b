"""From a turn's stream to frames: one component for every pane and for replay.

A ``FramePacer`` follows a run (a turn, a judgement) on a widget's event loop and hands its ``draw`` one
``TurnUpdate`` per frame, never one per token. While a local model streams, every core may
be decoding (and the engine's thread needs the GIL between tokens), so whatever the app
does comes out of the model's time: the gap between frames grows while the main thread
used more than ``UI_SHARE`` of one core since the last frame and shrinks while it used
less, between ``FRAME_SECONDS`` and ``MAX_FRAME_SECONDS``. A model on a server takes
nothing from this machine: its frames come every ``FRAME_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from textual.widget import Widget

from agentworld_tui.simulator import TurnUpdate
from agentworld_tui.simulator.run import StreamRun
from agentworld_tui.ui.textual_private import closing, raise_in_handler, within

FRAME_SECONDS = 1 / 30
MAX_FRAME_SECONDS = 1 / 3
UI_SHARE = 0.008
"""The main thread's share of a core that the frames of a local model's stream may use."""


class FramePacer:
    """Draws a run's updates on ``widget``'s loop, paced (see the module's docstring)."""

    def __init__(self, widget: Widget, draw: Callable[[TurnUpdate], None]) -> None:
        self._widget = widget
        self._draw = draw
        self.run: StreamRun | None = None
        self._local = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._parked = False
        self._next_frame = 0.0
        self._gap = FRAME_SECONDS
        self._last_frame: tuple[float, float] | None = None
        """When the last frame began: wall clock and main-thread CPU time."""

    def follow(self, run: StreamRun, *, local: bool) -> None:
        """Draw ``run`` from now until its last update."""
        self.stop()
        self.run, self._local = run, local
        self._loop = asyncio.get_running_loop()
        self._gap, self._next_frame, self._last_frame = FRAME_SECONDS, 0.0, None
        self._schedule()

    def stop(self) -> None:
        """Draw nothing more (the run itself goes on)."""
        self.run = None
        self._parked = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- waking ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        """Wake when the next frame is due, not on every tick of a fixed clock (a tick
        costs as much as a small frame); the wake-up is the event loop's own timer. With
        nothing to draw and no frame due, the pacer parks until the engine's thread hands
        over an event, instead of looking for one every so often."""
        run, loop = self.run, self._loop
        if self._timer is not None or run is None or loop is None:
            return
        now = time.monotonic()
        if not run.pending and self._next_frame <= now:
            self._parked = True
            if run.park(self._engine_woke):
                return
            self._parked = False  # an event came before the flag was up
        wait = max(FRAME_SECONDS, self._next_frame - now)
        self._timer = loop.call_later(wait, self._wake)

    def _engine_woke(self) -> None:
        """On the engine's thread: hand the wake-up to the loop."""
        loop = self._loop
        if loop is not None and self._parked:
            self._parked = False
            with contextlib.suppress(RuntimeError):  # the app has closed its loop
                loop.call_soon_threadsafe(self._unpark)

    def _unpark(self) -> None:
        """Runs outside any widget's context; the frames it schedules run in the
        widget's, as its handlers do."""
        if self.run is None or closing(self._widget):
            return
        with within(self._widget):
            self._schedule()

    def _wake(self) -> None:
        """The frame runs in the loop's own callback (through the widget's message queue
        a wake-up cost more than a small frame); an error still ends the app."""
        self._timer = None
        try:
            self._frame()
        except Exception as error:
            raise_in_handler(self._widget, error)

    def _frame(self) -> None:
        run = self.run
        if run is None or closing(self._widget):  # its views may be gone already
            return
        if run.pending and self._frame_due():
            update = run.take()
            if update is not None:
                if update.final is not None:
                    self.stop()
                self._draw(update)
        if self.run is not None:
            self._schedule()

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
