"""The Engine protocol: what every way of running the world model provides.

An engine turns a conversation into a stream of typed events: reasoning text, observation
text, and finally the statistics of the generation. It knows nothing of the UI; a stream is
cancelled, or told to stop reasoning and answer, from another thread through its
``GenerationControl``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NamedTuple, Protocol

Message = dict[str, str]
StopReason = Literal["eos", "max_tokens", "cancelled", "error"]


class ErrorKind(StrEnum):
    """What kind of failure ended a generation or a load.

    Whoever decides what to do next (ask again, tell the user to change a setting) reads
    the kind; the message beside it is for people and may be reworded at any time.
    """

    TRANSIENT = "transient"
    """The server could not be reached, was busy (429, 5xx) or cut the answer short:
    the same request may well succeed if asked again."""
    TIMEOUT = "timeout"
    """The server sent nothing for longer than the timeout."""
    REFUSED = "refused"
    """The server refused this request as it was sent (a 4xx not named below)."""
    CONTEXT_TOO_LONG = "context_too_long"
    """The prompt does not fit the context: a larger context or a shorter prompt helps,
    asking again does not."""
    AUTH = "auth"
    """A key is missing or was rejected, or access is forbidden."""
    NOT_FOUND = "not_found"
    """No such model, or no OpenAI-compatible API, at that address."""
    BAD_REPLY = "bad_reply"
    """The server's reply broke the protocol or the bounds set on it."""
    CRASHED = "crashed"
    """llama.cpp crashed natively (in a probe process; the app lives on)."""
    FAILED = "failed"
    """Anything else."""


class EngineError(RuntimeError):
    """A failure the user can act on; the message says what happened and what to try."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.FAILED) -> None:
        super().__init__(message)
        self.kind = kind


class ContextOverflowError(EngineError):
    """The prompt alone does not leave room to generate."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.CONTEXT_TOO_LONG) -> None:
        super().__init__(message, kind)


@dataclass(frozen=True)
class GenerationParams:
    """Sampling and reasoning settings for one turn."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    max_tokens: int = 32768
    reasoning_budget: int = 0
    """Reasoning tokens before the model is made to answer; 0 = no cap."""
    enable_thinking: bool = True
    seed: int = -1


# The stream's events are named tuples: one is made per token, and a frozen dataclass
# costs the start-up about 1 ms each to define (Python 3.11 compiles its methods then).
class ReasoningDelta(NamedTuple):
    """Reasoning text streamed since the last event, with the running token counts."""

    text: str
    generated: int
    reasoning_tokens: int


class AnswerDelta(NamedTuple):
    """Observation text streamed since the last event, with the running token count."""

    text: str
    generated: int
    reset: bool = False
    """A later observation block replaced the earlier one: clear before appending."""


class PromptProgress(NamedTuple):
    """How much of the prompt the engine has read so far, in tokens."""

    evaluated: int
    total: int


class PromptBuilt(NamedTuple):
    """The turn's messages are ready; ``omitted_turns`` oldest turns did not fit."""

    omitted_turns: int
    messages: int
    tokens: int = 0
    """The prompt's size in tokens (an estimate until the engine has read it)."""


class GenerationStats(NamedTuple):
    """What one generation cost: tokens read and generated, speed, and why it stopped."""

    prompt_tokens: int = 0
    evaluated_prompt_tokens: int = 0
    """Prompt tokens the engine actually evaluated (the rest came from its cache)."""
    generated_tokens: int = 0
    reasoning_tokens: int = 0
    time_to_first_token: float = 0.0
    tokens_per_second: float = 0.0
    elapsed: float = 0.0
    stop_reason: StopReason = "eos"
    n_ctx: int = 0

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Finished(NamedTuple):
    """The last event of every stream."""

    reasoning: str
    observation: str
    closed_reasoning: bool
    stats: GenerationStats
    error: str = ""
    raw: str = ""
    """The model's generated text as it was generated (reasoning and answer, tags and all),
    kept so that nothing the extraction dropped is lost."""
    extraction: str = ""
    """Set when the extraction left text of the answer out (for example "2 observation
    blocks: showing the last"), for display beside the turn."""
    notice: str = ""
    """What the engine changed in how it asked (a server that refused some parameters),
    for the turn's note."""
    content: str | None = None
    """The answer alone, as a server with a reasoning parser sent it in its ``content``
    field (what the official evaluator scores); None when the text came whole (``raw``)."""
    error_kind: ErrorKind | None = None
    """What kind of failure ``error`` describes (None when there is no error)."""


EngineEvent = ReasoningDelta | AnswerDelta | PromptProgress | PromptBuilt | Finished


class GenerationControl:
    """Requests to a running stream, made from any thread.

    Plain flags rather than ``threading.Event``: nothing waits on them (the streams poll
    between tokens), a flag's store and load are atomic, and a pool of environments keeps one
    control per step in flight, so the two locks and conditions each Event carries were most of
    what the cyclic garbage collector had to scan.
    """

    __slots__ = ("__weakref__", "_answer_now", "_cancel")

    def __init__(self) -> None:
        self._cancel = False
        self._answer_now = False

    def cancel(self) -> None:
        self._cancel = True

    def answer_now(self) -> None:
        self._answer_now = True

    @property
    def cancelled(self) -> bool:
        return self._cancel

    def take_answer_request(self) -> bool:
        """True once after ``answer_now`` was called."""
        if self._answer_now:
            self._answer_now = False
            return True
        return False


class EngineInfo(NamedTuple):
    """What the status bar says about the engine."""

    name: str
    """The model as the user knows it (file name or server model)."""
    where: str
    """"CPU", "GPU 41/41 layers", or the server's address."""
    n_ctx: int
    remote: bool = False
    """The model runs on a server: nothing of this machine's decodes it."""
    parallel: int = 1
    """Generations the engine runs at once in this process (its slots)."""
    engine: str = ""
    """Which in-process engine runs the model ("llama-cpp-python", "xllamacpp")."""


ProgressCallback = Callable[[str], None]


class Engine(Protocol):
    @property
    def info(self) -> EngineInfo: ...

    @property
    def loaded(self) -> bool: ...

    def load(self, progress: ProgressCallback | None = None) -> None: ...

    def unload(self) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        """Generate; the last event is always ``Finished`` (errors included)."""
        ...
