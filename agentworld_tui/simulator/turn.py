"""One turn's generation, from its conversation to its last event.

``generate`` is what the engine's thread runs: it reads an immutable ``Conversation``
snapshot and writes nothing of the world. ``record`` writes the result into the session
on the session's own thread. ``run_turn`` does both, one after the other, for a caller
that owns the session and the engine on one thread (the command line, tests, bench).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
    PromptBuilt,
)
from agentworld_tui.world.context import history_budget
from agentworld_tui.world.session import Conversation, Session, Turn, TurnStatus, message_size

log = logging.getLogger("agentworld.turn")

NOT_STARTED_NOTE = "stopped before it started"


class TokenCounts:
    """Token counts of message texts, remembered between turns (a history is mostly the
    same texts turn after turn). Owned by the engine's thread, like the engine."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def counter(self, engine: Engine) -> Callable[[str], int]:
        def count(text: str) -> int:
            known = self._counts.get(text)
            if known is None:
                if len(self._counts) >= self.LIMIT:
                    self._counts.clear()
                known = self._counts[text] = engine.count_tokens(text)
            return known

        return count


def outcome(event: Finished, *, started: bool = True) -> tuple[TurnStatus, str]:
    """The turn's status and, when it is not simply complete, a note saying why."""
    stop = event.stats.stop_reason
    if event.error:
        return "error", event.error
    if stop == "cancelled":
        return "interrupted", "stopped by you" if started else NOT_STARTED_NOTE
    if not event.observation:
        if not event.closed_reasoning:
            why = "max tokens" if stop == "max_tokens" else "end of text"
            return "no_answer", f"no answer: the model stopped while reasoning ({why})"
        return "no_answer", "no answer: the model ended without an observation"
    if stop == "max_tokens":
        return "complete", "the answer reached the token limit and may be cut short"
    return "complete", ""


def failed(message: str, kind: ErrorKind = ErrorKind.FAILED) -> Finished:
    """The last event of a turn that could not run."""
    stats = GenerationStats(stop_reason="error")
    return Finished("", "", False, stats, error=message, error_kind=kind)


def generate(
    engine: Engine,
    conversation: Conversation,
    params: GenerationParams,
    control: GenerationControl,
    counts: TokenCounts | None = None,
) -> Iterator[EngineEvent]:
    """Fit the conversation to the context and stream it; the last event is always
    ``Finished``, errors included (never raises EngineError)."""
    finished: Finished | None = None
    try:
        count = (counts or TokenCounts()).counter(engine)
        budget = history_budget(engine.info.n_ctx, params.max_tokens)
        prompt = conversation.fit(count, budget)
        size = sum(message_size(m["content"], count) for m in prompt.messages)
        yield PromptBuilt(prompt.omitted_turns, len(prompt.messages), size)
        for event in engine.stream(prompt.messages, params, control):
            if isinstance(event, Finished):
                finished = event
                continue  # the engine's last event; let its generator run to its end
            yield event
    except EngineError as exc:
        log.warning("a turn failed: %s", exc)
        finished = failed(str(exc), exc.kind)
    if finished is None:  # the engine ended without its final event
        finished = Finished("", "", False, GenerationStats(stop_reason="cancelled"))
    yield finished


def record(
    session: Session,
    turn: Turn,
    event: Finished,
    *,
    started: bool = True,
    reality: dict[str, Any] | None = None,
) -> None:
    """Write a finished generation into its turn (on the session's thread), with a twinned
    turn's reality record when there is one."""
    status, note = outcome(event, started=started)
    if event.notice:
        note = f"{note}; {event.notice}" if note else event.notice
    session.finish_turn(
        turn,
        observation=event.observation,
        reasoning=event.reasoning,
        status=status,
        note=note,
        stats=event.stats.to_dict(),
        raw=event.raw,
        extraction=event.extraction,
        reality=reality,
    )


def run_turn(
    engine: Engine,
    session: Session,
    turn: Turn,
    params: GenerationParams,
    control: GenerationControl,
) -> Iterator[EngineEvent]:
    """Stream ``turn`` on the calling thread and record it; the turn is recorded before
    the last event is handed out, so whoever receives it finds the session up to date."""
    for event in generate(engine, session.conversation(turn), params, control):
        if isinstance(event, PromptBuilt):
            turn.omitted_turns = event.omitted_turns
        elif isinstance(event, Finished):
            record(session, turn, event)
        yield event
