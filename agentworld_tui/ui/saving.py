"""What the app writes: the session file after every turn (a failure is said where the
person looks), the last save at quit, and screenshots (F12)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from agentworld_tui.config import UISettings, data_dir
from agentworld_tui.simulator import Simulator
from agentworld_tui.simulator.workspace import OpenWorkspace
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.world.session import Session
from agentworld_tui.world.store import write_atomic


class SavingHost(TabsAndDialogs, Protocol):
    """What saving needs of the app."""

    @property
    def simulator(self) -> Simulator: ...

    @property
    def files(self) -> OpenWorkspace:
        """The open session file."""
        ...

    def export_screenshot(self) -> str:
        """The screen as SVG."""
        ...

    def exit(self, result: int | None = None) -> None: ...


class Saving:
    def __init__(self, host: SavingHost, ui: UISettings) -> None:
        self.host = host
        self.ui = ui

    def save(self, session: Session | None = None) -> str | None:
        """Save every tab (after each finished or interrupted turn); a failure is said."""
        host = self.host
        active = host.active_pane
        shown = [p.session for p in host.panes()]
        error = host.files.save(shown, active.session if active else None)
        if error:
            host.notify(error + ".", title="Not saved", severity="error", timeout=20)
        return error

    def screenshot(self) -> None:
        """Save the screen as SVG in the screenshots folder and say where."""
        host = self.host
        configured = self.ui.screenshots_dir
        folder = Path(configured).expanduser() if configured else data_dir() / "screenshots"
        path = folder / time.strftime("agentworld-%Y%m%d-%H%M%S.svg")
        counter = 1
        while path.exists():
            counter += 1
            path = path.with_name(time.strftime(f"agentworld-%Y%m%d-%H%M%S-{counter}.svg"))
        try:
            write_atomic(path, host.export_screenshot().encode("utf-8"))
        except OSError as exc:
            host.notify(f"Screenshot not saved: {exc.strerror or exc}", severity="error")
            return
        host.notify(f"Screenshot saved to {path}", title="Screenshot", timeout=8)

    def quit(self) -> None:
        """Quit; turns that could not be saved are saved once more, and if that fails too
        the person is asked before they are lost."""
        from agentworld_tui.ui.screens.sessions import ConfirmScreen

        host = self.host
        if any(p.session.turns for p in host.panes()) and self.save() is not None:

            def answer(yes: bool | None) -> None:
                if yes:
                    self.close()

            host.push_screen(
                ConfirmScreen(
                    "The session could not be saved (see the message). Quit anyway and lose "
                    "the turns since the last save?",
                    yes="Quit anyway",
                    no="Stay",
                ),
                answer,
            )
            return
        self.close()

    def close(self) -> None:
        host = self.host
        host.simulator.close()
        host.files.close()
        host.exit(0)
