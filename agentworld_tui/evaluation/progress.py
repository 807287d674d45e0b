"""A progress bar with an ETA on stderr: redrawn in place on a terminal, a line every tenth
of the way when stderr is a file or a pipe.

The bar counts outcomes with the same words as the summary printed after it ("unreadable
2, judge failed 1"), so the two never disagree about what went wrong.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

BAR_WIDTH = 24


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def tally(counts: Counter[str], words: Sequence[str], *, zeros: bool = False) -> str:
    """``"unreadable 2, judge failed 1"``: each word with its count, in the order given
    (words counted 0 are left out unless ``zeros``)."""
    return ", ".join(f"{w} {counts[w]}" for w in words if zeros or counts[w])


class Progress:
    def __init__(
        self,
        label: str,
        total: int,
        *,
        done: int = 0,
        stream: TextIO | None = None,
        words: Sequence[str] = (),
    ) -> None:
        self.label = label
        self.total = total
        self.start_done = done
        """Finished before this run (resumed): they do not count towards the rate."""
        self.done = done
        self.words = tuple(words)
        """The outcomes worth showing, as the summary names them."""
        self.counts: Counter[str] = Counter()
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
        counted = tally(self.counts, self.words)
        return (
            f"{self.label} [{bar}] {self.done}/{self.total} {fraction:4.0%}  "
            f"{clock(elapsed)} elapsed  {eta}" + (f"  {counted}" if counted else "")
        )

    def advance(self, outcome: str = "") -> None:
        """One more done; ``outcome`` (one of ``words``) is counted when given."""
        self.done += 1
        if outcome:
            self.counts[outcome] += 1
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
