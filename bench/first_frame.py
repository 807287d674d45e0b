"""Child process of bench/startup.py: run an app on a terminal until its first frame.

When Textual has drawn the first frame it sends the app a Ready event; a handler added to
``App`` itself (so it runs for any app, whatever its own handlers) writes one byte to the
file descriptor the parent passed and exits. Which app: ``agentworld`` (the real command
line, ``agentworld_tui.cli.main([])``, with no model configured) or ``minimal`` (a Textual
app with one line of text).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    which = sys.argv[1]
    ready_fd = int(os.environ["BENCH_READY_FD"])
    from textual.app import App

    def first_frame(self: App[object]) -> None:
        os.write(ready_fd, b"1")
        self.exit()

    App.on_ready = first_frame  # type: ignore[attr-defined]
    if which == "minimal":
        from textual.app import ComposeResult
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
