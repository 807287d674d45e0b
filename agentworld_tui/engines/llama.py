"""The world model in-process, through llama-cpp-python.

One model stays loaded across turns so its cache is reused. Transformer caches can be cut
back to any prefix, but the real model is hybrid (Gated DeltaNet layers keep a recurrent
state that cannot be rolled back), so the engine saves the sequence state at two points of
each prompt and restores the best matching saved state when a new prompt shares only part
of what the cache holds:

- where the last message (the action) begins: the prefix that a retried, undone, edited or
  unanswered (hence dropped) last turn shares with the prompt that follows it;
- at the end of the history (before the generation prompt): the prefix of the next turn's
  prompt once this turn's answer joins the history, and of a retry.

Only the recurrent part of the state is saved there (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``):
such a state is restored only when its tokens are a prefix of what the cache holds, so a
hybrid model's attention cache is still there and is cut back to the same position.

One context holds one conversation, but the app runs several (a tab each, branches, forks
of one history). When a prompt leaves the conversation the cache holds (it does not go on
from the end of the last prompt's history), the engine first keeps that conversation's
state whole, attention cache included: a transformer's cache cut back to the last prompt,
a hybrid's state at the end of the last prompt's history (its recurrent checkpoint there,
with the attention cache cut back to it). Coming back to it later, or to a fork that shares
its prefix, restores that state and reads only what is new. A purely recurrent model has
no attention cache: its checkpoints stand alone already.

Saved states are kept in one least-recently-used store with a byte budget, whole states and
recurrent ones alike, so the memory they take stays bounded.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import io
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentworld_tui.engines.base import (
    AnswerDelta,
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineInfo,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
    Message,
    ProgressCallback,
    PromptProgress,
    ReasoningDelta,
    StopReason,
)
from agentworld_tui.engines.probe import CrashProbe, ProbeOutcome, Trial, crash_message
from agentworld_tui.engines.state_file import DEFAULT_MAX_BYTES, StateFile, state_key
from agentworld_tui.engines.template import ChatTemplate, RenderCancelled, opens_reasoning
from agentworld_tui.world.splitter import ObservationSplitter

log = logging.getLogger("agentworld.engine")
native_log = logging.getLogger("agentworld.llama_cpp")

DEFAULT_N_CTX = 32768
CLOSE_REASONING = "</think>\n\n"
# ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues the last one).
_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_log_callback: Any = None


def route_native_logs() -> None:
    """Send llama.cpp's and ggml's own messages to the log file, never to the screen."""
    global _log_callback
    import llama_cpp

    if _log_callback is not None:
        return

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        message = text.decode("utf-8", "replace").rstrip()
        if message:
            native_log.log(_LEVELS.get(level, logging.DEBUG), "%s", message)

    _log_callback = _callback
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


class _StderrToLog(io.TextIOBase):
    def write(self, text: str) -> int:
        if text.strip():
            native_log.debug("%s", text.rstrip())
        return len(text)


class _UnusedChatFormatter:
    """Stands in for llama-cpp-python's ``Jinja2ChatFormatter`` while a model loads.

    ``Llama()`` compiles every chat template in the file for its own chat API, which the
    engine never calls (prompts are rendered by ``engines.template``, within bounds), and
    Jinja's compiler folds constant expressions: ``{{ '' | center(300000000) }}`` would
    build its string at load, unbounded. This formatter compiles nothing; a call of the
    chat API it stands behind says why it is not there.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def to_chat_handler(self) -> Any:
        def handler(*args: object, **kwargs: object) -> Any:
            raise RuntimeError("agentworld renders chat prompts itself (engines.template)")

        return handler


