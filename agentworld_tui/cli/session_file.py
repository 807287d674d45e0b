"""``agentworld predict --session FILE``: one turn appended to a session file.

A script drives a multi-turn simulation by calling ``predict`` once per action with the same
file: the file's earlier turns for that domain are the history, and the new turn is saved
as soon as it ends (finished, failed or interrupted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from agentworld_tui.cli.launch import UserError
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import SessionInUse, Workspace, WorkspaceError, open_or_new


def open_session_tab(
    path: Path, domain: Domain, scenario: Scenario, *, state_given: bool
) -> tuple[Workspace, Session, list[str]]:
    """The file's tab for ``domain`` (added when there is none) and prompt problems."""
    try:
        workspace = open_or_new(path)
    except SessionInUse as exc:
        raise UserError(str(exc)) from None
    except WorkspaceError:
        try:  # a file that cannot be locked (a read-only folder): predict all the same
            workspace = open_or_new(path, hold=False)
        except WorkspaceError as exc:
            raise UserError(str(exc)) from None
    session = workspace.tab_for(domain.name)
    if session is None:
        session, problems = new_session(domain, scenario)
        workspace.tabs.append(session)
        return workspace, session, problems
    if state_given:
        if session.turns:
            raise UserError(
                f"{path} already has {domain.name} turns; --state only sets the starting "
                "state of a new session"
            )
        session.scenario = dataclasses.replace(session.scenario, state=scenario.state)
    return workspace, session, []


def turn_saver(workspace: Workspace) -> Callable[[Session], str | None]:
    """What the simulator calls after the turn: save the file, or say why it could not."""

    def save(_session: Session) -> str | None:
        try:
            workspace.save()
        except WorkspaceError as exc:
            return str(exc)
        finally:
            workspace.close()
        return None

    return save
