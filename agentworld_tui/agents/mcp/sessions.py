"""Where each agent connection's session lives.

By default every connection gets a session file of its own in a sessions folder (the
app's, unless the user names another): a normal session file with one tab, saved
atomically after every call, so the app opens it and export and replay work on it. The
file is held (locked) while the connection lasts. A front-end that serves a session it
already has (the app serving its current tab) passes a ``SessionStore`` of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentworld_tui.config import sessions_dir
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.library import SessionLibrary
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import WorkspaceError

if TYPE_CHECKING:
    from agentworld_tui.simulator.routing import RoutedSession

log = logging.getLogger("agentworld.mcp")


@dataclass
class OpenSession:
    """A connection's session, how to save it, and how to let it go."""

    session: Session
    save: Callable[[], str | None]
    """Save now; returns why it could not, or None."""
    close: Callable[[], None]
    path: Path | None = None
    routing: Callable[[], RoutedSession | None] | None = None
    """Where the store routes the session's calls itself (the app's tab routes an agent's
    calls by the rules it routes the person's by), asked at each call; None from it: the
    call is simulated. None here: the server's own reality, if any, routes them."""


class SessionUnavailable(Exception):
    """A store that has no session for one more connection (the app's tab is served to
    one agent already, say); the message is what that agent's client is told."""


class SessionStore(Protocol):
    def open(self, domain: Domain, scenario: Scenario, title: str) -> OpenSession:
        """A session for a new connection (``title`` names it for the session browser);
        raises SessionUnavailable to refuse the connection."""
        ...


class SessionFolder:
    """One session file per connection, in ``folder`` (default: the app's sessions folder)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.library = SessionLibrary(folder if folder is not None else sessions_dir())

    @property
    def folder(self) -> Path:
        return self.library.folder

    def open(self, domain: Domain, scenario: Scenario, title: str) -> OpenSession:
        session, problems = new_session(domain, scenario)
        for problem in problems:
            log.warning("%s", problem)
        workspace = self.library.new(f"{title} {time.strftime('%Y-%m-%d %H:%M')}")
        workspace.tabs.append(session)

        def save() -> str | None:
            try:
                workspace.save()
            except WorkspaceError as exc:
                return str(exc)
            return None

        return OpenSession(session, save, workspace.close, workspace.path)
