"""Plays a demo script into the running app through Textual's pilot: real key presses at a
human pace, each turn awaited to its end, an optional SVG after each action.

Used by ``agentworld demo`` and by ``screenshots/make.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, Static, TextArea

from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.store import write_atomic

if TYPE_CHECKING:
    from agentworld_tui.ui.app import AgentWorldApp
    from agentworld_tui.ui.demo_script import DemoAction, DemoScript, DemoTab

POLL_SECONDS = 0.05
MODEL_TIMEOUT = 900.0
"""Waiting this long for a model to load means something is wrong."""


class DemoError(Exception):
    """The demo cannot go on; the message says which step and why."""


@dataclass
class DemoOutcome:
    screenshots: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Turns that ended without an answer (the run went on)."""
    error: str = ""
    """Why the demo stopped early ("" when it ran to the end)."""


def key_for(char: str) -> str:
    """The pilot key name that types ``char``."""
    if char == "\n":
        return "enter"
    return char


class DemoPlayer:
    def __init__(
        self,
        script: DemoScript,
        *,
        screenshots: Path | None = None,
        quit_at_end: bool = True,
        hide_notifications: bool = False,
        before_tab: Callable[[AgentWorldApp, DemoTab], Awaitable[None]] | None = None,
    ) -> None:
        self.script = script
        self.screenshots = screenshots
        self.quit_at_end = quit_at_end
        self.hide_notifications = hide_notifications
        """Clear toasts before each screenshot (for pictures of the panes themselves)."""
        self.before_tab = before_tab
        """Called once a tab is shown, before its first action (screenshots/make.py swaps
        the scripted model there)."""
        self.outcome = DemoOutcome()
        self._shot = 0

    async def play(self, pilot: Pilot[object]) -> None:
        """The app's auto-pilot: never raises, the outcome says how it went."""
        from agentworld_tui.ui.app import AgentWorldApp

        app = pilot.app
        assert isinstance(app, AgentWorldApp)
        try:
            await self._play(pilot, app)
        except DemoError as exc:
            self.outcome.error = str(exc)
            app.exit(1)
            return
        except Exception as exc:  # the app must close even when a step breaks
            self.outcome.error = f"{type(exc).__name__}: {exc}"
            app.exit(1)
            return
        if self.quit_at_end:
            app.exit(0)

    async def _play(self, pilot: Pilot[object], app: AgentWorldApp) -> None:
        await self._wait_for_model(pilot, app)
        await pilot.pause(self.script.start_pause)
        for tab in self.script.tabs:
            pane = await self._show_tab(pilot, app, tab)
            for number, action in enumerate(tab.actions, 1):
                await self._act(pilot, pane, action, f"{tab.domain} action {number}")
                await pilot.pause(self.script.pause if action.pause is None else action.pause)
                if self.screenshots is not None:
                    await self.save(pilot, app, f"{tab.domain}-{number}")
            if not tab.actions and self.screenshots is not None:
                await pilot.pause(self.script.pause)
                await self.save(pilot, app, tab.domain)

    async def _wait_for_model(self, pilot: Pilot[object], app: AgentWorldApp) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MODEL_TIMEOUT
        while not app.model_ready.is_set():
            problem = app.simulator.problem()
            if problem:
                raise DemoError(problem)
            if loop.time() > deadline:
                raise DemoError("the model did not load in time")
            await pilot.pause(POLL_SECONDS)

    async def _show_tab(self, pilot: Pilot[object], app: AgentWorldApp, tab: DemoTab) -> DomainPane:
        pane = app.pane_for(tab.domain)
        if pane is None:
            raise DemoError(f"the app has no {tab.domain} tab")
        app.tabs().active = f"tab-{tab.domain}"
        await pilot.pause()
        if tab.scenario:
            from agentworld_tui.world.prompts import load_scenarios
            from agentworld_tui.world.session import new_session

            scenario = next(s for s in load_scenarios(tab.domain)[0] if s.name == tab.scenario)
            pane.replace_session(new_session(pane.domain, scenario)[0])
        if self.before_tab is not None:
            await self.before_tab(app, tab)
        focus = getattr(pane, "focus_editor", None)
        if callable(focus):
            focus()
        await pilot.pause()
        return pane

    async def _act(
        self, pilot: Pilot[object], pane: DomainPane, action: DemoAction, where: str
    ) -> None:
        send = "ctrl+s"
        if action.text:
            field, text = self._field(pane, action.text, where)
            field.focus()
            if isinstance(field, Input):
                field.value = ""
                send = "enter"
            elif isinstance(field, TextArea):
                field.text = ""
            await pilot.pause()
            delay = 1 / self.script.chars_per_second if self.script.chars_per_second else 0.0
            for char in text.replace("\t", "    "):
                await pilot.press(key_for(char))
                if delay:
                    await asyncio.sleep(delay)
        before = len(pane.session.turns)
        for key in action.press if action.press is not None else (send,):
            await pilot.press(key)
        await pilot.pause()
        if not pane.busy and len(pane.session.turns) == before:
            error = pane.query_one("#action-error", Static)
            if not error.has_class("hidden"):
                raise DemoError(f"{where}: the tab refused it: {error.render()!s}")
            return  # keys that start no turn (a queued line, say)
        while pane.busy:
            await pilot.pause(POLL_SECONDS)
        turn = pane.session.turns[-1]
        if turn.status in ("error", "no_answer"):
            self.outcome.warnings.append(f"{where}: {turn.note or turn.status}")

    def _field(self, pane: DomainPane, text: str, where: str) -> tuple[Widget, str]:
        """Where the action is typed, and what is typed there.

        A tool-call tab (MCP, Search, SWE) has a tool list and an arguments editor: the
        tool is picked from the list and only the arguments are typed. Elsewhere the text
        goes into the tab's action editor as written.
        """
        pick = getattr(pane, "pick", None)
        arguments = getattr(pane, "arguments", None)
        if callable(pick) and isinstance(arguments, Widget):
            try:
                call = pane.domain.parse_action(text, pane.session.scenario)
            except ActionError as exc:
                raise DemoError(f"{where}: the tab refused it: {exc}") from None
            pick(call.payload["name"])
            return arguments, json.dumps(call.payload["arguments"], ensure_ascii=False)
        focus = getattr(pane, "focus_editor", None)
        if callable(focus):
            focus()
        field = pane.app.focused
        if field is None or pane not in field.ancestors:
            raise DemoError(f"{where}: the {pane.domain.title} tab has no editor to type into")
        if isinstance(field, Input) and "\n" in text:
            raise DemoError(f"{where}: this tab's editor is one line; the action has several")
        return field, text

    async def save(self, pilot: Pilot[object], app: AgentWorldApp, name: str) -> Path:
        """Save the screen as ``NN-name.svg`` in the screenshots folder."""
        assert self.screenshots is not None
        if self.hide_notifications:
            app.clear_notifications()
            await pilot.pause()
        self._shot += 1
        path = self.screenshots / f"{self._shot:02d}-{name}.svg"
        try:
            write_atomic(path, app.export_screenshot(title=f"agentworld · {name}").encode())
        except OSError as exc:
            raise DemoError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.outcome.screenshots.append(path)
        return path
