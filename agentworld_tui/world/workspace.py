"""The session file: every tab's session, with its branches, in one JSON file.

The app saves it after every finished or interrupted turn, through ``write_atomic``, so a
crash, a kill or a full disk leaves the previous version or the new one, never a mix. A file
is checked in full before anything is built from it: a damaged file, or one written by a
newer version, is refused with a message that says why, and is never written to.

One writer at a time: a workspace opened for writing (``open_or_new``, ``load_workspace(...,
hold=True)``, or any workspace once it has saved) holds the file's lock until ``close()``, and
a second program is refused with SessionInUse; the OS frees the lock of a program that dies.
Every save also checks that the file is still the one this workspace read or last wrote, so
a change made by anything else (an editor, a sync tool, an older version) is never
overwritten: SessionChanged. Saving through a symbolic link writes the file it points to.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld_tui import __version__
from agentworld_tui.world.domain import DOMAINS, Domain
from agentworld_tui.world.json_input import JsonInputError, check_bounds, parse_json
from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Session
from agentworld_tui.world.session_lock import Holder, LockHeld, SessionLock
from agentworld_tui.world.store import real_path, write_atomic

FILE_FORMAT = "agentworld-session"
SCHEMA_VERSION = 1
"""Raise when the layout changes in a way older versions cannot read."""
STOPPED_NOTE = "the app stopped before this turn finished"

DomainLookup = Callable[[str], Domain]


class WorkspaceError(Exception):
    """A session file that cannot be read or written; the message is one line for the user."""


class SessionInUse(WorkspaceError):
    """Another program (or another open workspace of this one) holds the file's lock."""

    def __init__(self, message: str, holder: Holder | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class SessionChanged(WorkspaceError):
    """The file on disk is not the one this workspace read or last wrote: not overwritten."""


@dataclass(frozen=True)
class DiskStamp:
    """What a session file looked like when this workspace last read or wrote it."""

    size: int
    mtime_ns: int
    inode: int
    digest: str

    @classmethod
    def of(cls, found: os.stat_result, data: bytes) -> DiskStamp:
        return cls(found.st_size, found.st_mtime_ns, found.st_ino, _digest(data))

    def same_stat(self, found: os.stat_result) -> bool:
        return (found.st_size, found.st_mtime_ns, found.st_ino) == (
            self.size,
            self.mtime_ns,
            self.inode,
        )


@dataclass
class Workspace:
    """All tabs of the app, in tab order, as one shareable file."""

    tabs: list[Session] = field(default_factory=list)
    name: str = ""
    active_tab: int = 0
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    ui: dict[str, Any] = field(default_factory=dict)
    """The app's own per-file settings (JSON-able), saved and loaded as they are."""
    path: Path | None = None
    """Where it was loaded from or last saved to."""
    _lock: SessionLock | None = field(default=None, init=False, repr=False, compare=False)
    _known: bool = field(default=False, init=False, repr=False, compare=False)
    """Whether ``_disk`` says what ``path`` held when last read or written."""
    _disk: DiskStamp | None = field(default=None, init=False, repr=False, compare=False)
    """None with ``_known``: there was no file there."""
    _saving: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def tab_for(self, domain: str) -> Session | None:
        """The first tab simulating ``domain`` (a file may hold several: never decide by
        domain what to save or replace; use the methods below, which go by identity)."""
        return next((s for s in self.tabs if s.domain.name == domain), None)

    def tabs_for(self, domain: str) -> list[Session]:
        """Every tab simulating ``domain``, in tab order."""
        return [s for s in self.tabs if s.domain.name == domain]

    def index_of(self, session: Session) -> int | None:
        """Where ``session`` itself (not an equal one) is among the tabs."""
        return next((i for i, s in enumerate(self.tabs) if s is session), None)

    def add_tab(self, session: Session) -> None:
        """Append ``session`` unless it is a tab already."""
        if self.index_of(session) is None:
            self.tabs.append(session)

    def replace_tab(self, old: Session, new: Session) -> None:
        """Put ``new`` in ``old``'s place (appended when ``old`` is not a tab); every other
        tab, of the same domain or not, stays. Keep ``old`` first where its turns matter
        (``SessionLibrary.archive``)."""
        at = self.index_of(old)
        if at is None:
            self.add_tab(new)
            return
        if self.index_of(new) is not None:
            self.tabs.remove(new)
            at = self.index_of(old)
            assert at is not None
        self.tabs[at] = new

    def remove_tab(self, session: Session) -> None:
        at = self.index_of(session)
        if at is not None:
            del self.tabs[at]
            if self.active_tab >= at and self.active_tab > 0:
                self.active_tab -= 1

    def add_shown(self, shown: Iterable[Session], active: Session | None = None) -> None:
        """Before a save: every shown session with turns becomes a tab (new ones appended in
        the order given), tabs not shown stay as they are, and ``active`` is marked."""
        for session in shown:
            if session.turns:
                self.add_tab(session)
        at = self.index_of(active) if active is not None else None
        if at is not None:
            self.active_tab = at
        self.active_tab = min(max(self.active_tab, 0), max(len(self.tabs) - 1, 0))

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.tabs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FILE_FORMAT,
            "schema": SCHEMA_VERSION,
            "app_version": __version__,
            "name": self.name,
            "created": self.created,
            "updated": self.updated,
            "active_tab": self.active_tab,
            "tabs": [s.to_dict() for s in self.tabs],
            "ui": self.ui,
        }

    def to_json(self) -> bytes:
        """The file's bytes; raises JsonInputError for content the loader would refuse."""
        data = self.to_dict()
        check_bounds(data)
        return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")

    # -- writing ----------------------------------------------------------------------------
    @property
    def holds_lock(self) -> bool:
        """Whether this workspace is the one writer of its file now."""
        return self._lock is not None and self._lock.held

    def hold(self) -> None:
        """Become the file's one writer now (saving does it too); raises SessionInUse."""
        if self.path is None:
            raise WorkspaceError("no file to hold")
        real = real_path(self.path)
        if self._lock is not None and self._lock.target == real and self._lock.held:
            return
        self._adopt(_take_lock(real, _where(self.path), self))

    def close(self) -> None:
        """Stop being the file's writer (another program may open it then); saving again
        takes the lock again. The OS does this for a program that ends."""
        if self._lock is not None:
            if _OPEN.get(self._lock.target) is self:
                del _OPEN[self._lock.target]
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save(self, path: Path | None = None) -> Path:
        """Write the file atomically; on failure the previous file stays as it was.

        Raises SessionInUse when another program writes the file, SessionChanged when the
        file is no longer what this workspace read or wrote, WorkspaceError otherwise.
        ``path`` other than ``self.path`` saves a copy there and moves the workspace to it.
        """
        target = path or self.path
        if target is None:
            raise WorkspaceError("no file to save to")
        with self._saving:
            return self._save(target)

    def _save(self, target: Path) -> Path:
        where = _where(target)
        real = real_path(target)
        same_file = self.path is not None and real_path(self.path) == real
        self.updated = time.time()
        try:
            data = self.to_json()
        except (TypeError, ValueError) as exc:
            raise WorkspaceError(f"cannot save {where}: {exc}") from exc
        held = self._lock if self._lock is not None and self._lock.target == real else None
        taken = None
        if held is None or not held.held:
            try:
                real.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkspaceError(f"cannot save {where}: {exc.strerror or exc}") from exc
            taken = _take_lock(real, where, self)
        try:
            if same_file and self._known:
                self._check_unchanged(real, where)
            write_atomic(real, data)
            stamp = DiskStamp.of(os.stat(real), data)
        except OSError as exc:
            if taken is not None:
                taken.release()
            raise WorkspaceError(f"cannot save {where}: {exc.strerror or exc}") from exc
        except BaseException:
            if taken is not None:
                taken.release()
            raise
        if taken is not None:
            self._adopt(taken)
        self.path, self._known, self._disk = target, True, stamp
        return target

    def _adopt(self, lock: SessionLock) -> None:
        if self._lock is not None and self._lock is not lock:
            self.close()
        self._lock = lock
        _OPEN[lock.target] = self

    def _check_unchanged(self, real: Path, where: str) -> None:
        try:
            found: os.stat_result | None = os.stat(real)
        except FileNotFoundError:
            found = None
        except OSError:
            return  # the write that follows reports it
        stamp = self._disk
        if stamp is None:
            if found is not None:
                raise SessionChanged(
                    f"{where} was created by another program after this session was started; "
                    "it was not overwritten: save this session under another name"
                )
            return
        if found is None:
            raise SessionChanged(
                f"{where} was moved or deleted since it was opened; it was not written "
                "again: save this session under another name"
            )
        if stamp.same_stat(found):
            return
        if found.st_size == stamp.size:
            try:
                if _digest(real.read_bytes()) == stamp.digest:
                    return  # touched, not changed
            except OSError:
                pass
        raise SessionChanged(
            f"{where} was changed by another program since it was opened; it was not "
            "overwritten: open it again to see the changes, or save this session under "
            "another name"
        )

    def forget_file(self) -> None:
        """The file was removed on purpose (the session browser deleted it): the next save
        writes it anew instead of refusing to recreate it."""
        self._known, self._disk = True, None


