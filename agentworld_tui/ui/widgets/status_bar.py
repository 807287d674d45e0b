"""The bottom line: which model, where it runs, and how the current turn is going."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from rich.text import Text
from textual.geometry import Region
from textual.widgets import Static

from agentworld_tui.ui.update_clock import repaint as repaint_now


@dataclass
class StatusInfo:
    """What the status line shows: the model, the context and the current turn's counters."""

    model: str = "no model"
    where: str = ""
    n_ctx: int = 0
    context_used: int = 0
    generated: int = 0
    reasoning_tokens: int = 0
    reasoning_budget: int = 0
    tokens_per_second: float = 0.0
    elapsed: float = 0.0
    phase: str = ""
    """What is happening now: loading, evaluating the prompt, reasoning, answering..."""
    queued: list[str] = field(default_factory=list)
    omitted_turns: int = 0


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


def status_text(info: StatusInfo) -> Text:
    parts: list[tuple[str, str]] = [(info.model, "bold")]
    if info.where:
        parts.append((info.where, ""))
    if info.n_ctx:
        parts.append((f"ctx {_k(info.context_used)}/{_k(info.n_ctx)}", ""))
    if info.phase:
        parts.append((info.phase, "bold cyan"))
    if info.generated or info.tokens_per_second:
        parts.append((f"{info.tokens_per_second:.1f} tok/s", ""))
        parts.append((f"{info.generated:,} tok", ""))
        parts.append((f"{info.elapsed:.1f}s", ""))
    budget = f"/{info.reasoning_budget:,}" if info.reasoning_budget else ""
    if info.reasoning_tokens or budget:
        parts.append((f"reasoning {info.reasoning_tokens:,}{budget}", ""))
    if info.omitted_turns:
        parts.append((f"{info.omitted_turns} old turns left out", "yellow"))
    if info.queued:
        parts.append((f"queued: {', '.join(info.queued)}", "magenta"))
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, (value, style) in enumerate(parts):
        if i:
            text.append(" │ ", "dim")
        text.append(value, style)
    return text


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $panel;
        padding: 0 1;
    }
    """

    def show(self, info: StatusInfo) -> None:
        # One fixed line: new text never changes its size, so no screen layout is needed
        # (a layout redraws the whole screen, several times a second while streaming).
        self.update(status_text(info), layout=False)

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        """A new line is drawn with the screen's next update, without messages (see
        ``update_clock.repaint``): while text streams, in the same update as the text."""
        if repaint and not layout and not recompose:
            repaint_now(self, *regions)
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
