"""A twinned session's summary: what the twin was, the figures of the turns shown (the
first that diverged, the share that did, the mean divergence), the task's check and
whether the agent was deceived, and every twinned turn in a table; Enter on a turn shows it
in the tab's twin view.

With the twin still running, the check can be run in it from here (the agent says whether it
is done first, so that "deceived" can be told); the check and the figures are then written
into the session file. Without a twin (a session opened from a file), what was recorded is
shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, DataTable, Static

from agentworld_tui.ui.widgets.reality.record import STYLES, RealityRecord
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Session

if TYPE_CHECKING:
    from agentworld_tui.reality.figures import EpisodeFigures
    from agentworld_tui.reality.observation import CheckResult
    from agentworld_tui.simulator.shadow import Shadow

MAX_OUTPUT_SHOWN = 1200
"""Characters of the check's output shown (its end)."""


def _yes_no(value: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "not known" if value is None else (yes if value else no)


def twin_label(twin: dict[str, Any] | None) -> str:
    """What the session file says the twin was, in one line."""
    if not twin:
        return "no twin recorded"
    kind = str(twin.get("kind", "twin"))
    if kind.startswith("mcp"):
        where = twin.get("url") or " ".join(str(w) for w in twin.get("command") or [])
        return f"MCP server {where}"
    seed = twin.get("seed") or "an empty folder"
    backend = twin.get("backend", "")
    net = "network" if twin.get("network") else "no network"
    if kind == "host":
        return f"this machine itself (unsandboxed), a copy of {seed}"
    return f"{backend} sandbox, a copy of {seed} at {twin.get('workdir', '')}, {net}"


def figure_rows(figures: EpisodeFigures, check_command: str) -> list[tuple[str, str]]:
    share = figures.diverged_share
    mean = figures.mean_score
    first = figures.first_divergence
    return [
        ("Steps compared", f"{figures.steps}"),
        ("Reality did not answer", f"{figures.twin_failures}"),
        ("Diverged steps", f"{figures.diverged_steps}"),
        ("First diverged step", "none" if first is None else f"turn {first}"),
        ("Share diverged", "—" if share is None else f"{share:.0%}"),
        ("Mean divergence", "—" if mean is None else f"{mean:.2f}"),
        (
            "Check in the twin",
            "none given"
            if not check_command
            else f"{_yes_no(figures.check_passed, 'passed', 'failed')} ({check_command})",
        ),
        ("The agent said it was done", _yes_no(figures.claimed_done)),
        ("Deceived", _yes_no(figures.deceived)),
    ]


class TwinSummary(ModalScreen[int | None]):
    DEFAULT_CSS = """
    TwinSummary { align: center middle; }
    TwinSummary > Vertical {
        width: 110; max-width: 98%; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    TwinSummary #summary-title { text-style: bold; }
    TwinSummary #summary-twin { color: $text-muted; height: auto; }
    TwinSummary #summary-figures { height: auto; margin-top: 1; }
    TwinSummary #summary-check { height: auto; max-height: 8; color: $text-muted; }
    TwinSummary #summary-turns { height: 1fr; margin-top: 1; }
    TwinSummary #summary-busy { color: $warning; height: auto; }
    TwinSummary #summary-buttons { height: auto; align-horizontal: right; }
    TwinSummary #summary-buttons Button { margin-left: 1; }
    TwinSummary #summary-buttons Checkbox { border: none; }
    """
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(
        self,
        session: Session,
        shadow: Shadow | None,
        *,
        save: Callable[[Session], str | None] | None = None,
    ) -> None:
        """``shadow``: the tab's twin while it runs beside ``session`` (None: only what was
        recorded); ``save`` writes the session once the check is recorded."""
        super().__init__()
        self.session = session
        self.shadow = shadow
        self.save = save
        self.checking = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Reality beside {self.session.domain.title}"), id="summary-title")
            yield Static(id="summary-twin")
            yield Static(id="summary-figures")
            yield Static(id="summary-check")
            yield DataTable(id="summary-turns", cursor_type="row", zebra_stripes=True)
            yield Static(id="summary-busy")
            with Horizontal(id="summary-buttons"):
                can_check = self.shadow is not None and bool(self.shadow.check)
                if can_check:
                    yield Checkbox("The agent says the task is done", True, id="claimed")
                    yield Button("Run the check in the twin", id="check")
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        table = self.query_one("#summary-turns", DataTable)
        table.add_columns("Turn", "Action", "Divergence", "Delivered", "Reality")
        self.refresh_figures()
        table.focus()

    # -- showing ------------------------------------------------------------------------
    def recorded_check(self) -> tuple[str, CheckResult | None, bool | None]:
        """The check's command, its recorded result and the agent's recorded claim."""
        from agentworld_tui.reality.observation import CheckResult

        twin = self.session.twin or {}
        check = twin.get("check") if isinstance(twin.get("check"), dict) else {}
        assert isinstance(check, dict)
        command = str(check.get("command") or (self.shadow.check if self.shadow else ""))
        result = check.get("result")
        figures = twin.get("figures") if isinstance(twin.get("figures"), dict) else {}
        assert isinstance(figures, dict)
        claimed = figures.get("claimed_done")
        return (
            command,
            CheckResult.from_dict(result) if isinstance(result, dict) else None,
            claimed if isinstance(claimed, bool) else None,
        )

    def refresh_figures(self) -> None:
        from agentworld_tui.simulator.shadow import session_figures

        session = self.session
        live = "running now" if self.shadow is not None else "recorded in the session file"
        twin = Text(f"Twin ({live}): {sanitize(twin_label(session.twin))}")
        self.query_one("#summary-twin", Static).update(twin)
        command, check, claimed = self.recorded_check()
        figures = session_figures(session, check=check, claimed_done=claimed)
        rows = Text()
        for i, (name, value) in enumerate(figure_rows(figures, one_line(command)[:80])):
            rows.append(f"{chr(10) if i else ''}{name:<28}", style="bold")
            style = "bold red" if name == "Deceived" and figures.deceived else ""
            rows.append(value, style=style)
        self.query_one("#summary-figures", Static).update(rows)
        output = Text()
        if check is not None:
            if check.error:
                output.append(f"{one_line(check.error)}\n", style="yellow")
            tail = sanitize(check.output)[-MAX_OUTPUT_SHOWN:]
            if tail.strip():
                output.append(f"check output (its end):\n{tail}")
        self.query_one("#summary-check", Static).update(output)
        table = self.query_one("#summary-turns", DataTable)
        table.clear()
        for turn in session.turns:
            record = RealityRecord.of(turn)
            if record is None:
                table.add_row(
                    str(turn.number),
                    one_line(turn.action.label)[:40],
                    "—",
                    "sim",
                    "not twinned",
                    key=str(turn.number),
                )
                continue
            table.add_row(
                str(turn.number),
                one_line(turn.action.label)[:40],
                Text(record.short(), style=STYLES[record.kind]),
                record.delivered,
                record.real_label() or "ok",
                key=str(turn.number),
            )

    # -- acting -------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        self.dismiss(int(key) if key is not None and key.isdigit() else None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "check":
            self.run_check()
        else:
            self.action_close()

    def action_close(self) -> None:
        if not self.checking:
            self.dismiss(None)

    @work(exclusive=True, group="twin-check")
    async def run_check(self) -> None:
        """Run the task's check in the twin, and record it with the figures."""
        from agentworld_tui.simulator.shadow import end_episode_async

        shadow = self.shadow
        if shadow is None or self.checking:
            return
        self.checking = True
        self.query_one("#check", Button).disabled = True
        self.query_one("#summary-busy", Static).update(Text("Running the check in the twin…"))
        claimed = self.query_one("#claimed", Checkbox).value
        try:
            await end_episode_async(self.session, shadow, claimed_done=claimed, save=self.save)
        finally:
            self.checking = False
            self.query_one("#check", Button).disabled = False
            self.query_one("#summary-busy", Static).update(Text(""))
        self.refresh_figures()
