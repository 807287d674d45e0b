"""Child process of bench/startup.py: run an app on a terminal until its first frame.

When Textual has drawn the first frame it sends the app a Ready event; a handler added to
``App`` itself (so it runs for any app, whatever its own handlers) writes one byte to the
file descriptor the parent passed and exits (at once, with ``BENCH_EXIT_AT_READY`` set, so
that an instruction count ends at the first frame). The handler is added the moment
``textual.app`` is first imported, by whichever app imports it, so each app starts exactly
as it does on its own (the import happens where the app does it). Which app:
``agentworld`` (the real command line, ``agentworld_tui.cli.main([])``, with no model
configured) or ``minimal`` (a Textual app with one line of text).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any


def first_frame(self: Any) -> None:
    os.write(int(os.environ["BENCH_READY_FD"]), b"1")
    if os.environ.get("BENCH_EXIT_AT_READY"):  # count nothing after the first frame
        os._exit(0)
    self.exit()


class ReadyHook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``textual.app`` as usual, then adds the Ready handler once it is loaded."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "textual.app":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        assert spec is not None and spec.loader is not None
        self.loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        module.App.on_ready = first_frame


def main() -> int:
    which = sys.argv[1]
    sys.meta_path.insert(0, ReadyHook())
    if which == "minimal":
        from textual.app import App, ComposeResult
        from textual.widgets import Static

        class Minimal(App[None]):
            def compose(self) -> ComposeResult:
                yield Static("hello")

        Minimal().run()
        return 0
    from agentworld_tui.cli import main as agentworld

    return agentworld([])


if __name__ == "__main__":
    raise SystemExit(main())
