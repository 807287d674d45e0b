"""AgentWorldBench trajectories in the app: open a benchmark file or folder, pick a
trajectory, then replay it turn by turn (the model predicts each recorded turn while the
real observation stands beside it, with a diff) or load it into its domain's tab as history
to carry on from any turn.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Label, Static

from agentworld_tui.domains import DOMAINS
from agentworld_tui.engines.base import Finished
from agentworld_tui.simulator import Simulator, SimulatorError, TurnRun, TurnUpdate
from agentworld_tui.ui.frames import FramePacer
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.ui.widgets.path_suggester import PathSuggester
from agentworld_tui.world.sanitize import StreamSanitizer, sanitize
from agentworld_tui.world.session import Session
from agentworld_tui.world.trajectories import (
    BenchmarkSet,
    Replay,
    ReplayStep,
    Trajectory,
    TrajectoryError,
    load_benchmark,
)

DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


@dataclass(frozen=True)
class TrajectoryChoice:
    trajectory: Trajectory
    mode: Literal["replay", "continue"]
    upto: int | None = None
    """Recorded turns to keep when continuing (None: all)."""


def diff_lines(lines: list[str]) -> list[Text]:
    """A unified diff, coloured by line kind (the text itself is never markup)."""
    shown: list[Text] = []
    for line in lines:
        text = Text(sanitize(line))
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        if style:
            text.stylize(style)  # as a span: LineView draws spans, not a Text's own style
        shown.append(text)
    return shown


def similarity(reference: str, predicted: str) -> float:
    """The share of lines the two observations have in common, 0..1."""
    return difflib.SequenceMatcher(
        None, reference.splitlines(), predicted.splitlines(), autojunk=False
    ).ratio()


class TrajectoryPicker(ModalScreen[TrajectoryChoice | None]):
    """Open a benchmark file or folder and choose a trajectory and what to do with it."""

    DEFAULT_CSS = """
    TrajectoryPicker { align: center middle; }
    TrajectoryPicker > Vertical {
        width: 96%; height: 90%; border: thick $primary; background: $surface; padding: 0 1;
    }
    TrajectoryPicker #hint { width: 1fr; }
    TrajectoryPicker #trajectories { height: 1fr; }
    TrajectoryPicker #upto-row { height: auto; }
    TrajectoryPicker #upto-row Label { padding: 1 1 0 0; }
    TrajectoryPicker #upto { width: 12; }
    TrajectoryPicker #loaded { height: auto; color: $text-muted; }
    TrajectoryPicker #problem { height: auto; color: $error; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("ctrl+r", "replay", "Replay", tooltip="Replay the trajectory turn by turn"),
        Binding("ctrl+l", "continue", "Load as history", tooltip="Carry on from a turn"),
    ]

    last_path = ""
    """The path opened last, offered again next time."""

    def __init__(self, path: str = "") -> None:
        super().__init__()
        self.start_path = path or TrajectoryPicker.last_path
        self.loaded: BenchmarkSet | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "AgentWorldBench file (*_test.jsonl) or a folder of them · Enter opens · "
                "then Enter or Ctrl+R replays, Ctrl+L loads it as history into its tab",
                id="hint",
            )
            yield Field(
                self.start_path,
                placeholder="path to a .jsonl file or folder (→ completes)",
                id="path",
                suggester=PathSuggester(".jsonl"),
            )
            yield Static("", id="loaded")
            yield DataTable(id="trajectories", cursor_type="row")
            with Horizontal(id="upto-row"):
                yield Label("Load recorded turns 1 to")
                yield Field("", placeholder="all", id="upto", type="integer")
            yield Static("", id="problem")

    def on_mount(self) -> None:
        table = self.query_one("#trajectories", DataTable)
        table.add_columns("Domain", "Id", "Turns", "First action")
        self.query_one("#path", Input).focus()

    def say(self, message: str) -> None:
        self.query_one("#problem", Static).update(Text(message))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "path":
            self.open(event.value)
        else:
            self.action_continue()

    def open(self, raw: str) -> None:
        if not raw.strip():
            self.say("Give a file or folder path.")
            return
        path = Path(raw.strip()).expanduser()
        self.say("")
        self.query_one("#loaded", Static).update(Text(f"reading {path} …"))
        self._load(path)

    @work(thread=True, exclusive=True)
    def _load(self, path: Path) -> None:
        try:
            found: BenchmarkSet | str = load_benchmark(path)
        except TrajectoryError as exc:
            found = str(exc)
        except OSError as exc:
            found = f"{path}: cannot read ({exc.strerror or exc})"
        self.app.call_from_thread(self._loaded, path, found)

    def _loaded(self, path: Path, found: BenchmarkSet | str) -> None:
        loaded = self.query_one("#loaded", Static)
        if isinstance(found, str):
            loaded.update("")
            self.say(found)
            return
        TrajectoryPicker.last_path = str(path)
        self.loaded = found
        summary = (
            f"{len(found.trajectories)} trajectories ({found.samples} samples) in "
            f"{', '.join(found.domains())} from {path}"
        )
        if found.problems:
            summary += f"; skipped: {'; '.join(found.problems[:3])}"
        loaded.update(Text(summary))
        table = self.query_one("#trajectories", DataTable)
        table.clear()
        for trajectory in found.trajectories:
            known = trajectory.domain in DOMAINS
            table.add_row(
                Text(trajectory.domain, style="" if known else "red"),
                Text(trajectory.id),
                str(trajectory.turn_count),
                Text(trajectory.title),
            )
        if found.trajectories:
            table.focus()

    def _current(self) -> Trajectory | None:
        table = self.query_one("#trajectories", DataTable)
        if self.loaded is None or not self.loaded.trajectories or table.cursor_row < 0:
            self.say("Open a benchmark file first.")
            return None
        trajectory = self.loaded.trajectories[
            min(table.cursor_row, len(self.loaded.trajectories) - 1)
        ]
        if trajectory.domain not in DOMAINS:
            self.say(
                f"The {trajectory.domain} domain is not one the app simulates "
                f"({', '.join(DOMAINS)})."
            )
            return None
        return trajectory

    def on_data_table_row_selected(self) -> None:
        self.action_replay()

    def action_replay(self) -> None:
        trajectory = self._current()
        if trajectory is not None:
            self.dismiss(TrajectoryChoice(trajectory, "replay"))

    def action_continue(self) -> None:
        trajectory = self._current()
        if trajectory is None:
            return
        raw = self.query_one("#upto", Input).value.strip()
        count = min(len(trajectory.prompts), len(trajectory.responses))
        upto = int(raw) if raw.lstrip("-").isdigit() else None
        if upto is not None and not 0 <= upto <= count:
            self.say(f"This trajectory has {count} recorded turns: give 0 to {count}.")
            return
        self.dismiss(TrajectoryChoice(trajectory, "continue", upto))

    def action_close(self) -> None:
        self.dismiss(None)


