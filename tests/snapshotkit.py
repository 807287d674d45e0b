"""What a snapshot waits for before it is taken: an app with nothing left to do and
nothing on screen that changes with the clock. On a loaded machine a fixed pause can end
before the app has settled, or after a cursor blinked off, and the snapshot differs."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from textual.app import App
from textual.widgets import Input, TextArea
from textual.worker import WorkerState

UNSETTLED = (WorkerState.PENDING, WorkerState.RUNNING)


def steady_cursors(app: App[Any]) -> None:
    """Stop every cursor blinking, on every screen: a focused field then shows its
    cursor steadily, as a snapshot caught with the blink on does."""
    for screen in app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False
        for area in screen.query(TextArea):
            area.cursor_blink = False


def busy(app: App[Any]) -> bool:
    """A worker or a turn still runs."""
    if any(worker.state in UNSETTLED for worker in app.workers):
        return True
    simulator = getattr(app, "simulator", None)
    return simulator is not None and simulator.any_busy()


async def settled(app: App[Any], pilot: Any, timeout: float = 120) -> None:
    """Return once no worker or turn runs, no animation is scheduled, every message is
    handled and no cursor blinks (``timeout`` is a deadline, not a measurement)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        await pilot.wait_for_scheduled_animations()
        if not busy(app):
            break
        if loop.time() > deadline:
            raise AssertionError("the app did not settle in time")
        await pilot.pause(0.05)
    steady_cursors(app)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@contextlib.contextmanager
def folder_held(folder: Path) -> Iterator[Path]:
    """Hold ``folder`` for one test at a time, across processes: a snapshot that shows a
    fixed path works in a fixed folder, which another test run on the machine (or another
    pytest-xdist worker) would otherwise empty or fill meanwhile."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
