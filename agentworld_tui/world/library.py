"""The saved sessions in the data dir: what the session browser lists, opens, renames and
deletes, and which one the app offers to resume on start.

Every file is read through ``load_workspace``, so a damaged or newer file is listed with its
problem but never opened or written to.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.store import remove_stale_temporaries, write_atomic
from agentworld_tui.world.workspace import DomainLookup, Workspace, WorkspaceError, load_workspace

SUFFIX = ".json"
LAST_USED = "last-used"
"""A small file in the sessions folder naming the session opened or saved last."""


@dataclass(frozen=True)
class SavedSession:
    """One session file as the session picker lists it. Its texts came from files a user
    may have been sent, so they are made safe to show here: one line, no controls."""

    path: Path
    name: str
    updated: float
    tabs: int = 0
    turns: int = 0
    domains: tuple[str, ...] = ()
    problem: str = ""
    """Why the file cannot be opened (damaged, newer format); empty when it can."""

    @property
    def openable(self) -> bool:
        return not self.problem


class SessionLibrary:
    def __init__(self, folder: Path | None = None, domains: DomainLookup | None = None) -> None:
        if folder is None:
            from agentworld_tui.config import sessions_dir

            folder = sessions_dir()
        self.folder = folder
        self.domains = domains
        remove_stale_temporaries(folder)  # left by saves that were killed

    def files(self) -> list[Path]:
        """Session files; temporary files of an interrupted save are not among them."""
        if not self.folder.is_dir():
            return []
        return sorted(
            p
            for p in self.folder.iterdir()
            if p.suffix == SUFFIX and not p.name.startswith(".") and p.is_file()
        )

    def entries(self) -> list[SavedSession]:
        """Every saved session, most recently updated first."""
        found: list[SavedSession] = []
        for path in self.files():
            try:
                ws = load_workspace(path, self.domains)
            except WorkspaceError as exc:
                problem = _one_line(str(exc))
                found.append(
                    SavedSession(path, _one_line(path.stem), _mtime(path), problem=problem)
                )
                continue
            found.append(
                SavedSession(
                    path,
                    _one_line(ws.name) or _one_line(path.stem),
                    ws.updated,
                    len(ws.tabs),
                    ws.turn_count,
                    tuple(s.domain.name for s in ws.tabs),
                )
            )
        found.sort(key=lambda s: s.updated, reverse=True)
        return found

    def new(self, name: str = "") -> Workspace:
        """An empty workspace with a fresh file name in this folder (saved on first save)."""
        name = name or time.strftime("Session %Y-%m-%d %H:%M")
        return Workspace(name=name, path=self.folder / self._file_name(name))

    def open(self, path: Path) -> Workspace:
        ws = load_workspace(path, self.domains)
        self.mark_used(path)
        return ws

    def save(self, workspace: Workspace) -> Path:
        """Save and remember it as the session to resume."""
        path = workspace.save()
        self.mark_used(path)
        return path

    def rename(self, path: Path, name: str) -> Workspace:
        """Change the name shown in the browser (the file name stays, so links keep working)."""
        name = " ".join(name.split())
        if not name:
            raise WorkspaceError("a session needs a name")
        ws = load_workspace(path, self.domains)
        ws.name = name
        ws.save(path)
        return ws

    def delete(self, path: Path) -> None:
        """Remove a session file (the browser asks for confirmation first)."""
        if path.parent.resolve() != self.folder.resolve():
            raise WorkspaceError(f"{path} is not in {self.folder}")
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise WorkspaceError(f"cannot delete {path}: {exc.strerror or exc}") from None
        if self._pointer() == path.name:
            self._forget_last()

    def mark_used(self, path: Path) -> None:
        if path.parent.resolve() != self.folder.resolve():
            return  # a file elsewhere (``--session FILE``) is not the app's to resume
        with contextlib.suppress(OSError):  # resuming is a convenience, never worth a failure
            write_atomic(self.folder / LAST_USED, path.name.encode("utf-8"))

    def last_used(self) -> Path | None:
        """The session to offer on start: the one used last, else the newest openable one."""
        name = self._pointer()
        if name and "/" not in name and os.sep not in name:
            path = self.folder / name
            if path.is_file():
                return path
        for saved in self.entries():
            if saved.openable:
                return saved.path
        return None

    def _pointer(self) -> str:
        try:
            return (self.folder / LAST_USED).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return ""

    def _forget_last(self) -> None:
        with contextlib.suppress(OSError):
            (self.folder / LAST_USED).unlink()

    def _file_name(self, name: str) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "session"
        return f"{slug}-{uuid.uuid4().hex[:6]}{SUFFIX}"


def _one_line(text: str) -> str:
    return " ".join(sanitize(text).split())


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