class ReplayScreen(Screen[Session | None]):
    """One trajectory, turn by turn: recorded observation | predicted observation, and
    their diff. Closes with a session when the user carries on from a turn."""

    DEFAULT_CSS = """
    ReplayScreen { layout: vertical; }
    ReplayScreen #title { height: 1; padding: 0 1; background: $primary-darken-2; }
    ReplayScreen #action { height: auto; max-height: 6; padding: 0 1; color: $text-muted; }
    ReplayScreen #sides { height: 2fr; }
    ReplayScreen #sides > Vertical { width: 1fr; }
    ReplayScreen #sides Label { padding: 0 1; text-style: bold; }
    ReplayScreen #sides LineView { height: 1fr; }
    ReplayScreen #diff-title { padding: 0 1; text-style: bold; }
    ReplayScreen #diff { height: 1fr; }
    ReplayScreen #phase { height: 1; padding: 0 1; color: $warning; }
    """
    BINDINGS = [
        Binding("escape", "stop_or_close", "Stop / close"),
        Binding("n", "next", "Predict next turn"),
        Binding("r", "again", "Predict again"),
        Binding("p", "previous", "Previous turn"),
        Binding("c", "continue", "Carry on from here", tooltip="Load turns 1..n into the tab"),
    ]

    def __init__(self, trajectory: Trajectory, simulator: Simulator) -> None:
        super().__init__()
        self.replay = Replay(trajectory, DOMAINS[trajectory.domain])
        self.simulator = simulator
        self.latest: dict[int, ReplayStep] = {}
        """The newest prediction of each turn."""
        self.number = 0
        """The turn on screen (0 before the first)."""
        self.run: TurnRun | None = None
        self.frames = FramePacer(self, self.draw)
        self._answer = StreamSanitizer()
        self._started = 0.0

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield Static(id="action")
        with Horizontal(id="sides"):
            with Vertical():
                yield Label("Recorded observation")
                yield LineView(id="recorded")
            with Vertical():
                yield Label("Predicted by the model", id="predicted-title")
                yield LineView(id="predicted")
        yield Label("Diff (recorded → predicted)", id="diff-title")
        yield LineView(id="diff")
        yield Static("", id="phase")
        yield Footer()

    def on_mount(self) -> None:
        self.show_turn(1)

    # -- showing ------------------------------------------------------------------------
    def view(self, name: str) -> LineView:
        return self.query_one(f"#{name}", LineView)

    def show_turn(self, number: int) -> None:
        """Show recorded turn ``number`` and its latest prediction, if any."""
        replay = self.replay
        self.number = max(1, min(number, replay.length))
        trajectory = replay.trajectory
        self.query_one("#title", Static).update(
            Text(
                f"Replay · {trajectory.domain} · {trajectory.id} · turn {self.number} of "
                f"{replay.length} · n predicts the next turn, c carries on from here"
            )
        )
        recorded = replay.session.turns[self.number - 1]
        self.query_one("#action", Static).update(Text(f"Action: {sanitize(recorded.action.label)}"))
        view = self.view("recorded")
        view.clear()
        view.append(sanitize(recorded.observation))
        step = self.latest.get(self.number)
        predicted = self.view("predicted")
        predicted.clear()
        if step is not None and step.turn.status != "pending":
            predicted.append(sanitize(step.turn.observation))
            if step.turn.note:
                note = Text(f"[{step.turn.note}]")
                note.stylize("yellow")
                predicted.append_lines([note])
        self.show_diff(step)

    def show_diff(self, step: ReplayStep | None) -> None:
        diff = self.view("diff")
        diff.clear()
        title = self.query_one("#diff-title", Label)
        if step is None or step.turn.status == "pending":
            title.update("Diff (recorded → predicted): press n to predict this turn")
            return
        lines = step.diff()
        share = similarity(step.reference, step.turn.observation)
        title.update(f"Diff (recorded → predicted) · {share:.0%} of lines in common")
        if not lines:
            diff.append_lines([Text("The prediction equals the recorded observation.")])
            return
        diff.append_lines(diff_lines(lines))

    def say(self, message: str) -> None:
        self.query_one("#phase", Static).update(Text(message))

    # -- predicting ---------------------------------------------------------------------
    def predict(self, number: int) -> None:
        if self.run is not None:
            self.say("The model is still predicting: Esc stops it.")
            return
        problem = self.simulator.problem()
        if problem:
            self.say(f"{problem}: start with --model PATH.gguf, or pick one with F3.")
            return
        step = self.replay.step(number)
        self.latest[number] = step
        try:
            run = self.simulator.resume(self.replay.session, step.turn, owner="Replay")
        except SimulatorError as exc:
            self.say(str(exc))
            return
        self.run = run
        self.show_turn(number)
        self._answer = StreamSanitizer()
        self._started = time.monotonic()
        self.say("waiting for the model…")
        engine = self.simulator.engine
        self.frames.follow(run, local=engine is None or not engine.info.remote)

    def draw(self, update: TurnUpdate) -> None:
        predicted = self.view("predicted")
        if update.answer_reset:
            predicted.clear()
            self._answer = StreamSanitizer()
        if update.answer:
            predicted.append(self._answer.feed(update.answer))
        if update.phase == "reasoning" and update.reasoning_tokens is not None:
            self.say(f"reasoning · {update.reasoning_tokens:,} tokens")
        elif update.phase == "answering":
            self.say(f"answering · {update.generated:,} tokens")
        if update.finished is not None:
            self._finish(update.finished)

    def _finish(self, event: Finished) -> None:
        run = self.run
        assert run is not None
        self.run = None
        began = run.started_at or self._started
        elapsed = time.monotonic() - began
        note = f" · {sanitize(run.turn.note)}" if run.turn.note else ""
        self.say(
            f"turn {run.turn.number}: {event.stats.generated_tokens:,} tokens in {elapsed:.1f} s{note}"
        )
        if run.turn.number == self.number:
            self.show_turn(self.number)

    # -- keys -----------------------------------------------------------------------------
    def action_next(self) -> None:
        target = self.number + 1 if self.number in self.latest else self.number
        if target > self.replay.length:
            self.say("That was the last recorded turn.")
        elif target in self.latest:
            self.show_turn(target)
        else:
            self.predict(target)

    def action_again(self) -> None:
        self.predict(self.number)

    def action_previous(self) -> None:
        if self.number > 1:
            self.show_turn(self.number - 1)

    def action_continue(self) -> None:
        if self.run is not None:
            self.say("The model is still predicting: Esc stops it.")
            return
        self.dismiss(self.replay.continue_from(self.number))

    def action_stop_or_close(self) -> None:
        if self.run is not None:
            self.run.stop()
            return
        self.dismiss(None)

    def on_unmount(self) -> None:
        self.frames.stop()
        if self.run is not None:
            self.run.stop()
