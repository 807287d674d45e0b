"""An answer's chunks read into the engine's events, and its statistics.

A chunk is the JSON value the server sent, unchecked (building the SDK's objects for every
chunk cost more CPU than reading them), so a server may put anything in any field: what is
not of the expected shape counts as absent.

Thinking arrives in a separate ``reasoning_content`` (or ``reasoning``) field when the
server runs a reasoning parser, otherwise inline, closed by ``</think>``; a parser may send
the field empty (the model thought nothing), and the content is then the answer. Token
counts come from the usage the server reports (llama.cpp's server, vLLM and SGLang send it
in the last chunk), else they are estimated from the streamed text; apart from them, a
count that is never above the truth holds the server to ``max_tokens``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentworld_tui.engines.answer import answer_finished, deltas
from agentworld_tui.engines.base import (
    EngineError,
    EngineEvent,
    Finished,
    GenerationStats,
    ReasoningDelta,
    StopReason,
)
from agentworld_tui.world.splitter import ObservationSplitter

CHARS_PER_TOKEN = 3.0
"""Starting estimate; conservative for code, screens and JSON with Qwen's tokenizer."""
LONGEST_TOKEN_CHARS = 256
"""More characters than any token of a real vocabulary holds."""
BLANK_CHUNK_SLACK = 16
"""Chunks without text that are not tokens (the role, the finish, keep-alives)."""
STOP_REASONS: dict[str, StopReason] = {"stop": "eos", "length": "max_tokens"}
"""A finish reason the server sent, as the engine's stop reason (others: "eos")."""


def count(value: Any) -> int:
    """A positive count a server sent, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def field(value: Any, name: str) -> Any:
    """``value[name]`` when ``value`` is a JSON object that has it, else None."""
    return value.get(name) if isinstance(value, dict) else None


def read_chunk(chunk: Any) -> tuple[Any, str | None, Any]:
    """The first choice's delta and finish reason, and the usage, whatever the chunk's shape."""
    usage = field(chunk, "usage")
    choices = field(chunk, "choices")
    if not isinstance(choices, list) or not choices:
        return None, None, usage
    choice = choices[0]
    finish = field(choice, "finish_reason")
    return field(choice, "delta"), finish if isinstance(finish, str) else None, usage


def reasoning_field(delta: Any) -> str | None:
    """The delta's reasoning (``reasoning_content``, or newer vLLM's ``reasoning``): None
    when it has neither field as text, "" when the server sent an empty one."""
    texts = [field(delta, name) for name in ("reasoning_content", "reasoning")]
    given = [text for text in texts if isinstance(text, str)]
    if not given:
        return None
    return next((text for text in given if text), "")


@dataclass
class Counts:
    """The tokens the stream has produced so far.

    The server's own count where it reports one, else an estimate from the text; and,
    apart, a count that is never above the truth, for holding the server to max_tokens.
    """

    chars_per_token: float = CHARS_PER_TOKEN
    chars: int = 0
    reasoning_chars: int = 0
    pieces: int = 0
    """Chunks that carried text: at least one token each."""
    reasoning_pieces: int = 0
    content_pieces: int = 0
    """Chunks whose answer field carried text."""
    blanks: int = 0
    reported: int = 0
    """Completion tokens the server reported (0 until it does)."""
    reported_reasoning: int = 0
    first_at: float | None = None
    last_at: float | None = None

    @property
    def started(self) -> bool:
        return self.pieces > 0

    def chunk(self, reasoning: str, answer: str) -> None:
        """Count one chunk's text: its reasoning, and its answer (or inline reasoning)."""
        if not reasoning and not answer:
            self.blanks += 1
            return
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        self.pieces += 1
        self.chars += len(reasoning) + len(answer)
        self.reasoning_chars += len(reasoning)
        if reasoning:
            self.reasoning_pieces += 1

    def report(self, usage: Any) -> None:
        completion = count(field(usage, "completion_tokens"))
        if completion:
            self.reported = completion
            details = field(usage, "completion_tokens_details")
            self.reported_reasoning = count(field(details, "reasoning_tokens"))

    @property
    def generated(self) -> int:
        if self.reported:
            return self.reported
        return max(self.pieces, math.ceil(self.chars / self.chars_per_token))

    @property
    def reasoning(self) -> int:
        if self.reported:
            if self.reported_reasoning:
                return self.reported_reasoning
            return round(self.reported * self.reasoning_chars / self.chars) if self.chars else 0
        return max(self.reasoning_pieces, math.ceil(self.reasoning_chars / self.chars_per_token))

    @property
    def at_least(self) -> int:
        """Tokens the server has surely generated, whatever it says."""
        return max(
            self.reported,
            self.pieces + max(0, self.blanks - BLANK_CHUNK_SLACK),
            math.ceil(self.chars / LONGEST_TOKEN_CHARS),
        )


