"""A tab's history: switch between versions of a turn, bring back an earlier answer,
sample a turn again, or edit an earlier action and branch from there.

Switching and restoring change only what is shown, so they happen here at once; a
regenerated turn or an edited action needs the model, so the screen closes with a
``HistoryEdit`` and the app runs it through the tab as if the action had just been sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Label, Static

from agentworld_tui.ui.screens.sessions import ConfirmScreen
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import HistoryError, Session, Turn

PREVIEW_LINES = 12
CELL_CHARS = 48


@dataclass(frozen=True)
class HistoryEdit:
    """A turn to run again: ``action`` None samples turn ``number`` again; an action
    starts a new branch at ``number`` with it."""

    number: int
    action: Action | None = None


def editable_text(action: Action) -> str:
    """The action as text its domain's ``parse_action`` reads back: the code of an OS
    action, the call of a tool, otherwise the JSON of the payload."""
    payload = action.payload
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        if isinstance(payload.get("code"), str):
            return str(payload["code"])
        if "name" in payload and "arguments" in payload:
            call = {"name": payload["name"], "arguments": payload["arguments"]}
            return json.dumps(call, indent=2, ensure_ascii=False)
    return json.dumps(payload, indent=2, ensure_ascii=False)


def _cell(text: str) -> Text:
    return Text(one_line(text, CELL_CHARS))


def _outcome(turn: Turn) -> Text:
    if turn.status == "pending":
        return Text("running…", style="italic")
    first = next((ln for ln in sanitize(turn.observation).splitlines() if ln.strip()), "")
    if first:
        return _cell(first)
    return Text(f"[{turn.note or turn.status}]", style="yellow")


class TurnTable(DataTable[Text | str]):
    """The shown branch, one row per turn; left and right switch the turn's version."""

    BINDINGS = [
        Binding("left", "version(-1)", "◀ Version", tooltip="The previous version of this turn"),
        Binding("right", "version(1)", "Version ▶", tooltip="The next version of this turn"),
    ]

    def action_version(self, step: int) -> None:
        screen = self.screen
        if isinstance(screen, BranchesScreen):
            screen.switch_version(step)


