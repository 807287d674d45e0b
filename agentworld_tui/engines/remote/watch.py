"""The watch over every answer's stream: one thread ends those that were stopped, or whose
server stayed silent too long.

A stream is read on the thread of its generation, blocked on the network between chunks;
this thread looks at every stream's cancel request and silence, every ``POLL_S``, while
there are any, and ends the connection of each that must end (the blocked read then
returns). A thread per stream to wait on, or each stream waking itself that often to
look, cost a large share of the process's CPU with a few hundred streams at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

log = logging.getLogger("agentworld.remote")

POLL_S = 0.05
"""How often the cancel requests and the silence of the streams are looked at."""


class Interruptible(Protocol):
    def interrupt(self) -> None: ...


class Watched:
    """One answer's stream under the watch, and why the watch ended it ("" while not)."""

    def __init__(self, stream: Interruptible, control: Any, wait: float) -> None:
        self.stream = stream
        self.control = control
        self.wait = wait
        """Seconds the server may stay silent from ``last_at``."""
        self.last_at = time.monotonic()
        self.why = ""
        """"cancelled" (a stop) or "silent" (past ``wait`` with nothing sent)."""


class StreamWatch:
    """Ends the streams that were stopped, or whose server stayed silent too long."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: set[Watched] = set()
        self._running = False

    def watch(self, watched: Watched) -> None:
        with self._lock:
            self._watched.add(watched)
            if not self._running:
                self._running = True
                thread = threading.Thread(target=self._run, name="remote-streams", daemon=True)
                thread.start()

    def forget(self, watched: Watched) -> None:
        with self._lock:
            self._watched.discard(watched)

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            now = time.monotonic()
            with self._lock:
                if not self._watched:
                    self._running = False
                    return
                ending = []
                for watched in self._watched:
                    if _cancelled(watched.control):
                        watched.why = "cancelled"
                    elif now - watched.last_at > watched.wait:
                        watched.why = "silent"
                    else:
                        continue
                    ending.append(watched)
                self._watched.difference_update(ending)
            for watched in ending:
                try:
                    watched.stream.interrupt()
                except Exception:  # a stream that cannot be ended meets its own timeout
                    log.debug("ending a stream failed", exc_info=True)


def _cancelled(control: Any) -> bool:
    try:
        return bool(control.cancelled)
    except Exception:  # a broken control cannot stop the watch for every other stream
        log.debug("reading a cancel request failed", exc_info=True)
        return False


WATCH = StreamWatch()
"""The process's one watch."""
