"""A tab served to an agent from inside the app: a real MCP client from the SDK calls the
tab's tools over HTTP while Pilot drives the app, on scripted models in the real llama.cpp."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ggufgen import write_scripted_model
from mcp import Client
from test_app import _isolated, long_reasoning, ls_model, make_app, pane, wait_for
from textual.widgets import Static
from textual.widgets._toast import Toast

from agentworld_tui.ui.agent_serving import TabServing
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.screens.agent import AgentScreen, HeldScreen
from agentworld_tui.ui.screens.sessions import ConfirmScreen
from agentworld_tui.ui.widgets.editor import Editor

__all__ = ["_isolated", "ls_model"]  # fixtures from test_app: config and data in tmp_path

PREDICTED = "user@devbox:~/project$ ls\nREADME.md  src\nuser@devbox:~/project$"
EDITED = "user@devbox:~/project$ ls\nls: cannot open directory '.': Permission denied"


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(tmp_path_factory.mktemp("m") / "long.gguf", long_reasoning(3000))


def text_of(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def serve_tab(app: AgentWorldApp, pilot: Any) -> TabServing:
    """Ctrl+B in the tab on show, then Y: it is served, and the agent screen says how to
    connect."""
    await pilot.press("ctrl+b")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    assert not app.serving  # nothing listens before the person says so
    await pilot.press("y")
    await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
    serving = app.serving[pane(app).domain.name]
    shown = str(app.screen.query_one("#connect", Static).render())
    assert serving.url.startswith("http://127.0.0.1:") and serving.url in shown
    assert f"claude mcp add --transport http agentworld-terminal {serving.url}" in shown
    assert "send_keystrokes" in shown
    return serving


async def call(url: str, keystrokes: str) -> Any:
    async with Client(url) as agent:
        return await agent.call_tool("send_keystrokes", {"keystrokes": keystrokes})


def messages(error: BaseException) -> list[str]:
    """The messages of an error and, for a group (the SDK's task groups), of its leaves."""
    if isinstance(error, BaseExceptionGroup):
        return [m for inner in error.exceptions for m in messages(inner)]
    return [str(error)]


def saved_turns(app: AgentWorldApp) -> list[dict[str, Any]]:
    path = app.workspace.path
    assert path is not None
    data = json.loads(path.read_text(encoding="utf-8"))
    [tab] = [t for t in data["tabs"] if t["domain"] == "terminal"]
    return list(tab["turns"])


async def test_a_held_observation_is_edited_and_the_agent_gets_the_edit(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        serving = await serve_tab(app, pilot)
        await pilot.click("#hold-next")
        await wait_for(pilot, lambda: serving.hold_mode == "next")
        await pilot.press("escape")
        line = pane(app).query_one("#agent-line", Static)
        assert "waiting for an agent to connect" in str(line.render())

        agent = asyncio.create_task(call(serving.url, "ls\n"))
        await wait_for(pilot, lambda: isinstance(app.screen, HeldScreen))
        # The call streamed into the tab as a turn; the prediction is on screen and held.
        await wait_for(pilot, lambda: PREDICTED.splitlines()[1] in pane(app).screen_view.text)
        assert not agent.done()
        assert "held for you" in str(line.render())
        editor = app.screen.query_one(Editor)
        assert editor.text == PREDICTED
        editor.text = EDITED
        await pilot.press("ctrl+s")
        result = await asyncio.wait_for(agent, 30)

        assert text_of(result) == EDITED and not result.is_error
        await wait_for(pilot, lambda: "Permission denied" in pane(app).screen_view.text)
        [turn] = saved_turns(app)
        assert turn["observation"] == EDITED
        assert turn["stats"]["agent"]["predicted"] == PREDICTED
        assert turn["stats"]["agent"]["received"]["result"]["content"][0]["text"] == EDITED
        assert "edited before the agent received it" in turn["note"]
        assert "README.md  src" not in pane(app).screen_view.text  # the edit replaced it
        # The hold was for the next observation only: the second call passes straight on.
        again = await asyncio.wait_for(call(serving.url, "ls\n"), 30)
        assert text_of(again) == PREDICTED
        await wait_for(pilot, lambda: len(saved_turns(app)) == 2)


async def test_the_person_cannot_type_while_an_agent_drives_and_esc_stops_its_call(
    long_model: Path,
) -> None:
    app = make_app(long_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        serving = await serve_tab(app, pilot)
        await pilot.press("escape")
        agent = asyncio.create_task(call(serving.url, "make\n"))
        await wait_for(pilot, lambda: pane(app).busy and "step0" in pane(app).reasoning.view.text)
        assert serving.driving
        await pilot.press("escape")  # stops the agent's call: it gets an interrupted result
        result = await asyncio.wait_for(agent, 30)
        assert result.is_error and "interrupted" in text_of(result)
        await wait_for(pilot, lambda: not pane(app).busy and bool(saved_turns(app)))
        [turn] = saved_turns(app)
        assert turn["status"] == "interrupted" and turn["stats"]["agent"]["received"] is not None

        # An agent still connected? The client above ended its session: the tab is free.
        await wait_for(pilot, lambda: not serving.driving)
        assert "waiting for an agent" in str(pane(app).query_one("#agent-line").render())


async def test_a_connected_agent_keeps_the_person_from_typing(long_model: Path) -> None:
    app = make_app(long_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        serving = await serve_tab(app, pilot)
        await pilot.press("escape")
        async with Client(serving.url) as agent:
            await agent.list_tools()
            await wait_for(pilot, lambda: serving.driving)
            await pilot.press(*"ls", "enter")
            error = pane(app).query_one("#action-error", Static)
            await wait_for(pilot, lambda: "An agent drives this tab" in str(error.render()))
            assert not pane(app).session.turns
            # A second agent is told the tab is taken.
            with pytest.raises(BaseException) as refused:
                await asyncio.wait_for(call(serving.url, "ls\n"), 30)
            assert any("served to another agent" in m for m in messages(refused.value))
        # Stop serving from the agent screen: the line goes, typing works again.
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
        await pilot.click("#stop-serving")
        await wait_for(pilot, lambda: "terminal" not in app.serving)
        assert pane(app).query_one("#agent-line").has_class("hidden")
        assert pane(app).agent is None


async def test_a_perturbation_picked_with_f9_goes_with_the_agents_next_call(
    ls_model: Path,
) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        serving = await serve_tab(app, pilot)
        await pilot.press("escape")
        async with Client(serving.url) as agent:
            await agent.list_tools()
            await wait_for(pilot, lambda: serving.driving)
            await pilot.press("f9")  # allowed while an agent drives the tab
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "PerturbationPicker")
            await pilot.pause(0.1)
            await pilot.press("enter")  # the highlighted preset fills the instruction
            await pilot.pause(0.1)
            picked = app.screen.query_one("#instruction").text.strip()
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: pane(app).session.control is not None)
            await agent.call_tool("send_keystrokes", {"keystrokes": "touch x\n"})
            await wait_for(pilot, lambda: len(saved_turns(app)) == 1)
        [turn] = saved_turns(app)
        assert picked and picked in turn["control"]
        assert turn["control"] in turn["user_message"]
        assert pane(app).session.control is None  # for the next call only


async def test_a_new_session_in_the_tab_stops_serving_it(ls_model: Path) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        serving = await serve_tab(app, pilot)
        await pilot.press("escape")
        url = serving.url
        await asyncio.wait_for(call(url, "ls\n"), 30)
        await wait_for(pilot, lambda: not serving.driving)
        await wait_for(pilot, lambda: not pane(app).busy)  # the turn's last frame is drawn
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: "terminal" not in app.serving)
        assert pane(app).agent is None and not pane(app).session.turns
        with pytest.raises(BaseException) as failed:  # nothing listens there any more
            await asyncio.wait_for(call(url, "ls\n"), 10)
        assert "All connection attempts failed" in messages(failed.value)


@pytest.mark.parametrize("key", ["escape", "enter"])
async def test_ctrl_b_serves_only_once_the_person_confirms(ls_model: Path, key: str) -> None:
    app = make_app(ls_model)
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        shown = str(app.screen.query_one(Static).render())
        assert "127.0.0.1" in shown and "Terminal tab" in shown
        await pilot.press(key)
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        await pilot.pause(0.2)
        assert not app.serving and pane(app).agent is None


async def test_the_agent_screen_at_80x24_is_not_covered_by_a_toast(ls_model: Path) -> None:
    """Its Stop and Close buttons stay in view: the address is on the screen, not in a
    toast over it."""
    app = make_app(ls_model)
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await serve_tab(app, pilot)
        await pilot.pause(0.5)
        toasts = [toast.region for toast in app.screen.query(Toast)]
        dialog = app.screen.query_one("AgentScreen > Vertical").content_region
        for button in ("#edit", "#stop-call", "#stop-serving", "#close"):
            region = app.screen.query_one(button).region
            assert region.area and dialog.contains_region(region), button
            assert not any(toast.overlaps(region) for toast in toasts), button
