"""The tabs' screen."""

from __future__ import annotations

from agentworld_tui.ui.textual_private import QuietStartScreen


class MainScreen(QuietStartScreen):
    """The tabs' screen. It starts with the first tab's command line focused, so the first
    frame shows where typing goes. (Textual would focus the first focusable widget, the tab
    bar, and restyle it twice when the editor took the focus after the first frame.)"""

    AUTO_FOCUS = "#keystrokes"  # the terminal tab's command line (the first tab)
