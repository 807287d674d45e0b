"""A progress bar with an ETA on stderr: redrawn in place on a terminal, a line every tenth
of the way when stderr is a file or a pipe."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 24


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    def __init__(
        self, label: str, total: int, *, done: int = 0, stream: TextIO | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.start_done = done
        """Finished before this run (resumed): they do not count towards the rate."""
        self.done = done
        self.failed = 0
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self._live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_step = -1

    def line(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        elapsed = time.monotonic() - self.started
        made = self.done - self.start_done
        left = self.total - self.done
        if left <= 0:
            eta = "done"
        elif made > 0:
            eta = "ETA " + clock(elapsed / made * left)
        else:
            eta = "ETA --:--"
        failed = f"  {self.failed} failed" if self.failed else ""
        return (
            f"{self.label} [{bar}] {self.done}/{self.total} {fraction:4.0%}  "
            f"{clock(elapsed)} elapsed  {eta}{failed}"
        )

    def advance(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        self.show()

    def show(self) -> None:
        if self._live:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
            return
        step = int(self.done * 10 / self.total) if self.total else 10
        if step != self._last_step:
            self._last_step = step
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._live:
            self.stream.write("\n")
            self.stream.flush()
