"""Driving one domain's tab of the real app with Pilot, on a scripted tiny model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.text import Text

from agentworld_tui.config import Settings
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.base import DomainPane

P = TypeVar("P", bound=DomainPane)


def answer(observation: str, reasoning: str = "The agent acts.") -> str:
    """A scripted model's whole output: reasoning, then the predicted observation."""
    return f"{reasoning}</think><predicted_observation>{observation}</predicted_observation>"


def scripted(path: Path, observation: str, reasoning: str = "The agent acts.") -> Path:
    """A tiny model that always predicts ``observation``; its context fits the long system
    prompts of the tool domains (the scripted vocabulary spends a token per byte)."""
    from ggufgen import write_scripted_model

    return write_scripted_model(path, answer(observation, reasoning), n_ctx_train=32768)


def make_app(model: Path | None) -> AgentWorldApp:
    settings = Settings()
    settings.model.threads = 2
    if model is not None:
        settings.model.path = str(model)
    return AgentWorldApp(settings, offer_models=False, offer_resume=False)


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def open_tab(app: AgentWorldApp, pilot: Any, name: str, kind: type[P]) -> P:
    """Switch to a domain's tab once every tab is built (and the model loaded, when there
    is one): while the tabs are built after the first frame, the tab bar is still changing."""
    await asyncio.wait_for(app.tabs_ready.wait(), 30)
    if app.engine is not None:
        await asyncio.wait_for(app.model_ready.wait(), 30)
    await pilot.pause()

    def shown() -> bool:
        if not isinstance(app.active_pane, kind):
            app.tabs().active = f"tab-{name}"  # again, in case the first start reset it
            return False
        return True

    await wait_for(pilot, shown, timeout=10)
    await pilot.pause()
    pane = app.active_pane
    assert isinstance(pane, kind), pane
    return pane


async def serve_to_agent(app: AgentWorldApp, pilot: Any) -> str:
    """Ctrl+B in the tab on show, then Y: the tab is served to agents; its URL, once the
    agent screen is up."""
    from agentworld_tui.ui.screens.agent import AgentScreen
    from agentworld_tui.ui.screens.sessions import ConfirmScreen

    pane = app.active_pane
    assert pane is not None
    await pilot.press("ctrl+b")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    await pilot.press("y")
    await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
    return app.serving[pane.domain.name].url


async def agent_done(app: AgentWorldApp, pilot: Any) -> None:
    """Escape from the agent screen (the tab stays served)."""
    from agentworld_tui.ui.screens.agent import AgentScreen

    await pilot.press("escape")
    await wait_for(pilot, lambda: not isinstance(app.screen, AgentScreen))


async def finished(pilot: Any, pane: DomainPane, turns: int = 1) -> None:
    await wait_for(pilot, lambda: len(pane.session.turns) >= turns and not pane.busy)


def error_text(pane: DomainPane) -> str:
    return str(pane.query_one("#action-error").render())


def styled(lines: list[Text]) -> bool:
    """Whether any line carries colour (a lexer ran over it)."""
    return any(span.style for line in lines for span in line.spans)


def view_lines(pane: DomainPane) -> list[Text]:
    view = pane.screen_view
    return [view.line(i) for i in range(view.line_count)]
