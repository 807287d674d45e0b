"""What the app's parts see of the app.

Each part (the tab's keys, the model, judging, serving tabs to agents, start-up, saving)
is handed the app as a Protocol of the members it uses, as a pane is handed its
``PaneHost``: the parts never import the app (``app.py`` imports them), and each one's
Protocol says what it reaches for. The members that most of them use are declared here.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType

from agentworld_tui.ui.panes.base import DomainPane

ResultT = TypeVar("ResultT")


class Dialogs(Protocol):
    """Telling the person something, and asking them."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None:
        """A toast of plain, sanitized text."""
        ...

    def push_screen(
        self,
        screen: Screen[ResultT],
        callback: ScreenResultCallbackType[ResultT] | None = None,
    ) -> object:
        """Open a dialog; ``callback`` is given what it is dismissed with."""
        ...


class Tabs(Protocol):
    """The domains' tabs, each with its pane."""

    @property
    def active_pane(self) -> DomainPane | None:
        """The pane of the tab on show (None before the tabs are built)."""
        ...

    def pane_for(self, domain: str) -> DomainPane | None: ...

    def panes(self) -> list[DomainPane]:
        """The panes built so far, in tab order."""
        ...

    def show_tab(self, domain: str) -> None: ...


class TabsAndDialogs(Dialogs, Tabs, Protocol):
    """The tabs, and the dialogs over them."""