class BranchesScreen(ModalScreen[HistoryEdit | None]):
    DEFAULT_CSS = """
    BranchesScreen { align: center middle; }
    BranchesScreen > Vertical {
        width: 96%; height: 94%; border: thick $primary; background: $surface; padding: 0 1;
    }
    BranchesScreen #help { height: auto; color: $text-muted; }
    BranchesScreen #turns { height: auto; max-height: 50%; }
    BranchesScreen #preview { height: 1fr; border-top: solid $primary-darken-2; }
    BranchesScreen #branches { height: auto; max-height: 8; }
    BranchesScreen #problem { color: $error; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("g", "regenerate", "Regenerate", tooltip="Sample the selected turn again"),
        Binding("e", "edit", "Edit action", tooltip="Edit the selected action; branch from it"),
        Binding("a", "restore", "Earlier answer", tooltip="Show the last turn's earlier answer"),
        Binding("d", "delete", "Delete branch", tooltip="Delete the selected branch"),
    ]

    def __init__(self, session: Session, changed: Callable[[], None]) -> None:
        super().__init__()
        self.session = session
        self.changed = changed
        """Called after the shown history changed here (redraw the tab, save)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text(
                    f"{self.session.domain.title} history · ◀ ▶ switch version · g regenerate · "
                    "e edit action (new branch) · a earlier answer · Tab: branches, Enter "
                    "switches, d deletes · Esc closes"
                ),
                id="help",
            )
            yield TurnTable(id="turns", cursor_type="row")
            yield Static(id="preview")
            yield Label("Branches")
            yield DataTable(id="branches", cursor_type="row")
            yield Static("", id="problem")

    def on_mount(self) -> None:
        turns = self.query_one("#turns", TurnTable)
        turns.add_columns("#", "Action", "Observation", "Version", "Earlier answers")
        branches = self.query_one("#branches", DataTable)
        branches.add_columns("Branch", "Turns", "Last action", "")
        self.refresh_rows(select=len(self.session.turns) - 1)
        turns.focus()

    # -- rows ---------------------------------------------------------------------------
    def refresh_rows(self, select: int | None = None) -> None:
        table = self.query_one("#turns", TurnTable)
        row = table.cursor_row if select is None else select
        table.clear()
        for turn in self.session.turns:
            table.add_row(
                str(turn.number),
                _cell(turn.action.label),
                _outcome(turn),
                self.version_label(turn.number),
                str(len(turn.attempts)) if turn.attempts else "",
            )
        if self.session.turns:
            table.move_cursor(row=max(0, min(row, len(self.session.turns) - 1)))
        branches = self.query_one("#branches", DataTable)
        branches.clear()
        for branch in sorted(self.session.branches, key=lambda b: b.id):
            last = branch.turns[-1].action.label if branch.turns else "(no turns)"
            shown = Text("shown", style="bold green") if branch.id == self.session.branch_id else ""
            branches.add_row(Text(branch.label), str(len(branch.turns)), _cell(last), shown)
        self.show_preview()

    def version_label(self, number: int) -> str:
        versions = self.session.alternatives(number)
        if len(versions) < 2:
            return ""
        index = next(i for i, b in enumerate(versions) if b.id == self.session.branch_id)
        return f"◀ {index + 1}/{len(versions)} ▶"

    def selected_turn(self) -> Turn | None:
        table = self.query_one("#turns", TurnTable)
        turns = self.session.turns
        if not turns or table.cursor_row < 0:
            return None
        return turns[min(table.cursor_row, len(turns) - 1)]

    def show_preview(self) -> None:
        turn = self.selected_turn()
        preview = Text()
        if turn is not None:
            preview.append(f"Turn {turn.number} action\n", style="bold")
            preview.append(sanitize(editable_text(turn.action)) + "\n")
            preview.append("Observation\n", style="bold")
            lines = sanitize(turn.observation).splitlines()
            preview.append("\n".join(lines[:PREVIEW_LINES]))
            if len(lines) > PREVIEW_LINES:
                preview.append(f"\n… {len(lines) - PREVIEW_LINES} more lines", style="dim")
            if turn.note:
                preview.append(f"\n[{turn.note}]", style="yellow")
        self.query_one("#preview", Static).update(preview)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "turns":
            self.show_preview()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "branches":
            return
        branch = self._selected_branch()
        if branch is not None and branch != self.session.branch_id:
            self._apply(lambda: self.session.switch_branch(branch))

    def _selected_branch(self) -> int | None:
        table = self.query_one("#branches", DataTable)
        ids = sorted(b.id for b in self.session.branches)
        if not ids or table.cursor_row < 0:
            return None
        return ids[min(table.cursor_row, len(ids) - 1)]

    def say(self, message: str) -> None:
        self.query_one("#problem", Static).update(Text(message))

    def _apply(self, edit: Callable[[], object]) -> bool:
        try:
            edit()
        except HistoryError as exc:
            self.say(str(exc))
            return False
        self.say("")
        self.refresh_rows()
        self.changed()
        return True

    # -- editing ------------------------------------------------------------------------
    def switch_version(self, step: int) -> None:
        turn = self.selected_turn()
        if turn is None:
            return
        versions = self.session.alternatives(turn.number)
        if len(versions) < 2:
            self.say(f"Turn {turn.number} has only this version.")
            return
        index = next(i for i, b in enumerate(versions) if b.id == self.session.branch_id)
        target = versions[(index + step) % len(versions)]
        self._apply(lambda: self.session.switch_branch(target.id))

    def action_restore(self) -> None:
        turns = self.session.turns
        if not turns or not turns[-1].attempts:
            self.say("The last turn has no earlier answer.")
            return
        # The oldest comes back and the shown one goes last: pressing again cycles them all.
        self._apply(lambda: self.session.restore_attempt(0))
        table = self.query_one("#turns", TurnTable)
        table.move_cursor(row=len(turns) - 1)

    def action_regenerate(self) -> None:
        turn = self.selected_turn()
        if turn is not None:
            self.dismiss(HistoryEdit(turn.number))

    def action_edit(self) -> None:
        turn = self.selected_turn()
        if turn is None:
            return
        number = turn.number

        def edited(action: Action | None) -> None:
            if action is not None:
                self.dismiss(HistoryEdit(number, action))

        self.app.push_screen(ActionEditScreen(self.session, turn), edited)

    def action_delete(self) -> None:
        branch = self._selected_branch()
        if branch is None:
            return
        if branch == self.session.branch_id:
            self.say("The shown branch cannot be deleted: switch to another one first.")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._apply(lambda: self.session.delete_branch(branch))

        self.app.push_screen(
            ConfirmScreen(f"Delete branch {branch} and the turns only it holds?"), answer
        )

    def action_close(self) -> None:
        self.dismiss(None)


class ActionEditScreen(ModalScreen[Action | None]):
    """An earlier action, editable; it leaves only once its domain accepts it."""

    DEFAULT_CSS = """
    ActionEditScreen { align: center middle; }
    ActionEditScreen > Vertical {
        width: 90%; height: 80%; border: thick $primary; background: $surface; padding: 0 1;
    }
    ActionEditScreen TextArea { height: 1fr; }
    ActionEditScreen #edit-error { color: $error; height: auto; }
    ActionEditScreen #buttons { height: auto; align-horizontal: right; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "apply", "Branch", priority=True),
    ]

    def __init__(self, session: Session, turn: Turn) -> None:
        super().__init__()
        self.session = session
        self.turn = turn

    def compose(self) -> ComposeResult:
        language: str | None = self.session.domain.editor_language
        language = None if language == "text" else language
        with Vertical():
            yield Label(
                f"Turn {self.turn.number}: edit the action. Ctrl+S starts a new branch here; "
                "the current branch stays."
            )
            yield Editor(
                editable_text(self.turn.action), language=language, id="action", soft_wrap=True
            )
            yield Static("", id="edit-error")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Branch (Ctrl+S)", id="apply", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#action", Editor).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        else:
            self.action_cancel()

    def action_apply(self) -> None:
        text = self.query_one("#action", Editor).text
        try:
            action = self.session.domain.parse_action(text, self.session.scenario)
        except ActionError as exc:
            where = f" ({exc.field})" if exc.field else ""
            self.query_one("#edit-error", Static).update(Text(f"{exc}{where}"))
            return
        self.dismiss(action)

    def action_cancel(self) -> None:
        self.dismiss(None)
