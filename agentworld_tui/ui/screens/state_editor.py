"""Pick a ready scenario or write your own starting state."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static

from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.prompts import load_scenarios

MAX_STATE_CHARS = 2_000_000


class StateEditor(ModalScreen[Scenario | None]):
    DEFAULT_CSS = """
    StateEditor { align: center middle; }
    StateEditor > Vertical {
        width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1;
    }
    StateEditor TextArea { height: 1fr; }
    StateEditor #description { height: 6; }
    StateEditor #buttons { height: auto; align-horizontal: right; }
    StateEditor #warning { color: $warning; height: auto; }
    StateEditor #editor-error { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "apply", "Start", priority=True),
    ]

    def __init__(self, domain: str, current: Scenario, has_turns: bool) -> None:
        super().__init__()
        self.domain = domain
        self.current = current
        self.has_turns = has_turns
        self.scenarios, self.problems = load_scenarios(domain)

    def compose(self) -> ComposeResult:
        options = [(s.title, s.name) for s in self.scenarios]
        with Vertical():
            yield Label("Scenario")
            yield Select(options, prompt="Keep the current one", id="scenario", allow_blank=True)
            yield Label("Description (what the environment is)")
            yield Editor(self.current.description, id="description", soft_wrap=True)
            yield Label("Starting state (what is on screen before the first action)")
            yield Editor(self.current.state, id="state", soft_wrap=False)
            if self.has_turns:
                yield Static(
                    "Starting again replaces this tab's turns with a new session.",
                    id="warning",
                )
            yield Static("", id="editor-error")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Start (Ctrl+S)", id="apply", variant="primary")

    def on_mount(self) -> None:
        for problem in self.problems:
            self.notify(problem, severity="warning")

    def on_select_changed(self, event: Select.Changed) -> None:
        chosen = next((s for s in self.scenarios if s.name == event.value), None)
        if chosen is not None:
            self.query_one("#description", Editor).text = chosen.description
            self.query_one("#state", Editor).text = chosen.state

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_apply(self) -> None:
        state = self.query_one("#state", Editor).text
        if len(state) > MAX_STATE_CHARS:
            self.query_one("#editor-error", Static).update(
                f"The state is {len(state):,} characters; the limit is {MAX_STATE_CHARS:,}."
            )
            return
        value = self.query_one("#scenario", Select).value
        chosen = next((s for s in self.scenarios if s.name == value), self.current)
        self.dismiss(
            Scenario(
                name=chosen.name,
                title=chosen.title,
                description=self.query_one("#description", Editor).text,
                state=state,
                extras=dict(chosen.extras),
            )
        )
