"""Snapshots of each domain's pane with its first scenario loaded and one turn answered by
a scripted model (update with `pytest --snapshot-update`). Timing figures in the status
bar differ run to run, so they are fixed before each snapshot."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pane_driver import finished, make_app, open_tab, scripted
from snapshotkit import settled
from test_panes_android import INBOX
from test_panes_search import RESULTS
from test_panes_swe_os import TREE, VIEWED
from test_panes_web import NEXT_PAGE

from agentworld_tui.domains.web import element_by_bid
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.panes.android import AndroidPane
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.panes.mcp import McpPane
from agentworld_tui.ui.panes.os import OsPane
from agentworld_tui.ui.panes.search import SearchPane
from agentworld_tui.ui.panes.swe import SwePane
from agentworld_tui.ui.panes.web import WebPane

MCP_RESULT = '{"content": [{"type": "text", "text": "[FILE] inbox.md\\n[DIR] projects"}]}'


@pytest.fixture(autouse=True)
def _fixed_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWORLD_CONFIG_DIR", "/tmp/agentworld-snapshots/config")
    monkeypatch.setenv("AGENTWORLD_DATA_DIR", str(tmp_path_factory.mktemp("data")))


async def act_mcp(pane: Any, pilot: Any) -> None:
    pane.pick("list_directory")
    pane.arguments.text = '{\n  "path": "/home/maya/notes"\n}'
    pane.arguments.focus()
    await pilot.press("ctrl+s")


async def act_web(pane: Any, pilot: Any) -> None:
    searchbox = element_by_bid(pane.page, "a15")
    assert searchbox is not None
    await pilot.click(pane.page_view, offset=(3, searchbox.line))
    await pilot.press(*"tent", "enter")


async def act_android(pane: Any, pilot: Any) -> None:
    frame = pane.wireframe.frame
    box = frame.cells(frame.find("Sign in"))
    await pilot.click(pane.wireframe, offset=((box[0] + box[2]) // 2, box[1]))
    await pilot.press("enter")


async def act_search(pane: Any, pilot: Any) -> None:
    pane.pick("web_search")
    pane.arguments.text = '{"query": ["Kvaløysletta footbridge architect"]}'
    await pilot.press("ctrl+s")


async def act_swe(pane: Any, pilot: Any) -> None:
    pane.pick("str_replace_editor")
    pane.arguments.text = '{"command": "view", "path": "/testbed/app.py"}'
    await pilot.press("ctrl+s")


async def act_os(pane: Any, pilot: Any) -> None:
    pane.editor.text = "import pyautogui\npyautogui.hotkey('ctrl', 's')"
    pane.editor.focus()
    await pilot.press("ctrl+s")


Act = Callable[[Any, Any], Awaitable[None]]
CASES: dict[str, tuple[type[DomainPane], str, Act]] = {
    "mcp": (McpPane, MCP_RESULT, act_mcp),
    "web": (WebPane, NEXT_PAGE, act_web),
    "android": (AndroidPane, INBOX, act_android),
    "search": (SearchPane, RESULTS, act_search),
    "swe": (SwePane, VIEWED, act_swe),
    "os": (OsPane, TREE, act_os),
}


@pytest.mark.parametrize("domain", list(CASES))
def test_pane_after_a_turn(snap_compare, tmp_path: Path, domain: str) -> None:  # type: ignore[no-untyped-def]
    kind, observation, act = CASES[domain]
    model = scripted(tmp_path / f"{domain}.gguf", observation, "The agent acts on the screen.")
    app: AgentWorldApp = make_app(model)
    app.animation_level = "none"  # the tab underline would otherwise be caught sliding

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await open_tab(app, pilot, domain, kind)
        await act(pane, pilot)
        await finished(pilot, pane)
        assert pane.session.turns[0].status == "complete"
        pane.status.tokens_per_second = 42.0
        pane.status.elapsed = 1.5
        app.show_status()
        # Focus on the screen: an editor's blinking cursor would differ run to run.
        pane.screen_view.focus()
        pane.screen_view.scroll_end(animate=False, immediate=True, x_axis=False)
        await settled(app, pilot)

    assert snap_compare(app, run_before=run, terminal_size=(120, 36))
