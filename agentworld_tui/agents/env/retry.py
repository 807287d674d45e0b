"""Transient server failures, asked again with backoff before the turn is given up.

A server under load refuses connections, drops them, or answers 429 or 5xx; a training run
stepping thousands of environments meets all of these and must not lose an episode to one.
``RetryingEngine`` wraps a server's engine: a generation that failed that way before any
token came is asked again, after a pause that doubles each time (with jitter, so that
hundreds of environments do not come back at once), up to ``RetryPolicy.attempts`` in all.
A failure after tokens came (the stream cut mid-answer) is not asked again: the turn keeps
its partial output and is marked failed. A stop (``GenerationControl.cancel``) ends a pause
at once.

Which failures are transient is read from their kind (``Finished.error_kind``), which
the engines set; the wording of ``Finished.error`` is for people and decides nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentworld_tui.engines.base import (
    AnswerDelta,
    Engine,
    EngineEvent,
    EngineInfo,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    Message,
    ProgressCallback,
    ReasoningDelta,
)

log = logging.getLogger("agentworld.env.retry")

PAUSE_STEP_S = 0.05


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed request is asked again."""

    attempts: int = 4
    """Requests in all, the first included (1: never ask again)."""
    first_pause: float = 0.5
    max_pause: float = 8.0
    jitter: float = 0.25
    """Each pause is stretched or shrunk by up to this fraction at random."""

    def pause(self, retry: int, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        base = min(self.max_pause, self.first_pause * 2.0 ** (retry - 1))
        return float(max(0.0, base * (1 + rng.uniform(-self.jitter, self.jitter))))


def is_transient(finished: Finished) -> bool:
    """A failure worth asking again: no token came, and its kind is transient (the
    server refused or dropped the connection, or answered 429 or 5xx)."""
    if not finished.error or finished.stats.generated_tokens:
        return False
    if finished.observation or finished.reasoning or finished.raw:
        return False
    return finished.error_kind is ErrorKind.TRANSIENT


class RetryingEngine:
    """An engine whose transient failures are asked again (see the module's docstring)."""

    def __init__(self, engine: Engine, policy: RetryPolicy | None = None) -> None:
        self.inner = engine
        self.policy = policy or RetryPolicy()
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._retries: weakref.WeakKeyDictionary[GenerationControl, int] = (
            weakref.WeakKeyDictionary()
        )
        self.total_retries = 0

    # -- the Engine protocol, passed through ---------------------------------------------
    @property
    def info(self) -> EngineInfo:
        return self.inner.info

    @property
    def loaded(self) -> bool:
        return self.inner.loaded

    def load(self, progress: ProgressCallback | None = None) -> None:
        self.inner.load(progress)

    def unload(self) -> None:
        self.inner.unload()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- retrying ------------------------------------------------------------------------
    def retries(self, control: GenerationControl) -> int:
        """How many times the generation run with ``control`` was asked again."""
        with self._lock:
            return self._retries.get(control, 0)

    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        started = time.perf_counter()
        attempts = max(1, self.policy.attempts)
        for attempt in range(1, attempts + 1):
            finished: Finished | None = None
            streamed = False
            for event in self.inner.stream(messages, params, control):
                if isinstance(event, Finished):
                    finished = event
                    continue
                if isinstance(event, ReasoningDelta | AnswerDelta):
                    streamed = True
                yield event
            if finished is None:
                return
            last = attempt == attempts
            if control.cancelled and not streamed and is_transient(finished):
                # A stop that came while the server was refusing: the step was stopped,
                # whichever of the two reached this line first.
                yield _stopped(finished)
                return
            if streamed or last or not is_transient(finished):
                if attempt > 1:
                    finished = self._after_retries(finished, attempt, started, given_up=last)
                yield finished
                return
            with self._lock:
                self._retries[control] = attempt
                self.total_retries += 1
            pause = self.policy.pause(attempt, self._rng)
            log.info(
                "asking again in %.2f s (try %d of %d): %s",
                pause,
                attempt + 1,
                attempts,
                finished.error,
            )
            if _paused(control, pause):
                yield _stopped(finished)
                return

    @staticmethod
    def _after_retries(
        finished: Finished, attempt: int, started: float, *, given_up: bool
    ) -> Finished:
        stats = finished.stats._replace(elapsed=time.perf_counter() - started)
        error = finished.error
        if error and given_up and is_transient(finished):
            error = f"{error} (given up after {attempt} tries)"
        return finished._replace(stats=stats, error=error)


def _stopped(finished: Finished) -> Finished:
    """``finished`` as a stopped generation rather than a failed one."""
    return finished._replace(stats=finished.stats._replace(stop_reason="cancelled"), error="")


def _paused(control: GenerationControl, seconds: float) -> bool:
    """Wait ``seconds``; True when the generation was stopped meanwhile."""
    deadline = time.monotonic() + seconds
    while not control.cancelled:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(PAUSE_STEP_S, left))
    return True
