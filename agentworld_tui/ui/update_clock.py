"""The clock a screen's updates run on, without Textual's timer task."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.dom import NoScreen
from textual.geometry import Region
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widget import Widget


def _raise(error: Exception) -> None:
    raise error


def raise_in_handler(node: MessagePump, error: Exception) -> None:
    """Raise ``error`` again in one of ``node``'s handlers, for a callback the event loop
    ran itself: Textual then ends the app with it, as for an error in any handler (the
    loop alone would only log it)."""
    node.call_next(_raise, error)


def repaint(widget: Widget, *regions: Region) -> None:
    """``widget.refresh(*regions)`` (a repaint, no layout) without its messages.

    Textual's goes through three: a prompt to the widget, whose idle handler sends the
    screen an update, whose handler prompts the screen, whose idle handler starts the
    screen's update. Each is a wake-up of a task on the main thread, for every widget that
    changes in a frame (a row of streamed text, the status line). This does what those
    handlers do, at once: the screen's next update draws the widget, and widgets that
    change in the same frame join the same update instead of one each as their messages
    come in."""
    try:
        screen = widget.screen
    except NoScreen:
        screen = None
    if (
        screen is None
        or not widget.is_mounted
        or widget._closing
        or not widget.display
        or screen not in screen._compositor  # not laid out yet: Textual would drop it
    ):
        Widget.refresh(widget, *regions)
        return
    widget._layout_cache.clear()
    widget._set_dirty(*regions)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    screen._dirty_widgets.add(widget)
    screen._update_timer.resume()


class UpdateClock:
    """Stands in for the timer a Textual screen runs its updates on (``_update_timer``: it
    is resumed when a widget needs drawing and paused by the update itself).

    Textual's is a timer task, which after every update sleeps until its next tick and
    only then waits to be resumed: each screen update woke the main thread once more, for
    nothing, about a quarter of a millisecond of it on a busy virtual machine. This one
    runs the update from the event loop's own timer, at most once per ``period`` as
    Textual's does (an update asked for sooner waits for the rest of it).
    """

    def __init__(self, screen: Screen[Any], period: float) -> None:
        self._screen = screen
        self._period = period
        self._handle: asyncio.Handle | None = None
        self._last = float("-inf")

    def resume(self) -> None:
        if self._handle is not None:
            return
        loop = asyncio.get_running_loop()
        wait = self._last + self._period - loop.time()
        if wait > 0:
            self._handle = loop.call_later(wait, self._tick)
        else:
            self._handle = loop.call_soon(self._tick)

    def pause(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        self._handle = None
        screen = self._screen
        if not screen.is_attached:
            return
        self._last = asyncio.get_running_loop().time()
        try:
            # As in Textual's timer task: the app and the screen are the active ones (the
            # clock may be resumed from a callback that runs in another context, such as
            # a frame woken by the engine thread).
            with screen.app._context(), screen._context():
                screen._on_timer_update()
        except Exception as error:  # raised again in the screen's handler: the app ends
            raise_in_handler(screen, error)