@contextlib.contextmanager
def templates_left_uncompiled() -> Iterator[None]:
    import llama_cpp.llama_chat_format as chat_format

    # tests/test_template_bounds.py fails if llama-cpp-python stops looking it up here.
    with _LOADING:  # two engines loading at once must not restore each other's stand-in
        real = chat_format.Jinja2ChatFormatter
        chat_format.Jinja2ChatFormatter = _UnusedChatFormatter  # type: ignore[assignment,misc]
        try:
            yield
        finally:
            chat_format.Jinja2ChatFormatter = real  # type: ignore[misc]


_LOADING = threading.Lock()


def llama_arguments(
    model_path: Path, *, n_ctx: int, gpu_layers: int, threads: int, n_batch: int
) -> dict[str, Any]:
    """``llama_cpp.Llama``'s arguments, the same for the engine and its trial (``probe``).

    verbose=True because verbose=False points the process's stdout and stderr at
    /dev/null while loading, which would blank the running app's own screen; the native
    log goes to the log file instead, and Python-side prints are caught by the caller.
    """
    return {
        "model_path": str(model_path),
        "n_ctx": n_ctx,
        "n_gpu_layers": gpu_layers,
        "n_threads": threads,
        "n_threads_batch": threads,
        "n_batch": n_batch,
        "use_mmap": True,
        "verbose": True,
    }


def placement(gpu_layers: int, threads: int) -> tuple[int, int]:
    """The GPU layers and threads llama.cpp is given for these settings (-1 and 0: as many
    as this build and machine have)."""
    import llama_cpp

    from agentworld_tui.engines.threads import physical_cores

    if gpu_layers < 0:
        gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
    return gpu_layers, threads or physical_cores()


