"""The session file a front-end has open: which sessions it holds, saving after every
turn, and keeping what a tab's history is replaced by (nothing a user did is erased).

The file may hold more sessions than a front-end shows (two tabs of one domain, say):
those are kept as they are. A session whose place is taken by another (a new session,
a scenario started afresh, a loaded trajectory) is archived as a saved session of its
own first, and the caller is told where.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import Workspace, WorkspaceError


class OpenWorkspace:
    def __init__(self, library: SessionLibrary, workspace: Workspace | None = None) -> None:
        self.library = library
        self.workspace = workspace if workspace is not None else library.new()

    @property
    def in_library(self) -> bool:
        path = self.workspace.path
        return path is not None and path.parent == self.library.folder

    def holds(self, session: Session) -> bool:
        return any(tab is session for tab in self.workspace.tabs)

    def open(self, workspace: Workspace) -> None:
        """Make ``workspace`` the open one (its sessions are the tabs from now on)."""
        self.workspace = workspace

    def place(self, session: Session) -> None:
        """Make sure ``session`` is saved with the file."""
        if not self.holds(session):
            self.workspace.tabs.append(session)

    def replace(self, old: Session, new: Session) -> str:
        """Put ``new`` where ``old`` was; ``old``, when it has turns, is first archived as
        a saved session of its own. Returns what to tell the user ("" for nothing);
        raises WorkspaceError when the archive cannot be written (nothing is replaced)."""
        said = ""
        if old.turns:
            kept = self.archive(old)
            said = (
                f"The earlier {old.domain.title} session is kept in the session browser "
                f"as “{kept.name}”."
            )
        tabs = self.workspace.tabs
        for i, tab in enumerate(tabs):
            if tab is old:
                tabs[i] = new
                break
        else:
            tabs.append(new)
        return said

    def archive(self, session: Session) -> Workspace:
        """Save ``session`` alone as a new file in the library; returns that file."""
        stamp = time.strftime("%Y-%m-%d %H:%M")
        base = self.workspace.name or "Session"
        copy = self.library.new(f"{base} · {session.domain.title} (replaced {stamp})")
        copy.tabs = [session]
        copy.save()
        return copy

    def save(self, shown: Sequence[Session], active: Session | None = None) -> str | None:
        """Save the file with every session it holds and the ``shown`` ones; sessions
        without turns are left out. Returns why it could not be saved, or None."""
        for session in shown:
            self.place(session)
        workspace = self.workspace
        tabs = [tab for tab in workspace.tabs if tab.turns]
        everything = workspace.tabs
        workspace.tabs = tabs
        workspace.active_tab = next((i for i, t in enumerate(tabs) if t is active), 0)
        try:
            if self.in_library:
                self.library.save(workspace)
            else:
                workspace.save()
        except WorkspaceError as exc:
            return str(exc)
        finally:
            workspace.tabs = everything
        return None

    def renamed(self, path: Path, name: str) -> None:
        """The session browser renamed a file: if it is the open one, keep the new name."""
        if self.workspace.path is not None and _same(self.workspace.path, path):
            self.workspace.name = name


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
