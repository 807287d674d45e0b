"""One turn from action to observation, the same for the app and the command line."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
    PromptBuilt,
)
from agentworld_tui.world.context import history_budget
from agentworld_tui.world.session import Session, Turn, TurnStatus

log = logging.getLogger("agentworld.turn")


def outcome(event: Finished) -> tuple[TurnStatus, str]:
    """The turn's status and, when it is not simply complete, a note saying why."""
    stop = event.stats.stop_reason
    if event.error:
        return "error", event.error
    if stop == "cancelled":
        return "interrupted", "stopped by you"
    if not event.observation:
        if not event.closed_reasoning:
            why = "max tokens" if stop == "max_tokens" else "end of text"
            return "no_answer", f"no answer: the model stopped while reasoning ({why})"
        return "no_answer", "no answer: the model ended without an observation"
    if stop == "max_tokens":
        return "complete", "the answer reached the token limit and may be cut short"
    return "complete", ""


def run_turn(
    engine: Engine,
    session: Session,
    turn: Turn,
    params: GenerationParams,
    control: GenerationControl,
) -> Iterator[EngineEvent]:
    """Stream ``turn`` and record its result in the session; never raises EngineError."""
    finished: Finished | None = None
    try:
        budget = history_budget(engine.info.n_ctx, params.max_tokens)
        prompt = session.prompt(turn, engine.count_tokens, budget)
        turn.omitted_turns = prompt.omitted_turns
        yield PromptBuilt(prompt.omitted_turns, len(prompt.messages))
        for event in engine.stream(prompt.messages, params, control):
            if isinstance(event, Finished):
                finished = event
                continue  # the engine's last event; let its generator run to its end
            yield event
    except EngineError as exc:
        log.warning("turn %d failed: %s", turn.number, exc)
        finished = Finished("", "", False, GenerationStats(stop_reason="error"), error=str(exc))
    if finished is None:  # the engine ended without its final event
        finished = Finished("", "", False, GenerationStats(stop_reason="cancelled"))
    # The turn is recorded before the final event goes out, so whoever receives it finds
    # the session already up to date.
    status, note = outcome(finished)
    session.finish_turn(
        turn,
        observation=finished.observation,
        reasoning=finished.reasoning,
        status=status,
        note=note,
        stats=finished.stats.to_dict(),
        raw=finished.raw,
        extraction=finished.extraction,
    )
    yield finished
