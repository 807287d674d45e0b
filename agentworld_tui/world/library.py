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

from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Session
from agentworld_tui.world.store import remove_stale_temporaries, write_atomic
from agentworld_tui.world.workspace import (
    DomainLookup,
    SessionInUse,
    Workspace,
    WorkspaceError,
    load_workspace,
    lock_session_file,
    open_workspace,
)

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
    def __init__(self, folder: Path, domains: DomainLookup | None = None) -> None:
        """``folder``: the sessions folder (the front-end's settings say which)."""
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
                problem = one_line(str(exc))
                found.append(SavedSession(path, one_line(path.stem), _mtime(path), problem=problem))
                continue
            found.append(
                SavedSession(
                    path,
                    one_line(ws.name) or one_line(path.stem),
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
        """Open a session for writing (its lock held until ``close()``); raises
        SessionInUse when another program has it open."""
        ws = load_workspace(path, self.domains, hold=True)
        self.mark_used(path)
        return ws

    def save(self, workspace: Workspace) -> Path:
        """Save and remember it as the session to resume."""
        path = workspace.save()
        self.mark_used(path)
        return path

    def rename(self, path: Path, name: str) -> Workspace:
        """Change the name shown in the browser and return the renamed workspace.

        The file keeps its name, so links and ``--session`` paths keep working. When this
        program has the file open (the app's current session), that very workspace is
        renamed and saved, so its next save keeps the new name: the caller only redraws
        the name. Raises SessionInUse when another program has the file open.
        """
        name = " ".join(name.split())
        if not name:
            raise WorkspaceError("a session needs a name")
        held = open_workspace(path)
        if held is not None and held.holds_lock:
            held.name = name
            held.save()
            return held
        with load_workspace(path, self.domains, hold=True) as ws:
            ws.name = name
            ws.save()
        return ws

    def delete(self, path: Path) -> None:
        """Remove a session file (the browser asks for confirmation first); raises
        SessionInUse when another program has it open. When this program has it open,
        that workspace stays usable: its next save writes the file anew."""
        if path.parent.resolve() != self.folder.resolve():
            raise WorkspaceError(f"{one_line(str(path))} is not in {self.folder}")
        held = open_workspace(path)
        lock = None
        if held is None or not held.holds_lock:
            try:
                lock = lock_session_file(path)
            except SessionInUse:
                raise
            except WorkspaceError:
                lock = None  # no lock can be made there: nobody can be writing it either
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            where = one_line(str(path))
            raise WorkspaceError(f"cannot delete {where}: {exc.strerror or exc}") from None
        finally:
            if lock is not None:
                lock.release()
        if held is not None and held.holds_lock:
            held.forget_file()
        if self._pointer() == path.name:
            self._forget_last()

    def archive(
        self,
        what: Session | Workspace,
        name: str = "",
        *,
        reason: str = "replaced",
        when: float | None = None,
    ) -> Path:
        """Keep a copy of one tab's session (or of a whole workspace) as a saved session
        named "<name> (<reason> 2026-12-03 10:15)", and return its path.

        For whatever is about to replace a tab's history: the old one stays in the session
        browser. ``name`` defaults to the workspace's name, or the tab's domain and scenario.
        """
        if isinstance(what, Workspace):
            tabs, active, ui = list(what.tabs), what.active_tab, dict(what.ui)
            base = name or what.name
        else:
            tabs, active, ui = [what], 0, {}
            base = name or f"{what.domain.title}: {what.scenario.title or what.scenario.name}"
        base = " ".join(base.split()) or "Session"
        moment = time.strftime("%Y-%m-%d %H:%M", time.localtime(when or time.time()))
        title = f"{base} ({reason} {moment})"
        copy = Workspace(
            tabs=tabs,
            name=title,
            active_tab=active,
            ui=ui,
            path=self.folder / self._file_name(title),
        )
        with copy:
            return copy.save()

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


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