_OPEN: weakref.WeakValueDictionary[Path, Workspace] = weakref.WeakValueDictionary()
"""The workspace of this process that holds each locked file (by its resolved path)."""


def open_workspace(path: Path) -> Workspace | None:
    """The workspace of this program that writes ``path`` now, if any (the app's open
    session, say): a rename or delete elsewhere in the program updates that one."""
    return _OPEN.get(real_path(path))


def lock_session_file(path: Path) -> SessionLock:
    """Take the lock of a file no workspace is open on (to delete it, say); raises
    SessionInUse, or WorkspaceError when no lock can be made there. Release it after."""
    return _take_lock(real_path(path), _where(path), None)


def _take_lock(real: Path, where: str, claimant: Workspace | None) -> SessionLock:
    other = _OPEN.get(real)
    if other is not None and other is not claimant and other.holds_lock:
        raise SessionInUse(
            f"{where} is already open in this program: only one workspace at a time can "
            "write a session file"
        )
    if not os.access(real.parent, os.W_OK):  # no lock file can be made: not another writer
        raise WorkspaceError(f"cannot lock {where}: its folder is not writable")
    lock = SessionLock(real)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise SessionInUse(_in_use(where, exc.holder), exc.holder) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot lock {where}: {exc.strerror or exc}") from exc
    return lock