class AnswerReader:
    """One answer's chunks, through the splitter, into reasoning and answer events."""

    def __init__(self, *, thinking: bool, chars_per_token: float) -> None:
        self.started = time.perf_counter()
        self.splitter = ObservationSplitter(starts_in_reasoning=thinking)
        self.counts = Counts(chars_per_token)

    def feed(self, delta: Any) -> Iterator[EngineEvent]:
        """The events of one chunk's delta."""
        splitter, counts = self.splitter, self.counts
        given = reasoning_field(delta)
        reasoning = given or ""
        content = field(delta, "content")
        content = content if isinstance(content, str) else ""
        shown = ""
        if given is not None and (reasoning or not counts.content_pieces):
            # The server runs a reasoning parser: even an empty field (the model thought
            # nothing) means the content is the answer. Once content was read inline, an
            # empty field changes nothing.
            shown = splitter.feed_reasoning(reasoning)
        inline = splitter.in_reasoning
        counts.chunk(reasoning + (content if inline else ""), "" if inline else content)
        if shown:
            yield ReasoningDelta(shown, counts.generated, counts.reasoning)
        if content:
            counts.content_pieces += 1
            yield from self._events(splitter.feed(content))

    def flush(self) -> Iterator[EngineEvent]:
        """What the splitter still held, once the stream has ended."""
        _split, reasoning, answer, reset = self.splitter.finish()
        yield from self._events((reasoning, answer, reset))

    def _events(self, fed: tuple[str, str, bool]) -> Iterator[EngineEvent]:
        return deltas(fed, self.counts.generated, self.counts.reasoning)

    def finished(
        self,
        *,
        estimate: int,
        usage: Any,
        stop: StopReason,
        failure: EngineError | None,
        n_ctx: int,
        notice: str = "",
    ) -> Finished:
        """The last event: the split, the stats, and the output as the server sent it.

        ``raw`` is the answer text as streamed; when the server sent the reasoning apart
        (a reasoning parser), it comes first in think tags:
        ``"<think>" + reasoning + "</think>" + content``.
        """
        splitter, counts = self.splitter, self.counts
        split = splitter.finish()[0]
        prompt = count(field(usage, "prompt_tokens")) or estimate
        evaluated = prompt
        cached = field(field(usage, "prompt_tokens_details"), "cached_tokens")
        if isinstance(cached, int) and 0 <= cached <= prompt:
            evaluated = prompt - cached
        generated = count(field(usage, "completion_tokens")) or counts.generated
        reasoning = count(field(field(usage, "completion_tokens_details"), "reasoning_tokens"))
        if not reasoning and counts.chars:
            # From the text as finally split: inline text the stream counted as reasoning
            # until it turned out to be the answer (no think tags at all) is not.
            reasoning = round(generated * len(split.reasoning) / counts.chars)
        rate = 0.0
        if counts.first_at is not None and counts.last_at is not None and generated > 1:
            span = counts.last_at - counts.first_at
            rate = (generated - 1) / span if span > 0 else 0.0
        stats = GenerationStats(
            prompt_tokens=prompt,
            evaluated_prompt_tokens=evaluated,
            generated_tokens=generated,
            reasoning_tokens=min(reasoning, generated),
            time_to_first_token=(counts.first_at or time.perf_counter()) - self.started,
            tokens_per_second=rate,
            elapsed=time.perf_counter() - self.started,
            stop_reason=stop,
            n_ctx=n_ctx,
        )
        return answer_finished(split, splitter, stats, failure=failure, notice=notice)
