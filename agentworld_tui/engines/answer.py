"""An answer's text as the stream's events, and the last event: the same for every engine.

Every engine feeds what the model generated to an ``ObservationSplitter`` and hands on what
it gives back as reasoning and answer deltas, then ends the stream with ``Finished``: the
split, the statistics and the text as generated. The engines differ in how they decode and
count; what they send is built here. ``LocalAnswer`` adds what both in-process engines share:
where the prompt leaves the reasoning, the first token's time, and the statistics from their
own counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineError,
    EngineEvent,
    Finished,
    GenerationParams,
    GenerationStats,
    ReasoningDelta,
    StopReason,
)
from agentworld_tui.engines.template import opens_reasoning
from agentworld_tui.world.splitter import ObservationSplitter, Split

CLOSE_REASONING = "</think>\n\n"
"""What an engine sends after the reasoning to make the model answer (answer-now, the
reasoning budget)."""


def deltas(
    fed: tuple[str, str, bool], generated: int, reasoning_tokens: int
) -> Iterator[EngineEvent]:
    """The events of what the splitter gave back (reasoning, answer, reset) for some text."""
    reasoning, answer, reset = fed
    if reasoning:
        yield ReasoningDelta(reasoning, generated, reasoning_tokens)
    if answer or reset:
        yield AnswerDelta(answer, generated, reset)


def answer_finished(
    split: Split,
    splitter: ObservationSplitter,
    stats: GenerationStats,
    *,
    failure: EngineError | None = None,
    notice: str = "",
) -> Finished:
    """The last event of an answer the splitter read, ``split`` being what it found."""
    return Finished(
        split.reasoning,
        split.observation,
        split.closed_reasoning,
        stats,
        str(failure) if failure is not None else "",
        raw=splitter.raw,
        extraction=split.extraction,
        notice=notice,
        content=splitter.content,
        error_kind=failure.kind if failure is not None else None,
    )


def ended(
    started: float, stop: StopReason, n_ctx: int, *, prompt_tokens: int = 0, evaluated: int = 0
) -> Finished:
    """The last event of a stream that ended before the model generated anything."""
    stats = GenerationStats(
        prompt_tokens=prompt_tokens,
        evaluated_prompt_tokens=evaluated,
        elapsed=time.perf_counter() - started,
        stop_reason=stop,
        n_ctx=n_ctx,
    )
    return Finished("", "", False, stats)


class LocalAnswer:
    """One answer an in-process engine generates: its splitter and its timing."""

    def __init__(self, prompt: str, params: GenerationParams, started: float) -> None:
        self.splitter = ObservationSplitter(
            starts_in_reasoning=params.enable_thinking and opens_reasoning(prompt)
        )
        self.started = started
        self.first_token_at: float | None = None

    @property
    def in_reasoning(self) -> bool:
        return self.splitter.in_reasoning

    def first_token(self) -> None:
        """The model has given its first token (now, unless it gave one before)."""
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def feed(self, text: str, generated: int, reasoning_tokens: int) -> Iterator[EngineEvent]:
        """The events of generated text, with the counts so far."""
        return deltas(self.splitter.feed(text), generated, reasoning_tokens)

    def finish(
        self,
        *,
        prompt_tokens: int,
        evaluated: int,
        generated: int,
        reasoning_tokens: int,
        stop: StopReason,
        n_ctx: int,
    ) -> Iterator[EngineEvent]:
        """What the splitter still held, then ``Finished`` with the statistics."""
        split, reasoning, answer, reset = self.splitter.finish()
        yield from deltas((reasoning, answer, reset), generated, reasoning_tokens)
        now = time.perf_counter()
        stats = GenerationStats(
            prompt_tokens=prompt_tokens,
            evaluated_prompt_tokens=evaluated,
            generated_tokens=generated,
            reasoning_tokens=reasoning_tokens,
            time_to_first_token=(self.first_token_at or now) - self.started,
            tokens_per_second=self._rate(generated, now),
            elapsed=now - self.started,
            stop_reason=stop,
            n_ctx=n_ctx,
        )
        yield answer_finished(split, self.splitter, stats)

    def _rate(self, generated: int, now: float) -> float:
        """Tokens a second after the first (which waited for the prompt to be read)."""
        if self.first_token_at is None or generated < 2:
            return 0.0
        elapsed = now - self.first_token_at
        return (generated - 1) / elapsed if elapsed > 0 else 0.0