def _in_use(where: str, holder: Holder | None) -> str:
    if holder is not None and holder.pid == os.getpid():
        who = "this program"
    elif holder is not None:
        who = holder.describe()
    else:
        who = "another program"
    return f"{where} is open in {who}: only one program at a time can write a session file"


def load_workspace(
    path: Path, domains: DomainLookup | None = None, *, hold: bool = False
) -> Workspace:
    """Read and check a session file; raises WorkspaceError and never writes to it.

    With ``hold`` the workspace is the file's one writer from before the file is read until
    ``close()``: SessionInUse when another program writes it. A file already open in this
    program is handed over to the new workspace (the old one can no longer save).
    """
    return _open(path, domains, hold=hold, missing_ok=False)


def open_or_new(path: Path, domains: DomainLookup | None = None, *, hold: bool = True) -> Workspace:
    """The workspace in ``path``, or a new empty one that will be saved there; held for
    writing (see ``load_workspace``)."""
    return _open(path, domains, hold=hold, missing_ok=True)


def _open(path: Path, domains: DomainLookup | None, *, hold: bool, missing_ok: bool) -> Workspace:
    where = _where(path)
    real = real_path(path)
    lock: SessionLock | None = None
    donor = _OPEN.get(real) if hold else None
    if donor is not None and not donor.holds_lock:
        donor = None
    if hold and donor is None:
        try:
            lock = _take_lock(real, where, None)
        except SessionInUse:
            raise
        except WorkspaceError:
            lock = None  # no folder yet, or a read-only one: saving says why if it must
    try:
        workspace = _read(path, real, where, domains, missing_ok)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if donor is not None and donor._lock is not None:
        lock, donor._lock = donor._lock, None
    if lock is not None:
        workspace._adopt(lock)
    return workspace


