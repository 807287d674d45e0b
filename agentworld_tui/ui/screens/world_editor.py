"""Edit the fictional world a session is attached to: start from a ready world or a blank
one, edit its TOML, see the instruction every turn will carry, save it as a file.

Dismisses with a ``WorldChoice`` (its ``world`` is None to detach the session's world) or
None when cancelled. The pane then sets ``session.world = choice.world``.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static

from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.fictional_world import (
    FictionalWorld,
    WorldError,
    blank_world,
    list_worlds,
    parse_world,
    save_world,
)

BLANK = "__blank__"


@dataclass(frozen=True)
class WorldChoice:
    world: FictionalWorld | None
    """The world to attach; None detaches the session's world."""


class WorldEditor(ModalScreen[WorldChoice | None]):
    DEFAULT_CSS = """
    WorldEditor { align: center middle; }
    WorldEditor > Vertical {
        width: 95%; height: 95%; border: thick $primary; background: $surface; padding: 0 1;
    }
    WorldEditor #panes { height: 1fr; }
    WorldEditor #toml { width: 1fr; height: 1fr; }
    WorldEditor #preview-box { width: 1fr; height: 1fr; border: round $panel; }
    WorldEditor #buttons { height: auto; align-horizontal: right; }
    WorldEditor #world-error { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "attach", "Attach", priority=True),
    ]

    def __init__(self, current: FictionalWorld | None = None) -> None:
        super().__init__()
        self.current = current
        self.worlds, self.problems = list_worlds()

    def compose(self) -> ComposeResult:
        options = [("A blank world", BLANK)] + [(w.title, w.name) for w in self.worlds]
        with Vertical():
            yield Label("Start from")
            yield Select(options, prompt="Keep what is below", id="start", allow_blank=True)
            with Horizontal(id="panes"):
                yield Editor(
                    self.current.to_toml() if self.current else blank_world(),
                    id="toml",
                    soft_wrap=True,
                )
                with VerticalScroll(id="preview-box"):
                    yield Static("", id="preview", markup=False)
            yield Static("", id="world-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Detach", id="detach", disabled=self.current is None)
                yield Button("Save as file", id="save")
                yield Button("Attach (Ctrl+S)", id="attach", variant="primary")

    def on_mount(self) -> None:
        for problem in self.problems:
            self.notify(problem, severity="warning", markup=False)
        self._refresh_preview()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.value == BLANK:
            text = blank_world()
        else:
            chosen = next((w for w in self.worlds if w.name == event.value), None)
            if chosen is None:
                return
            text = chosen.to_toml()
        self.query_one("#toml", Editor).text = text

    def on_text_area_changed(self, event: Editor.Changed) -> None:
        self._refresh_preview()

    def _parsed(self) -> FictionalWorld | None:
        error = self.query_one("#world-error", Static)
        try:
            world = parse_world(self.query_one("#toml", Editor).text, "world")
        except WorldError as exc:
            error.update(str(exc))
            return None
        error.update("")
        return world

    def _refresh_preview(self) -> None:
        world = self._parsed()
        preview = self.query_one("#preview", Static)
        preview.update(world.instruction() if world else "(fix the world to see what turns carry)")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "attach":
            self.action_attach()
        elif event.button.id == "detach":
            self.dismiss(WorldChoice(None))
        elif event.button.id == "save":
            self.action_save_file()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_save_file(self) -> None:
        world = self._parsed()
        if world is None:
            return
        try:
            path = save_world(world)
        except OSError as exc:
            self.query_one("#world-error", Static).update(f"cannot save: {exc}")
            return
        self.notify(f"saved {path}", markup=False)

    def action_attach(self) -> None:
        world = self._parsed()
        if world is not None:
            self.dismiss(WorldChoice(world))
