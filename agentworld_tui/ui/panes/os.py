"""OS: a computer-use agent's Python code against a desktop's accessibility tree.

The task instruction stays in view above the tree, the code is written in a Python editor
(checked by compiling, never run), and each predicted tree replaces the last, highlighted
as XML when it is written that way.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Static

from agentworld_tui.domains.os_desktop import SPECIAL_ACTIONS, OsDomain, task_instruction
from agentworld_tui.ui.highlight import highlight
from agentworld_tui.ui.panes.generic import ActionEditor, GenericPane
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Turn


class OsPane(GenericPane):
    DEFAULT_CSS = """
    OsPane #instruction { height: auto; max-height: 3; padding: 0 1; color: $accent; }
    OsPane #specials { height: 1; }
    OsPane #specials Button { margin: 0 1 0 0; width: auto; min-width: 6; }
    OsPane ActionEditor.-invalid { border: round $error; }
    """

    domain: OsDomain

    def compose_screen(self) -> ComposeResult:
        yield Static(id="instruction")
        yield from super().compose_screen()

    def compose_editor(self) -> ComposeResult:
        editor = ActionEditor(language="python", id="action-editor", soft_wrap=True)
        editor.border_title = "Python (pyautogui, app helpers) · Ctrl+S sends"
        yield editor
        with Horizontal(id="specials"):
            for special in SPECIAL_ACTIONS:
                yield Button(special, id=f"special-{special.lower()}", compact=True)

    def show_session(self) -> None:
        super().show_session()
        instruction = task_instruction(self.session.scenario)
        line = Text("Task: ", style="bold")
        line.append(instruction or "(none given: Ctrl+E sets the scenario)")
        self.query_one("#instruction", Static).update(line)

    def send_text(self) -> None:
        try:
            action = self.domain.parse_action(self.editor.text, self.session.scenario)
        except ActionError as exc:
            self.editor.add_class("-invalid")
            self.show_error(str(exc))
            return
        self.editor.remove_class("-invalid")
        self.send(action)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id or ""
        if button.startswith("special-"):
            event.stop()
            self.editor.text = button.removeprefix("special-").upper()
            self.send_text()

    def highlight_observation(self, text: str) -> list[Text]:
        lexer = "xml" if text.lstrip().startswith("<") else self.domain.lexer
        return highlight(text, lexer)

    def highlight_turn(self, turn: Turn) -> list[Text]:
        text = sanitize(turn.observation)
        return highlight(text, self.domain.observation_lexer(turn.action, text))
