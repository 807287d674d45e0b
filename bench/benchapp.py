"""The real app with one addition for the benches: an event set when a turn ends, so a
bench waits for it instead of polling (polling runs on the main thread the bench measures).
It starts as ``agentworld`` does: the cyclic collector off until the tabs are built, then
what start-up left alive frozen (``cli.cmd_app``, ``ui.app.collect_after_start``)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any


def bench_app() -> Any:
    """The app class, with ``turn_ended`` set when a turn ends."""
    from agentworld_tui.ui import app as app_module

    class BenchApp(app_module.AgentWorldApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            gc.disable()  # as cmd_app does; the app turns it back on once its tabs are built
            super().__init__(*args, **kwargs)
            self.turn_ended = asyncio.Event()

        def on_domain_pane_turn_finished(self, event: Any) -> None:  # and the app's own
            self.turn_ended.set()

    return BenchApp
