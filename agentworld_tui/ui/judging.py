"""F11: judge the tab's last turn against a reference, watching the judge as it goes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from agentworld_tui.config import GenerationSettings
from agentworld_tui.judging.judge import STOPPED
from agentworld_tui.judging.turn import JudgeRun, judge_params, judge_turn
from agentworld_tui.simulator import Simulator, TurnUpdate
from agentworld_tui.ui.frames import FramePacer
from agentworld_tui.ui.host import TabsAndDialogs
from agentworld_tui.ui.panes.base import DomainPane
from agentworld_tui.ui.tab_actions import idle_pane
from agentworld_tui.ui.widgets.line_view import LineView
from agentworld_tui.world.judgement import Verdict
from agentworld_tui.world.sanitize import StreamSanitizer
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.ui.screens.judge_view import JudgeRequest


class JudgingHost(TabsAndDialogs, Protocol):
    """What judging needs of the app."""

    @property
    def simulator(self) -> Simulator: ...

    def save_session(self, session: Session | None = None) -> str | None: ...


class TurnJudging:
    """F11: the tab's last turn judged against a reference the person gives."""

    def __init__(self, host: JudgingHost, generation: GenerationSettings) -> None:
        self.host = host
        self.generation = generation

    def judge_last_turn(self) -> None:
        from agentworld_tui.ui.screens.judge_view import JudgeSetup

        host = self.host
        pane = idle_pane(host)
        if pane is None:
            return
        turns = [t for t in pane.session.turns if t.observation]
        if not turns:
            host.notify("No turn with an observation to judge yet.", timeout=4)
            return
        turn = turns[-1]
        engine = host.simulator.engine
        name = engine.info.name if engine is not None else ""

        def chosen(request: JudgeRequest | None) -> None:
            if request is not None:
                self.judge(pane, turn, request)

        reference = str(turn.stats.get("reference", ""))
        limit = self.generation.judge_max_tokens
        host.push_screen(JudgeSetup(reference, loaded_model=name, max_tokens=limit), chosen)

    def judge(self, pane: DomainPane, turn: Turn, request: JudgeRequest) -> None:
        """Judge ``turn`` as the person asked, watching the judge as it goes."""
        from agentworld_tui.judging.prompts import (
            JudgePromptsError,
            load_judge_prompts,
            turn_judge_messages,
        )

        host = self.host
        prompts = None
        if request.prompts:
            try:
                prompts = load_judge_prompts(Path(request.prompts).expanduser(), [pane.domain.name])
            except JudgePromptsError as exc:
                host.notify(str(exc), title="Judge prompts", severity="error", timeout=15)
                return
        reference = request.reference
        if not reference.strip():
            from agentworld_tui.agents.env.rollout import JUDGE_REFERENCE

            reference = JUDGE_REFERENCE  # judged on its own, as rollout's judge does
        messages, problems = turn_judge_messages(pane.session, turn, reference, prompts=prompts)
        for problem in problems:
            host.notify(problem, severity="warning")
        params = replace(judge_params(host.simulator.params), max_tokens=request.max_tokens)
        run = judge_turn(
            host.simulator,
            pane.session,
            turn,
            messages,
            reference=reference,
            spec=request.judge,
            params=params,
            save=host.save_session,
        )
        engine = host.simulator.engine
        remote = request.judge is not None and bool(request.judge.server)
        local = not remote and not (engine is not None and engine.info.remote)

        def shown(verdict: Verdict | None) -> None:
            from agentworld_tui.ui.screens.judge_view import JudgeView

            if not pane.busy:
                pane.show_session()
            if verdict is not None:
                host.push_screen(JudgeView(verdict, title=f"Turn {turn.number}"))

        host.push_screen(JudgeProgress(run, f"Judging turn {turn.number}", local=local), shown)


class JudgeProgress(ModalScreen[Verdict | None]):
    """The judge's answer as it streams; Esc stops it (nothing is recorded then)."""

    DEFAULT_CSS = """
    JudgeProgress { align: center middle; }
    JudgeProgress > Vertical {
        width: 90%; height: 80%; border: thick $primary; background: $surface; padding: 0 1;
    }
    JudgeProgress #judge-phase { height: 1; color: $text-muted; }
    JudgeProgress LineView { height: 1fr; }
    """
    BINDINGS = [Binding("escape", "stop", "Stop judging")]

    def __init__(self, run: JudgeRun, title: str, *, local: bool) -> None:
        super().__init__()
        self.run, self.title_text, self.local = run, title, local
        self.frames = FramePacer(self, self.draw)
        self._clean = StreamSanitizer()
        self._tokens = 0

    def compose(self) -> ComposeResult:
        with Vertical():
            limit = f"up to {self.run.params.max_tokens:,} tokens"
            yield Label(Text(f"{self.title_text} · {limit} · Esc stops"))
            yield Static(Text("waiting for the judge…"), id="judge-phase")
            yield LineView(wrap=True, id="judge-stream")

    def on_mount(self) -> None:
        self.frames.follow(self.run, local=self.local)

    def on_unmount(self) -> None:
        self.frames.stop()

    def draw(self, update: TurnUpdate) -> None:
        view = self.query_one("#judge-stream", LineView)
        text = update.reasoning + update.answer
        if text:
            view.append(self._clean.feed(text))
        if update.generated:
            self._tokens = update.generated
        phase = self.query_one("#judge-phase", Static)
        if update.final is not None:
            verdict = update.final if isinstance(update.final, Verdict) else None
            if verdict is not None and verdict.error == STOPPED:
                self.app.notify("Judging stopped; nothing was recorded.", timeout=4)
                verdict = None
            self.dismiss(verdict)
            return
        phase.update(Text(f"{update.phase or 'judging'} · {self._tokens:,} tokens"))

    def action_stop(self) -> None:
        self.run.stop()