def _read(
    path: Path, real: Path, where: str, domains: DomainLookup | None, missing_ok: bool
) -> Workspace:
    try:
        with open(real, "rb") as handle:
            found = os.fstat(handle.fileno())
            raw = handle.read()
    except FileNotFoundError:
        if not missing_ok:
            raise WorkspaceError(f"{where}: no such file") from None
        workspace = Workspace(name=path.stem, path=path)
        workspace._known = True
        return workspace
    except OSError as exc:
        raise WorkspaceError(f"{where}: cannot read ({exc.strerror or exc})") from None
    workspace = workspace_from_json(raw, domains, where=where)
    workspace.path = path
    workspace._known, workspace._disk = True, DiskStamp.of(found, raw)
    return workspace


def workspace_from_json(
    raw: bytes, domains: DomainLookup | None = None, where: str = "session file"
) -> Workspace:
    """Parse (within bounds) and check a session file's bytes; raises WorkspaceError."""
    try:
        data = parse_json(raw)
    except JsonInputError as exc:
        raise WorkspaceError(f"{where}: damaged ({exc})") from None
    try:
        return workspace_from_dict(data, domains, where=where)
    except WorkspaceError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        # The models of session_file are meant to catch every bad shape first; should one slip
        # through, the user still gets a message and the file is still left alone.
        raise WorkspaceError(f"{where}: damaged ({type(exc).__name__}: {exc})") from None


def workspace_from_dict(
    data: Any, domains: DomainLookup | None = None, where: str = "session file"
) -> Workspace:
    """Check ``data`` in full (``session_file``), then build the workspace; raises
    WorkspaceError."""
    from agentworld_tui.world.session_file import problem_in

    lookup = domains or _registered_domain
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise WorkspaceError(f"{where}: not an agentworld session file")
    schema = data.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise WorkspaceError(f"{where}: damaged (schema must be a positive whole number)")
    if schema > SCHEMA_VERSION:
        saved_by = data.get("app_version")
        by = f" by agentworld {one_line(saved_by)[:40]}" if isinstance(saved_by, str) else ""
        raise WorkspaceError(
            f"{where}: saved{by} in session format {schema}; this version "
            f"({__version__}) reads format {SCHEMA_VERSION} or older: upgrade agentworld to open it"
        )
    problem = problem_in(data)
    if problem is not None:
        raise WorkspaceError(f"{where}: damaged ({problem})")
    sessions: list[Session] = []
    for i, tab in enumerate(data["tabs"]):
        name = tab["domain"]
        try:
            domain = lookup(name)
        except KeyError:
            if not len(DOMAINS):  # a program that never imported agentworld_tui.domains
                raise WorkspaceError(
                    f"{where}: no domains are registered (import agentworld_tui.domains)"
                ) from None
            raise WorkspaceError(
                f"{where}: tabs[{i}] simulates the domain {name!r}, which this version "
                "does not have"
            ) from None
        session = Session.from_dict(tab, domain)
        for turn in session.turns:
            if turn.status == "pending":  # saved while it ran: the process died mid-turn
                turn.status, turn.note = "interrupted", STOPPED_NOTE
            for attempt in turn.attempts:
                if attempt.get("status") == "pending":  # restoring it would look running
                    attempt["status"] = "interrupted"
        sessions.append(session)
    active = int(data.get("active_tab", 0))
    now = time.time()
    return Workspace(
        tabs=sessions,
        name=str(data.get("name", "")),
        active_tab=min(max(active, 0), max(len(sessions) - 1, 0)),
        created=float(data.get("created", now)),
        updated=float(data.get("updated", now)),
        ui=dict(data.get("ui", {})),
    )


def _registered_domain(name: str) -> Domain:
    return DOMAINS[name]


def _where(path: Path) -> str:
    """A path as messages show it: one line, nothing a terminal would act on."""
    return one_line(str(path)) or "session file"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
