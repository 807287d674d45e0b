"""One writer per session file: an operating-system lock held while a workspace is open.

Two programs saving one file (two apps, or the app and ``predict --session``) would each
overwrite the other's turns. The writer holds a filelock on a hidden ``.<name>.lock`` next
to the file (next to the file a link points to, so every path to it shares one lock), and a
second writer is refused at once. The operating system releases the lock when its holder
exits or is killed, so a crash never leaves a file locked.

filelock does not say who holds a lock, so the holder also writes a small ``.<name>.owner``
note (process, host, program, since when) that a refused writer reads for its message.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.store import real_path, write_atomic


@dataclass(frozen=True)
class Holder:
    """Who holds a session file's lock, as its owner note says."""

    pid: int
    host: str = ""
    program: str = ""
    since: float = 0.0

    def describe(self) -> str:
        """'agentworld predict (process 1234, since 10:15)', made safe to show."""
        program = one_line(self.program)[:60] or "another program"
        where = [f"process {self.pid}"]
        if self.host and self.host != socket.gethostname():
            where.append(f"on {one_line(self.host)[:60]}")
        if 0 < self.since < 253402300799:
            where.append(time.strftime("since %Y-%m-%d %H:%M", time.localtime(self.since)))
        return f"{program} ({', '.join(where)})"


class LockHeld(Exception):
    """Another program (or another workspace of this one) holds the lock."""

    def __init__(self, target: Path, holder: Holder | None) -> None:
        super().__init__(str(target))
        self.target = target
        self.holder = holder


class SessionLock:
    """The exclusive lock on one session file (resolved through links)."""

    def __init__(self, path: Path) -> None:
        self.target = real_path(path)
        name = self.target.name
        self.lock_path = self.target.with_name(f".{name}.lock")
        self.owner_path = self.target.with_name(f".{name}.owner")
        self._lock = FileLock(self.lock_path, thread_local=False)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self) -> None:
        """Take the lock without waiting; raises LockHeld when another holds it, OSError
        when the lock file cannot be made (a read-only or missing folder)."""
        if self.held:
            return
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise LockHeld(self.target, read_holder(self.owner_path)) from None
        note = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "program": _program(),
            "since": time.time(),
        }
        with contextlib.suppress(OSError):  # the note only improves a message
            write_atomic(self.owner_path, json.dumps(note).encode("utf-8"))

    def release(self) -> None:
        """Let the lock go, and its files with it: the lock file is removed while it is
        still held (a program that opened it meanwhile sees it was removed, and takes a
        new one), so no empty ``.lock`` file stays behind."""
        if not self.held:
            return
        with contextlib.suppress(OSError):
            self.owner_path.unlink()
        with contextlib.suppress(OSError):
            self.lock_path.unlink()
        self._lock.release(force=True)


def read_holder(owner_path: Path) -> Holder | None:
    """The owner note, or None when there is none that can be believed: missing, damaged,
    or naming a process of this host that no longer runs (a killed holder's note; the lock
    is then held by a newer one that has not written its own yet)."""
    try:
        data: Any = json.loads(owner_path.read_bytes()[:4096].decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid, host = data.get("pid"), data.get("host", "")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        return None
    since = data.get("since", 0.0)
    holder = Holder(
        pid,
        host if isinstance(host, str) else "",
        str(data.get("program", "")) if isinstance(data.get("program"), str) else "",
        float(since) if isinstance(since, int | float) and not isinstance(since, bool) else 0.0,
    )
    if holder.host == socket.gethostname() and not _running(pid):
        return None
    return holder


def _running(pid: int) -> bool:
    if sys.platform == "win32":  # signal 0 would end the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it runs, as another user
    return True


def _program() -> str:
    """'agentworld predict', 'agentworld' (the app): the command and its sub-command."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    words = [a for a in sys.argv[1:] if re.fullmatch(r"[a-z][a-z-]{0,30}", a)][:1]
    return " ".join([name, *words])
