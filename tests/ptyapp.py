"""The real app on a real pseudo-terminal: type bytes as a terminal sends them, read every
byte the app writes back.

    with PtyApp(["--model", str(model)]) as app:
        app.wait_for("type a command")
        app.send(b"\\x1b2")            # Alt+2 as tmux sends it
        app.wait_for("Filesystem server", after=app.mark)
        assert app.quit() == 0
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from types import TracebackType


class PtyApp:
    def __init__(
        self,
        args: list[str],
        size: tuple[int, int] = (120, 36),
        env: dict[str, str] | None = None,
        program: Sequence[str] = (sys.executable, "-m", "agentworld_tui"),
    ) -> None:
        """``program`` is the command the arguments follow: an installed ``agentworld``."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        environ = dict(os.environ, TERM="xterm-256color", COLUMNS=str(size[0]))
        environ.update(LINES=str(size[1]), **(env or {}))
        self.process = subprocess.Popen(
            [*program, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            env=environ,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.written = bytearray()
        """Every byte the app wrote so far."""
        self.mark = 0
        """Where the output stood when the last bytes were sent."""

    def read(self, seconds: float) -> None:
        """Read what the app writes for ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if not self._read_once(left):
                return

    def _read_once(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], min(timeout, 0.2))
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        self.written += chunk
        return bool(chunk)

    def send(self, data: bytes) -> None:
        self.read(0.05)  # what the app drew before these bytes is not their answer
        self.mark = len(self.written)
        os.write(self.master, data)

    def wait_for(self, text: str | bytes, timeout: float = 60, after: int = 0) -> int:
        """Read until ``text`` is among the bytes written after offset ``after``; where it is."""
        wanted = text.encode() if isinstance(text, str) else text
        end = time.monotonic() + timeout
        while (found := self.written.find(wanted, after)) == -1:
            left = end - time.monotonic()
            if left <= 0 or (self.process.poll() is not None and not self._read_once(0.1)):
                tail = bytes(self.written[-1500:])
                raise AssertionError(f"{wanted!r} never written; the last bytes: {tail!r}")
            self._read_once(left)
        return found

    def quit(self, timeout: float = 60) -> int:
        """Ctrl+Q, then read to the end; the exit status."""
        self.send(b"\x11")
        end = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < end:
            self._read_once(0.2)
        self.read(0.3)
        return self.process.wait(timeout=max(end - time.monotonic(), 1))

    def __enter__(self) -> PtyApp:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        os.close(self.master)
