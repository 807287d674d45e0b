"""Judging a turn in the app: ``JudgeSetup`` asks for the reference observation and the
judge to use; ``JudgeView`` shows a verdict (five scores, their mean, strengths and
weaknesses, or why there is no judgement). ``ui/judging.py`` runs the flow between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from agentworld_tui.config import MAX_CONTEXT
from agentworld_tui.engines.factory import EngineSpec
from agentworld_tui.ui.widgets.editor import Editor
from agentworld_tui.ui.widgets.field import Field
from agentworld_tui.ui.widgets.path_suggester import PathSuggester
from agentworld_tui.world.judgement import DIMENSIONS, Verdict
from agentworld_tui.world.sanitize import sanitize

ANSWER_SHOWN_CHARS = 20_000


@dataclass(frozen=True)
class JudgeRequest:
    reference: str
    """The real observation to compare the turn's prediction with."""
    judge: EngineSpec | None
    """Another judge engine; None: the model the app has loaded."""
    prompts: str = ""
    """A folder of judge prompts (a clone of the official release, say); "": the project's."""
    max_tokens: int = 32768
    """The judge's own limit (not the world model's)."""


class JudgeSetup(ModalScreen[JudgeRequest | None]):
    DEFAULT_CSS = """
    JudgeSetup { align: center middle; }
    JudgeSetup > Vertical {
        width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1;
    }
    JudgeSetup #reference { height: 1fr; }
    JudgeSetup Input { width: 1fr; }
    JudgeSetup .row { height: auto; }
    JudgeSetup #buttons { height: auto; align-horizontal: right; }
    JudgeSetup #judge-error { color: $error; height: auto; }
    JudgeSetup #reference-label { width: 1fr; }
    JudgeSetup .field-label { padding: 1 1 0 1; }
    JudgeSetup #judge-max-tokens { width: 12; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "judge", "Judge", priority=True),
    ]

    def __init__(
        self,
        reference: str = "",
        *,
        loaded_model: str = "",
        last: EngineSpec | None = None,
        max_tokens: int = 32768,
    ) -> None:
        super().__init__()
        self.reference = reference
        self.loaded_model = loaded_model
        self.last = last
        self.max_tokens = max_tokens

    def compose(self) -> ComposeResult:
        last = self.last or EngineSpec()
        with Vertical():
            yield Label(
                "Reference observation (the real one, pasted if the turn has none; empty: "
                "the prediction is judged on its own, without one)",
                id="reference-label",
            )
            yield Editor(self.reference, id="reference", soft_wrap=False)
            yield Label("Judge")
            with RadioSet(id="which"):
                yield RadioButton(
                    f"The loaded model ({self.loaded_model or 'none loaded'})",
                    value=not (last.server or last.model_path),
                    id="loaded",
                )
                yield RadioButton("A local GGUF file", value=bool(last.model_path), id="local")
                yield RadioButton(
                    "An OpenAI-compatible server", value=bool(last.server), id="server"
                )
            with Horizontal(classes="row"):
                yield Field(last.model_path, placeholder="/path/to/judge.gguf", id="path")
            with Horizontal(classes="row"):
                yield Field(last.server, placeholder="http://host:8000/v1", id="url")
                yield Field(last.model, placeholder="model name", id="model")
                yield Field(last.api_key_env, placeholder="API key variable", id="key-env")
            with Horizontal(classes="row"):
                yield Field(
                    placeholder="judge prompts folder (empty: the project's own)",
                    id="prompts",
                    suggester=PathSuggester(),
                )
                yield Label("max tokens", classes="field-label")
                yield Field(
                    str(self.max_tokens), id="judge-max-tokens", type="integer", max_length=7
                )
            yield Static("", id="judge-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Judge (Ctrl+S)", id="judge", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "judge":
            self.action_judge()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _fail(self, message: str) -> None:
        self.query_one("#judge-error", Static).update(message)

    def action_judge(self) -> None:
        reference = self.query_one("#reference", Editor).text
        limit = self.query_one("#judge-max-tokens", Input).value.strip()
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_CONTEXT:
            self._fail(f"The judge's max tokens: a whole number from 1 to {MAX_CONTEXT:,}.")
            return
        pressed = self.query_one("#which", RadioSet).pressed_button
        which = pressed.id if pressed is not None else "loaded"
        value = {i: self.query_one(f"#{i}", Input).value.strip() for i in ("path", "url", "model")}
        key_env = self.query_one("#key-env", Input).value.strip()
        prompts = self.query_one("#prompts", Input).value.strip()
        if prompts and not Path(prompts).expanduser().is_dir():
            self._fail(f"{prompts}: no such folder of judge prompts.")
            return
        if which == "local":
            if not value["path"]:
                self._fail("Give the judge's GGUF file.")
                return
            spec: EngineSpec | None = EngineSpec(model_path=value["path"])
        elif which == "server":
            if not value["url"]:
                self._fail("Give the server's URL.")
                return
            spec = EngineSpec(server=value["url"], model=value["model"], api_key_env=key_env)
        else:
            if not self.loaded_model:
                self._fail("No model is loaded: choose a local GGUF or a server.")
                return
            spec = None
        self.dismiss(JudgeRequest(reference, spec, prompts, int(limit)))


def verdict_table(verdict: Verdict) -> Table:
    """The five scores, the mean and the 0-100 score, as a table of plain text cells."""
    table = Table(expand=False, show_edge=False)
    table.add_column("Dimension", no_wrap=True)
    table.add_column("Score (1-5)", justify="right")
    judgement = verdict.judgement
    assert judgement is not None
    for dimension in DIMENSIONS:
        table.add_row(Text(dimension.capitalize()), Text(f"{judgement.scores[dimension]:g}"))
    table.add_row(Text("Mean", style="bold"), Text(f"{judgement.total:.2f}", style="bold"))
    table.add_row(Text("Score (0-100)"), Text(f"{judgement.normalised:.2f}"))
    return table


class JudgeView(ModalScreen[None]):
    DEFAULT_CSS = """
    JudgeView { align: center middle; }
    JudgeView > VerticalScroll {
        width: 90; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    JudgeView .heading { text-style: bold; margin-top: 1; }
    JudgeView #verdict-error { color: $error; }
    """
    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, verdict: Verdict, title: str = "Judgement") -> None:
        super().__init__()
        self.verdict = verdict
        self.title_text = title

    def compose(self) -> ComposeResult:
        verdict = self.verdict
        with VerticalScroll():
            yield Static(Text(self.title_text, style="bold"))
            if verdict.judge:
                yield Static(Text(f"Judge: {sanitize(verdict.judge)}", style="dim"))
            judgement = verdict.judgement
            if judgement is None:
                yield Static(Text(sanitize(verdict.error) or "no judgement"), id="verdict-error")
                if verdict.answer:
                    yield Static(Text("The judge's answer", style="bold"), classes="heading")
                    yield Static(Text(sanitize(verdict.answer[-ANSWER_SHOWN_CHARS:])))
                return
            yield Static(verdict_table(verdict), id="scores")
            if judgement.note:
                yield Static(Text(f"Note: {judgement.note}", style="dim"))
            for heading, items in (
                ("Strengths", judgement.strengths),
                ("Weaknesses", judgement.weaknesses),
            ):
                yield Static(Text(heading), classes="heading")
                lines = "\n".join(f"• {sanitize(item)}" for item in items) or "(none given)"
                yield Static(Text(lines))
            with Horizontal():
                yield Button("Close", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)
