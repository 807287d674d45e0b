"""Choose a control instruction for a pane: a preset from the domain's library, or free text,
for the next turn only or for every turn until removed.

Dismisses with a ``ControlChoice`` (its ``control`` is None to remove the pane's
instruction) or None when cancelled. The pane then calls ``session.control = choice.control``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, OptionList, Static
from textual.widgets.option_list import Option

from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.perturbation import (
    ControlError,
    ControlInstruction,
    Perturbation,
    control_instruction,
    load_perturbations,
)


@dataclass(frozen=True)
class ControlChoice:
    control: ControlInstruction | None
    """The instruction to set; None removes the pane's instruction."""


class PerturbationPicker(ModalScreen[ControlChoice | None]):
    DEFAULT_CSS = """
    PerturbationPicker { align: center middle; }
    PerturbationPicker > Vertical {
        width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1;
    }
    PerturbationPicker #presets { height: 1fr; min-height: 6; }
    PerturbationPicker #instruction { height: 8; }
    PerturbationPicker #buttons { height: auto; align-horizontal: right; }
    PerturbationPicker #picker-error { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "apply", "Apply", priority=True),
    ]

    def __init__(self, domain: str, current: ControlInstruction | None = None) -> None:
        super().__init__()
        self.domain = domain
        self.current = current
        self.presets, self.problems = load_perturbations(domain)
        self.chosen: Perturbation | None = next(
            (p for p in self.presets if current is not None and p.name == current.preset), None
        )

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Presets (Enter fills the instruction below)")
            yield OptionList(
                *(Option(self._label(p), id=p.name) for p in self.presets), id="presets"
            )
            yield Label("Control instruction (sent with the turn; edit freely)")
            yield Editor(
                self.current.text if self.current else "", id="instruction", soft_wrap=True
            )
            yield Checkbox(
                "Every turn until removed (otherwise the next turn only)",
                self.current.persistent if self.current else False,
                id="persistent",
            )
            yield Static("", id="picker-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Remove", id="remove", disabled=self.current is None)
                yield Button("Apply (Ctrl+S)", id="apply", variant="primary")

    @staticmethod
    def _label(preset: Perturbation) -> Text:
        label = Text(preset.title, style="bold")
        if preset.description:
            label.append("  " + preset.description, style="dim")
        return label

    def on_mount(self) -> None:
        for problem in self.problems:
            self.notify(problem, severity="warning", markup=False)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        preset = next((p for p in self.presets if p.name == event.option.id), None)
        if preset is not None:
            self.chosen = preset
            self.query_one("#instruction", Editor).text = preset.instruction

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        elif event.button.id == "remove":
            self.dismiss(ControlChoice(None))
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_apply(self) -> None:
        text = self.query_one("#instruction", Editor).text
        persistent = self.query_one("#persistent", Checkbox).value
        preset = ""
        if self.chosen is not None and " ".join(text.split()) == self.chosen.instruction:
            preset = self.chosen.name
        try:
            control = control_instruction(text, persistent=persistent, preset=preset)
        except ControlError as exc:
            self.query_one("#picker-error", Static).update(f"{exc}.")
            return
        self.dismiss(ControlChoice(control))
