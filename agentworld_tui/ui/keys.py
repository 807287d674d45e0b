"""The app's keys: one table that the bindings, the footer, the help screen and the
command palette all come from."""

from __future__ import annotations

from textual.binding import Binding

from agentworld_tui.domains import DOMAINS

# key, action (the app's ``action_`` method of that name), description, tooltip; every one
# has priority (editors cannot swallow them) and, but for help and quit, acts on the main
# screen only. The footer shows FOOTER_KEYS only, the same whatever has the focus, within
# 80 columns; F1 and the palette list all.
KEYS: list[tuple[str, str, str, str]] = [
    ("ctrl+r", "retry", "Retry", "Ask again for the last turn"),
    ("ctrl+g", "answer_now", "Answer now", "End the reasoning and answer"),
    ("ctrl+t", "toggle_reasoning", "Reasoning", "Show or hide the reasoning"),
    ("ctrl+u", "raw_output", "Raw output", "The last turn's output as the model wrote it"),
    ("ctrl+e", "edit_state", "Start state", "Pick a scenario or edit the starting state"),
    ("ctrl+n", "new_session", "New", "Start this tab afresh (the old one is kept)"),
    ("ctrl+o", "sessions", "Sessions", "Open, rename or delete saved sessions"),
    ("f6", "undo", "Undo turn", "Take back the last turn (it stays on a branch)"),
    ("shift+f6", "redo", "Redo turn", "Bring back the turn undone last"),
    ("f7", "branches", "Branches", "Switch, regenerate or edit earlier turns"),
    ("f8", "replay", "Replay", "Open AgentWorldBench trajectories"),
    ("f3", "models", "Models", "Choose, download or switch the model"),
    ("f4", "toggle_thinking", "Thinking", "Thinking on/off for this tab"),
    ("f9", "control", "Control", "Inject a perturbation into the next turns"),
    ("f10", "world", "World", "Attach or edit a fictional world"),
    ("f11", "judge", "Judge", "Judge the last turn against a reference"),
    ("ctrl+b", "agent", "Agent", "Serve this tab to an agent (MCP); watch and steer it"),
    ("shift+f9", "twin", "Twin", "Twin this tab with reality: a sandbox or the real server"),
    ("shift+f10", "twin_view", "Twin view", "Prediction and reality side by side, or a diff"),
    ("shift+f11", "twin_summary", "Twin summary", "Divergence figures and the task's check"),
    ("alt+right,ctrl+pagedown", "next_tab", "Next tab", "Show the next tab"),
    ("alt+left,ctrl+pageup", "previous_tab", "Previous tab", "Show the previous tab"),
]
FOOTER_KEYS = {"retry", "branches", "models"}
TAB_KEYS = [(f"alt+{i}", f"show_tab({i})", DOMAINS.title(n)) for i, n in enumerate(DOMAINS, 1)]
NARROW = 100
MAIN_SCREEN_ACTIONS = {action for _, action, _, _ in KEYS} | {"show_tab"}

BINDINGS = [
    Binding("escape", "stop", "Stop", tooltip="Stop generating; what came stays"),
    *(Binding(k, a, d, tooltip=t, show=a in FOOTER_KEYS, priority=True) for k, a, d, t in KEYS),
    *(
        Binding(k, a, d, tooltip=f"Show the {d} tab", show=False, priority=True)
        for k, a, d in TAB_KEYS
    ),
    Binding("f12", "screenshot", "Screenshot", tooltip="Save the screen as SVG", show=False),
    Binding("f1", "help", "Help", tooltip="Keys and commands"),
    Binding(
        "ctrl+q",
        "quit",
        "Quit",
        tooltip="Quit (every turn is saved)",
        show=False,
        priority=True,
    ),
]
