"""Episodes as session files: the file ``agentworld --session FILE`` opens, a tab per
episode, written after every step of an environment that has one."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.world.session import Session

if TYPE_CHECKING:
    from agentworld_tui.world.workspace import Workspace

__all__ = ["SessionFile", "save_sessions"]


class HasSession(Protocol):
    """What a session file is saved from (an ``Environment``)."""

    @property
    def session(self) -> Session: ...


class SessionFile:
    """A session file an environment saves its sessions into, a tab each; the file's other
    tabs are kept as they are."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._workspace: Workspace | None = None
        self._lock = threading.Lock()

    def save(self, sessions: Sequence[Session]) -> str | None:
        """Write ``sessions`` (as tabs: replaced where the file has them by id); returns
        why it could not, or None."""
        from agentworld_tui.world.workspace import WorkspaceError, open_or_new

        with self._lock:
            try:
                if self._workspace is None:
                    self._workspace = open_or_new(self.path, hold=False)
                workspace = self._workspace
                for session in sessions:
                    if workspace.index_of(session) is not None:
                        continue
                    same = next((s for s in workspace.tabs if s.id == session.id), None)
                    if same is not None:
                        workspace.replace_tab(same, session)
                    else:
                        workspace.add_tab(session)
                workspace.active_tab = max(0, len(workspace.tabs) - 1)
                workspace.save()
            except WorkspaceError as exc:
                return str(exc)
            finally:
                if self._workspace is not None:
                    self._workspace.close()
        return None


def save_sessions(path: Path, environments: Sequence[HasSession]) -> Path:
    """Save the sessions of ``environments`` into one session file, a tab each (the file
    ``agentworld --session FILE`` opens); raises EnvError when it cannot be written."""
    error = SessionFile(Path(path)).save([env.session for env in environments])
    if error:
        raise EnvError(error)
    return Path(path)
