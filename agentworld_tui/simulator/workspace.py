"""The session file a front-end has open: which sessions it holds, saving after every
turn, and keeping what a tab's history is replaced by (nothing a user did is erased).

The file may hold more sessions than a front-end shows (two tabs of one domain, say):
those are kept as they are. A session whose place is taken by another (a new session,
a scenario started afresh, a loaded trajectory) is archived as a saved session of its
own first, and the caller is told where. The file stays locked while it is open, so a
second program is refused instead of overwriting it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import SessionChanged, SessionInUse, Workspace, WorkspaceError


class OpenWorkspace:
    def __init__(self, library: SessionLibrary, workspace: Workspace | None = None) -> None:
        self.library = library
        self.workspace = workspace if workspace is not None else library.new()

    @property
    def in_library(self) -> bool:
        path = self.workspace.path
        return path is not None and path.parent == self.library.folder

    def open(self, workspace: Workspace) -> None:
        """Make ``workspace`` the open one (the one open before is let go)."""
        if workspace is not self.workspace:
            self.workspace.close()
        self.workspace = workspace

    def close(self) -> None:
        self.workspace.close()

    def replace(self, old: Session, new: Session) -> str:
        """Put ``new`` where ``old`` was; ``old``, when it has turns, is first archived as
        a saved session of its own. Returns what to tell the user ("" for nothing);
        raises WorkspaceError when the archive cannot be written (nothing is replaced)."""
        said = ""
        if old.turns:
            path = self.library.archive(old, self.workspace.name)
            said = (
                f"The earlier {old.domain.title} session is kept in the session browser "
                f"({path.name})."
            )
        if self.workspace.index_of(old) is not None:
            self.workspace.replace_tab(old, new)
        return said

    def save(self, shown: Sequence[Session], active: Session | None = None) -> str | None:
        """Save the file with every session it holds and the ``shown`` ones that have
        turns. Returns what went wrong, for the user, or None."""
        workspace = self.workspace
        workspace.add_shown(shown, active)
        try:
            if self.in_library:
                self.library.save(workspace)
            else:
                workspace.save()
        except (SessionInUse, SessionChanged) as exc:
            return f"{exc}. Save it under another name from the session browser (Ctrl+O)"
        except WorkspaceError as exc:
            return f"{exc}. Your turns are still here; free some space and they are saved with the next turn"
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