def system_info() -> str:
    """llama.cpp's line about what this build uses (CPU features, backends)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)


def crash_error(model_path: Path, outcome: ProbeOutcome, name: str = "") -> EngineError:
    """The error of a model whose trial crashed, with the fix for this machine (``name``
    says which model, else its file's name)."""
    message = crash_message(name or model_path.name, outcome, system_info())
    return EngineError(message, ErrorKind.CRASHED)


def check_gguf(path: Path) -> None:
    """Refuse a missing, non-GGUF or truncated file with a clear message before llama.cpp."""
    if not path.exists():
        raise EngineError(f"model file not found: {path}")
    if path.is_dir():
        raise EngineError(f"{path} is a folder; give the path of a .gguf file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise EngineError(f"cannot read the model file {path}: {exc}") from exc
    if magic != b"GGUF":
        raise EngineError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")


def trained_context(path: Path) -> int:
    """The context length the model was trained for, from the GGUF header (0 if unknown)."""
    try:
        import gguf

        reader = gguf.GGUFReader(str(path))
        arch_field = reader.get_field("general.architecture")
        if arch_field is None:
            return 0
        arch = str(arch_field.contents())
        length = reader.get_field(f"{arch}.context_length")
        return int(length.contents()) if length is not None else 0
    except Exception:  # a damaged header is reported by llama.cpp itself
        return 0


def common_prefix(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


@dataclass(eq=False)  # compared by identity: == on numpy token arrays is not a bool
class _Checkpoint:
    tokens: np.ndarray[Any, Any]
    data: bytes | np.ndarray[Any, Any]
    """The state as llama.cpp wrote it (an array of bytes, or bytes)."""
    used: float
    flags: int = 0
    """The ``llama_state_seq_flags`` it was saved with (restored with the same)."""
    standalone: bool = False
    """Holds the whole sequence state: it can be restored whatever the cache holds."""
    cuttable: bool = False
    """A transformer's whole state: once restored it can be cut back to any prefix."""
    history: int = -1
    """Where the history of the prompt it was saved from ends (-1: at its end)."""

    def reach(self, tokens: np.ndarray[Any, Any], limit: int) -> int:
        """How many of ``tokens`` (at most ``limit``) restoring this state gives (0: none)."""
        if self.cuttable:
            return min(common_prefix(self.tokens, tokens), limit)
        n = len(self.tokens)
        return n if n <= limit and np.array_equal(self.tokens, tokens[:n]) else 0


class StateStore:
    """Saved sequence states keyed by the tokens they hold; least recently used go first."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._items: list[_Checkpoint] = []

    @property
    def size(self) -> int:
        return sum(len(c.data) for c in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(
        self,
        tokens: np.ndarray[Any, Any],
        data: bytes | np.ndarray[Any, Any],
        *,
        flags: int = 0,
        standalone: bool = False,
        cuttable: bool = False,
        history: int = -1,
    ) -> None:
        if len(data) > self.budget:
            return
        whole = standalone and flags == 0

        def replaced(c: _Checkpoint) -> bool:
            if c.standalone != standalone:
                return False
            if np.array_equal(c.tokens, tokens):
                return True
            # A conversation's newer whole state serves all that an older one served but
            # a retry of an old turn: the older one only takes room.
            covered = len(c.tokens) if c.history < 0 else c.history
            return whole and c.flags == 0 and common_prefix(c.tokens, tokens) >= covered

        self._items = [c for c in self._items if not replaced(c)]
        saved = _Checkpoint(
            tokens.copy(), data, time.monotonic(), flags, standalone, cuttable, history
        )
        self._items.append(saved)
        while self.size > self.budget:
            self._items.remove(min(self._items, key=lambda c: c.used))

    def get(self, tokens: np.ndarray[Any, Any], *, standalone: bool) -> _Checkpoint | None:
        """The saved state of exactly ``tokens``, of that kind, if there is one."""
        for c in self._items:
            if c.standalone == standalone and np.array_equal(c.tokens, tokens):
                return c
        return None

    def best(
        self, tokens: np.ndarray[Any, Any], limit: int, *, standalone_only: bool = False
    ) -> _Checkpoint | None:
        """The saved state that restores the most of ``tokens``, at most ``limit`` of them.

        That is the longest one that is a prefix of ``tokens``, or, for a state that can
        be cut back, the one sharing the longest prefix with them.
        """
        best: _Checkpoint | None = None
        most = 0
        for c in self._items:
            if standalone_only and not c.standalone:
                continue
            n = c.reach(tokens, limit)
            if n > most:
                best, most = c, n
        if best is not None:
            best.used = time.monotonic()
        return best


class LlamaEngine:
    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 0,
        gpu_layers: int = -1,
        threads: int = 0,
        state_budget_bytes: int = 2 << 30,
        n_batch: int = 512,
        probe: CrashProbe | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        self.requested_ctx = n_ctx
        self.requested_gpu_layers = gpu_layers
        self.threads = threads
        self.n_batch = n_batch
        self.probe = probe if probe is not None else CrashProbe()
        """Tries a model in a child process before it is loaded here."""
        self.states = StateStore(state_budget_bytes)
        self._llm: Any = None
        self._template: ChatTemplate | None = None
        self._lock = threading.Lock()
        self._gpu_layers = 0
        self._n_layer = 0
        self._hybrid = False
        self._attention = True
        self._last_prompt: tuple[np.ndarray[Any, Any], int] | None = None
        """The last prompt's tokens and where its history ends."""
        self._state_path: tuple[Path, int] | None = None
        self._state_file: StateFile | None = None
        self._state_tokens = 0
        """How many tokens the state read from the state file held (0: none read)."""

    def keep_state(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Go on from the state in ``path`` when it begins the next prompt, and write there
        the state of that prompt's history (``engines.state_file``); None: no file."""
        self._state_path = None if path is None else (path, max_bytes)
        self._state_file = None

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @property
    def info(self) -> EngineInfo:
        where = "CPU"
        if self._gpu_layers:
            where = f"GPU {min(self._gpu_layers, self._n_layer + 1)}/{self._n_layer + 1} layers"
        n_ctx = self._llm.n_ctx() if self._llm is not None else self.requested_ctx
        return EngineInfo(self.model_path.name, where, n_ctx, engine="llama-cpp-python")

    @property
    def recurrent(self) -> bool:
        """Whether the model keeps a state that cannot be cut back (recurrent or hybrid)."""
        return self._hybrid

    @property
    def supports_answer_now(self) -> bool:
        """In-process, the engine can close the reasoning itself and make the model answer."""
        return True

    def load(self, progress: ProgressCallback | None = None) -> None:
        say = progress or (lambda _msg: None)
        check_gguf(self.model_path)
        say("starting llama.cpp")
        import llama_cpp

        route_native_logs()
        offload = llama_cpp.llama_supports_gpu_offload()
        gpu_layers, threads = placement(self.requested_gpu_layers, self.threads)
        n_ctx = self.requested_ctx or min(
            DEFAULT_N_CTX, trained_context(self.model_path) or DEFAULT_N_CTX
        )
        self._try_first(gpu_layers, threads, say)
        say(f"loading {self.model_path.name}")
        arguments = llama_arguments(
            self.model_path,
            n_ctx=n_ctx,
            gpu_layers=gpu_layers,
            threads=threads,
            n_batch=self.n_batch,
        )
        try:
            with contextlib.redirect_stderr(_StderrToLog()), templates_left_uncompiled():
                llm = llama_cpp.Llama(**arguments)
        except (ValueError, RuntimeError, OSError) as exc:
            raise EngineError(self._load_failure(str(exc), n_ctx)) from exc
        self._n_layer = int(llama_cpp.llama_model_n_layer(llm.model))
        self._gpu_layers = (self._n_layer + 1 if gpu_layers < 0 else gpu_layers) if offload else 0
        purely_recurrent = bool(llama_cpp.llama_model_is_recurrent(llm.model))
        self._hybrid = purely_recurrent or bool(llama_cpp.llama_model_is_hybrid(llm.model))
        self._attention = not purely_recurrent
        self._last_prompt = None
        metadata = llm.metadata
        self._template = ChatTemplate(
            metadata.get("tokenizer.chat_template"),
            bos_token=self._token_text(llm, llm.token_bos()),
            eos_token=self._token_text(llm, llm.token_eos()),
        )
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._pieces: dict[int, bytes] = {}
        self._llm = llm
        log.info(
            "loaded %s: n_ctx=%d gpu_layers=%d threads=%d hybrid=%s",
            self.model_path,
            llm.n_ctx(),
            self._gpu_layers,
            threads,
            self._hybrid,
        )
        say("ready")

    def _try_first(self, gpu_layers: int, threads: int, say: ProgressCallback) -> None:
        """Run the model's first decode in a child process (``probe``) unless it passed
        before; raises EngineError (``ErrorKind.CRASHED``) when llama.cpp crashed there."""
        trial = Trial(self.model_path, threads, gpu_layers, self.n_batch)
        try:
            key = trial.key()
        except OSError as exc:
            raise EngineError(f"cannot read the model file {self.model_path}: {exc}") from exc
        if not self.probe.known(key):
            say(f"trying {self.model_path.name} in a separate process")
        outcome = self.probe.check(trial, key)
        if outcome.crashed:
            raise crash_error(self.model_path, outcome)

    def _load_failure(self, detail: str, n_ctx: int) -> str:
        text = f"could not load {self.model_path.name}: {detail}"
        if "context" in detail.lower():
            text += f" (context {n_ctx}; try a smaller --ctx)"
        else:
            text += (
                ". The file may be truncated, or its architecture may be newer than this "
                "llama.cpp build (see the log file; `agentworld doctor` shows the build)."
            )
        return text

    @staticmethod
    def _token_text(llm: Any, token: int) -> str:
        if token < 0:
            return ""
        return str(llm.detokenize([token], special=True).decode("utf-8", "replace"))

    def _piece(self, token: int) -> bytes:
        """The bytes of one token, whatever their length.

        (llama-cpp-python's ``detokenize`` reads pieces into a 32-byte buffer and silently
        cuts longer ones, such as a long run of spaces or dashes.)
        """
        piece = self._pieces.get(token)
        if piece is None:
            import llama_cpp

            size = 64
            while True:
                buffer = ctypes.create_string_buffer(size)
                n = int(llama_cpp.llama_token_to_piece(self._vocab, token, buffer, size, 0, True))
                if n >= 0:
                    piece = buffer.raw[:n]
                    break
                size = -n
            self._pieces[token] = piece
        return piece

    def unload(self) -> None:
        with self._lock:
            if self._llm is not None:
                self._llm.close()
            self._llm = None
            self.states = StateStore(self.states.budget)
            self._last_prompt = None

    # -- tokens -------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        if self._llm is None:
            return max(1, len(text) // 3)
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def render(
        self,
        messages: list[Message],
        params: GenerationParams,
        control: GenerationControl | None = None,
    ) -> tuple[str, str]:
        """The full prompt and its history part (everything before the generation prompt)."""
        assert self._template is not None
        thinking = params.enable_thinking
        full = self._template.render(messages, enable_thinking=thinking, control=control)
        base = self._template.render(
            messages, add_generation_prompt=False, enable_thinking=thinking, control=control
        )
        return full, base

    def _last_message_start(
        self, messages: list[Message], params: GenerationParams, tokens: np.ndarray[Any, Any]
    ) -> int:
        """Where the last message's content begins in ``tokens`` (0 if it cannot be told).

        The messages are rendered again with that content left empty: the same messages and
        roles, so a template that renders a message by its place (Qwen3 shows an answer's
        reasoning only after the last user message) renders everything before it the same.
        The common prefix with ``tokens`` then ends where the content begins, after its role
        header, which a retried, undone, edited or dropped last turn shares too. (A cut
        further in, after the markup that actions share, such as "### Turn ", would save a
        few tokens but miss an edited action that differs earlier.)
        """
        if len(messages) < 2:
            return 0
        assert self._template is not None
        blank = [*messages[:-1], {**messages[-1], "content": ""}]
        try:
            text = self._template.render(blank, enable_thinking=params.enable_thinking)
        except EngineError:
            return 0
        return common_prefix(self._tokenize(text), tokens)

    def _tokenize(self, text: str) -> np.ndarray[Any, Any]:
        ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return np.asarray(ids, dtype=np.intc)

    # -- generation ---------------------------------------------------------------------
    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        if self._llm is None:
            raise EngineError("no model is loaded")
        with self._lock:
            yield from self._stream_locked(messages, params, control)

    def _stream_locked(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        import llama_cpp

        llm = self._llm
        started = time.perf_counter()
        try:
            full, base = self.render(messages, params, control)
        except RenderCancelled:
            yield self._finished("", "", False, 0, 0, 0, started, None, "cancelled")
            return
        tokens = self._tokenize(full)
        base_tokens = self._tokenize(base)
        history_end = common_prefix(base_tokens, tokens)
        if self._state_path is not None:
            self._read_state_file(tokens)
        saves = {history_end}
        if self._hybrid:
            saves.add(self._last_message_start(messages, params, tokens))
        saves.discard(0)
        n_ctx = llm.n_ctx()
        room = n_ctx - len(tokens)
        if room <= 0:
            raise ContextOverflowError(
                f"the prompt is {len(tokens)} tokens and the context holds {n_ctx}"
            )
        max_new = min(params.max_tokens, room)

        ctx = llm.ctx
        start = self._reuse_cache(tokens)
        self._last_prompt = (tokens, history_end)
        for stop_at in sorted(saves | {len(tokens)}):
            while llm.n_tokens < stop_at:
                if control.cancelled:
                    read = int(llm.n_tokens) - start
                    yield self._finished(
                        "", "", False, len(tokens), read, 0, started, None, "cancelled"
                    )
                    return
                chunk = tokens[llm.n_tokens : min(stop_at, llm.n_tokens + self.n_batch)]
                llm.eval(chunk.tolist())
                yield PromptProgress(llm.n_tokens - start, len(tokens) - start)
            if stop_at in saves and self._hybrid and stop_at > start:
                self._save_state(tokens[:stop_at])
            if stop_at == history_end and self._state_file is not None:
                self._write_state_file(tokens[:stop_at])
        # llama.cpp's perf counters lag by one decode call, so the evaluated count is the
        # number of positions actually decoded for this prompt.
        evaluated = int(llm.n_tokens) - start

        splitter = ObservationSplitter(
            starts_in_reasoning=params.enable_thinking and opens_reasoning(full)
        )
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        sampler = self._sampler(params)
        generated = reasoning_tokens = 0
        first_token_at: float | None = None
        stop: StopReason = "max_tokens"
        try:
            while generated < max_new:
                if control.cancelled:
                    stop = "cancelled"
                    break
                if splitter.in_reasoning and (
                    control.take_answer_request()
                    or (params.reasoning_budget and reasoning_tokens >= params.reasoning_budget)
                ):
                    close = llm.tokenize(CLOSE_REASONING.encode(), add_bos=False, special=True)
                    if llm.n_tokens + len(close) >= n_ctx:
                        break
                    llm.eval(close)
                    yield from self._events(splitter, CLOSE_REASONING, generated, reasoning_tokens)
                token = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
                if first_token_at is None:
                    first_token_at = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    stop = "eos"
                    break
                generated += 1
                if splitter.in_reasoning:
                    reasoning_tokens += 1
                text = decoder.decode(self._piece(token))
                if text:
                    yield from self._events(splitter, text, generated, reasoning_tokens)
                if llm.n_tokens >= n_ctx:
                    break
                llm.eval([token])
            tail = decoder.decode(b"", final=True)
            if tail:
                yield from self._events(splitter, tail, generated, reasoning_tokens)
        finally:
            llama_cpp.llama_sampler_free(sampler)
        split, reasoning_delta, answer_delta, reset = splitter.finish()
        if reasoning_delta:
            yield ReasoningDelta(reasoning_delta, generated, reasoning_tokens)
        if answer_delta or reset:
            yield AnswerDelta(answer_delta, generated, reset)
        stats = GenerationStats(
            prompt_tokens=len(tokens),
            evaluated_prompt_tokens=evaluated,
            generated_tokens=generated,
            reasoning_tokens=reasoning_tokens,
            time_to_first_token=(first_token_at or time.perf_counter()) - started,
            tokens_per_second=_rate(generated, first_token_at),
            elapsed=time.perf_counter() - started,
            stop_reason=stop,
            n_ctx=n_ctx,
        )
        yield Finished(
            split.reasoning,
            split.observation,
            split.closed_reasoning,
            stats,
            raw=splitter.raw,
            extraction=split.extraction,
        )

    @staticmethod
    def _events(
        splitter: ObservationSplitter, text: str, generated: int, reasoning_tokens: int
    ) -> Iterator[EngineEvent]:
        reasoning, answer, reset = splitter.feed(text)
        if reasoning:
            yield ReasoningDelta(reasoning, generated, reasoning_tokens)
        if answer or reset:
            yield AnswerDelta(answer, generated, reset)

    def _finished(
        self,
        reasoning: str,
        observation: str,
        closed: bool,
        prompt_tokens: int,
        evaluated: int,
        generated: int,
        started: float,
        first: float | None,
        stop: StopReason,
    ) -> Finished:
        stats = GenerationStats(
            prompt_tokens=prompt_tokens,
            evaluated_prompt_tokens=evaluated,
            generated_tokens=generated,
            elapsed=time.perf_counter() - started,
            stop_reason=stop,
            n_ctx=self.info.n_ctx,
        )
        return Finished(reasoning, observation, closed, stats)

    def _sampler(self, params: GenerationParams) -> Any:
        import llama_cpp

        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        if params.temperature <= 0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
            return chain
        if params.top_k > 0:
            add(chain, llama_cpp.llama_sampler_init_top_k(params.top_k))
        add(chain, llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(params.temperature))
        seed = params.seed if params.seed >= 0 else llama_cpp.LLAMA_DEFAULT_SEED
        add(chain, llama_cpp.llama_sampler_init_dist(seed))
        return chain

    # -- the cache ----------------------------------------------------------------------
    def _reuse_cache(self, tokens: np.ndarray[Any, Any]) -> int:
        """Keep or restore as much of ``tokens`` as is saved; returns the tokens kept.

        What the cache holds is reused up to its common prefix with ``tokens`` (through a
        recurrent checkpoint on a recurrent model); a standalone saved state (another
        conversation's, kept when the engine left it) is restored when it goes further.
        """
        llm = self._llm
        cached = llm.input_ids[: llm.n_tokens]
        # At least one token is always evaluated, so there are fresh logits to sample.
        limit = len(tokens) - 1
        common = min(common_prefix(cached, tokens), limit)
        if common and common == llm.n_tokens:
            return common
        in_cache = self.states.best(tokens, common) if self._hybrid else None
        elsewhere = self.states.best(tokens, limit, standalone_only=True)
        self._keep_conversation(common)
        reach = in_cache.reach(tokens, common) if in_cache is not None else 0
        if not self._hybrid:
            reach = common
        if elsewhere is not None and elsewhere.reach(tokens, limit) > reach:
            return self._restore_state(elsewhere, elsewhere.reach(tokens, limit))
        if not self._hybrid:
            llm.n_tokens = common  # eval() removes everything after n_tokens
            return common
        if in_cache is not None:
            return self._restore_state(in_cache, reach)
        llm.reset()
        return 0

    def _keep_conversation(self, common: int) -> None:
        """Save the whole state of the conversation the cache holds, when a prompt that
        shares only ``common`` tokens with it is about to replace it.

        A prompt that goes on from the end of the last prompt's history (the next turn, a
        retry) does not leave the conversation. Otherwise the state kept is the one a
        later turn of that conversation starts from: a transformer's cache cut back to the
        last prompt; a hybrid's recurrent checkpoint at the end of the last prompt's
        history, restored with the attention cache cut back to it, then saved whole.
        """
        import llama_cpp

        llm = self._llm
        if self._last_prompt is None or not self._attention:
            return
        last, history_end = self._last_prompt
        if common >= history_end:
            return
        held = common_prefix(llm.input_ids[: llm.n_tokens], last)
        if self._hybrid:
            end = history_end
            checkpoint = self.states.get(last[:end], standalone=False)
            if held < end or checkpoint is None or self.states.get(last[:end], standalone=True):
                return
            if not self._restore_state(checkpoint, end):
                return
        else:
            end = held
            if end <= common or self.states.get(last[:end], standalone=True):
                return
            memory = llama_cpp.llama_get_memory(llm.ctx)
            if not llama_cpp.llama_memory_seq_rm(memory, 0, end, -1):
                return
            llm.n_tokens = end
        self._save_state(last[:end], whole=True, history=min(history_end, end))

    def _save_state(
        self, tokens: np.ndarray[Any, Any], *, whole: bool = False, history: int = -1
    ) -> None:
        """Save the state of the sequence, which holds exactly ``tokens``.

        Unless ``whole``, only the recurrent part: a hybrid model's attention cache can be
        cut back, and it grows with the context, where the recurrent state has a fixed size.
        """
        import llama_cpp

        flags = 0 if whole else llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        data = self._state_bytes(flags, self.states.budget)
        if data is not None:
            standalone = whole or not self._attention
            cuttable = whole and not self._hybrid
            self.states.add(
                tokens,
                data,
                flags=flags,
                standalone=standalone,
                cuttable=cuttable,
                history=history,
            )

    def _state_bytes(self, flags: int, limit: int) -> np.ndarray[Any, Any] | None:
        """The sequence's state as llama.cpp writes it (None when empty or over ``limit``)."""
        import llama_cpp

        ctx = self._llm.ctx
        size = int(llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags))
        if size > limit:
            return None
        # llama.cpp writes the state straight into the stored array: nothing zero-filled
        # first, nothing copied after.
        buffer = np.empty(size, dtype=np.uint8)
        pointer = buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        written = int(llama_cpp.llama_state_seq_get_data_ext(ctx, pointer, size, 0, flags))
        return buffer[:written] if written else None

    # -- the state file -----------------------------------------------------------------
    def _read_state_file(self, tokens: np.ndarray[Any, Any]) -> None:
        """Offer the state file's state to ``_reuse_cache`` when it begins ``tokens``."""
        import llama_cpp

        assert self._state_path is not None
        path, max_bytes = self._state_path
        if self._state_file is None:
            build = f"llama-cpp-python {llama_cpp.__version__}; {system_info()}"
            try:
                key = state_key(build, self.model_path)
            except OSError as exc:
                log.warning("no model state file: %s", exc)
                self._state_path = None
                return
            self._state_file = StateFile(path, key, max_bytes)
        self._state_tokens = 0
        saved = self._state_file.load(tokens.tolist())
        if saved is None or self.states.get(np.asarray(saved.tokens), standalone=True):
            return
        data = self._state_file.read_state(saved)
        if data is None:
            return
        held = np.asarray(saved.tokens, dtype=np.intc)
        self.states.add(
            held, np.frombuffer(data, dtype=np.uint8), standalone=True, cuttable=not self._hybrid
        )
        self._state_tokens = len(held)

    def _write_state_file(self, tokens: np.ndarray[Any, Any]) -> None:
        """Write the whole state of the sequence, which holds exactly ``tokens``."""
        assert self._state_file is not None
        if len(tokens) == self._state_tokens:
            return  # the file holds this state already
        data = self._state_bytes(0, self._state_file.max_bytes)
        if data is None:
            self._state_file.drop("the state is over its bound")
            return
        if self._state_file.save(tokens.tolist(), data):
            self._state_tokens = len(tokens)

    def _restore_state(self, checkpoint: _Checkpoint, n: int) -> int:
        """Restore a saved state so that the cache holds its first ``n`` tokens; returns
        ``n``, or 0 when it failed (the cache is then empty).

        A recurrent-only state of a hybrid model needs the attention cache to hold the
        checkpoint's tokens at its start (``_reuse_cache`` asks only for such states): it is
        kept and cut back to the same position. A standalone state replaces the sequence;
        a transformer's is then cut back to ``n``.
        """
        import llama_cpp

        llm = self._llm
        data = np.frombuffer(checkpoint.data, dtype=np.uint8)  # read in place, not copied
        pointer = data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        memory = llama_cpp.llama_get_memory(llm.ctx)
        restored = bool(
            llama_cpp.llama_state_seq_set_data_ext(llm.ctx, pointer, len(data), 0, checkpoint.flags)
        )
        if restored and (checkpoint.cuttable or not checkpoint.standalone):
            restored = bool(llama_cpp.llama_memory_seq_rm(memory, 0, n, -1))
        if not restored:
            log.warning("could not restore a saved state; evaluating the prompt again")
            llm.reset()
            return 0
        llm.input_ids[:n] = checkpoint.tokens[:n]
        llm.n_tokens = n
        return n


def _rate(generated: int, first_token_at: float | None) -> float:
    if first_token_at is None or generated < 2:
        return 0.0
    elapsed = time.perf_counter() - first_token_at
    return (generated - 1) / elapsed if elapsed > 0 else 0.0
