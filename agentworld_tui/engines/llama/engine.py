"""The world model in-process, through llama-cpp-python: the engine and its decoding loop.

One model stays loaded across turns so that its cache is reused (``engines.llama.cache``:
what the context holds and the saved states it can go back to). A turn renders the prompt
(``engines.template``), reads what the cache does not hold, saving the states the cache
asks for on the way, then samples token by token; for answer-now or the reasoning budget
the engine closes the reasoning itself and the model answers.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from agentworld_tui.engines.answer import CLOSE_REASONING, LocalAnswer, ended
from agentworld_tui.engines.base import (
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineInfo,
    GenerationControl,
    GenerationParams,
    Message,
    ProgressCallback,
    PromptProgress,
    StopReason,
)
from agentworld_tui.engines.llama.cache import SequenceCache
from agentworld_tui.engines.llama.loading import (
    open_model,
    placement,
    route_native_logs,
    system_info,
    try_first,
)
from agentworld_tui.engines.llama.states import StateStore
from agentworld_tui.engines.model_file import check_gguf, context_size, model_metadata
from agentworld_tui.engines.prefix import common_prefix
from agentworld_tui.engines.probe import CrashProbe, Trial
from agentworld_tui.engines.state_file import DEFAULT_MAX_BYTES, KeptStateFile
from agentworld_tui.engines.template import ChatTemplate, RenderCancelled

log = logging.getLogger("agentworld.engine")


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
        self._states = StateStore(state_budget_bytes)
        self._llm: Any = None
        self._cache: SequenceCache | None = None
        self._template: ChatTemplate | None = None
        self._lock = threading.Lock()
        self._gpu_layers = 0
        self._n_layer = 0
        self._hybrid = False
        self._build = ""
        self._kept = KeptStateFile()

    def keep_state(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Go on from the state in ``path`` when it begins the next prompt, and write there
        the state of that prompt's history (``engines.state_file``); None: no file."""
        self._kept.keep(path, max_bytes)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @property
    def states(self) -> StateStore:
        """The saved sequence states of the loaded model (``engines.llama.cache``)."""
        return self._states

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
        trained = 0 if self.requested_ctx else model_metadata(self.model_path).trained_context
        n_ctx = context_size(self.requested_ctx, trained)
        try_first(self.probe, Trial(self.model_path, threads, gpu_layers, self.n_batch), say)
        say(f"loading {self.model_path.name}")
        llm = open_model(
            self.model_path,
            n_ctx=n_ctx,
            gpu_layers=gpu_layers,
            threads=threads,
            n_batch=self.n_batch,
        )
        self._n_layer = int(llama_cpp.llama_model_n_layer(llm.model))
        self._gpu_layers = (self._n_layer + 1 if gpu_layers < 0 else gpu_layers) if offload else 0
        purely_recurrent = bool(llama_cpp.llama_model_is_recurrent(llm.model))
        self._hybrid = purely_recurrent or bool(llama_cpp.llama_model_is_hybrid(llm.model))
        self._cache = SequenceCache(
            llm, self._states, hybrid=self._hybrid, attention=not purely_recurrent
        )
        metadata = llm.metadata
        self._template = ChatTemplate(
            metadata.get("tokenizer.chat_template"),
            bos_token=self._token_text(llm, llm.token_bos()),
            eos_token=self._token_text(llm, llm.token_eos()),
        )
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._pieces: dict[int, bytes] = {}
        self._build = f"llama-cpp-python {llama_cpp.__version__}; {system_info()}"
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
            self._cache = None
            self._states = StateStore(self._states.budget)

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
        return self._template.render_turn(
            messages, enable_thinking=params.enable_thinking, control=control
        )

    def _last_message_start(
        self, messages: list[Message], params: GenerationParams, tokens: np.ndarray[Any, Any]
    ) -> int:
        """Where the last message's content begins in ``tokens`` (0 if it cannot be told;
        see ``ChatTemplate.blank_last``)."""
        assert self._template is not None
        text = self._template.blank_last(messages, enable_thinking=params.enable_thinking)
        return common_prefix(self._tokenize(text), tokens) if text else 0

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

        llm, cache = self._llm, self._cache
        assert cache is not None
        started = time.perf_counter()
        try:
            full, base = self.render(messages, params, control)
        except RenderCancelled:
            yield ended(started, "cancelled", self.info.n_ctx)
            return
        tokens = self._tokenize(full)
        history_end = common_prefix(self._tokenize(base), tokens)
        state_file = self._kept.open(self._build, self.model_path)
        if state_file is not None:
            cache.offer_file(state_file, tokens)
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
        start = cache.reuse(tokens)
        cache.last_prompt = (tokens, history_end)
        for stop_at in sorted(saves | {len(tokens)}):
            while llm.n_tokens < stop_at:
                if control.cancelled:
                    read = int(llm.n_tokens) - start
                    yield ended(
                        started, "cancelled", n_ctx, prompt_tokens=len(tokens), evaluated=read
                    )
                    return
                chunk = tokens[llm.n_tokens : min(stop_at, llm.n_tokens + self.n_batch)]
                llm.eval(chunk.tolist())
                yield PromptProgress(llm.n_tokens - start, len(tokens) - start)
            if stop_at in saves and self._hybrid and stop_at > start:
                cache.save(tokens[:stop_at])
            if stop_at == history_end and state_file is not None:
                cache.write_file(state_file, tokens[:stop_at])
        # llama.cpp's perf counters lag by one decode call, so the evaluated count is the
        # number of positions actually decoded for this prompt.
        evaluated = int(llm.n_tokens) - start

        answer = LocalAnswer(full, params, started)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        sampler = self._sampler(params)
        generated = reasoning_tokens = 0
        stop: StopReason = "max_tokens"
        try:
            while generated < max_new:
                if control.cancelled:
                    stop = "cancelled"
                    break
                if answer.in_reasoning and (
                    control.take_answer_request()
                    or (params.reasoning_budget and reasoning_tokens >= params.reasoning_budget)
                ):
                    close = llm.tokenize(CLOSE_REASONING.encode(), add_bos=False, special=True)
                    if llm.n_tokens + len(close) >= n_ctx:
                        break
                    llm.eval(close)
                    yield from answer.feed(CLOSE_REASONING, generated, reasoning_tokens)
                token = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
                answer.first_token()
                if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    stop = "eos"
                    break
                generated += 1
                if answer.in_reasoning:
                    reasoning_tokens += 1
                text = decoder.decode(self._piece(token))
                if text:
                    yield from answer.feed(text, generated, reasoning_tokens)
                if llm.n_tokens >= n_ctx:
                    break
                llm.eval([token])
            tail = decoder.decode(b"", final=True)
            if tail:
                yield from answer.feed(tail, generated, reasoning_tokens)
        finally:
            llama_cpp.llama_sampler_free(sampler)
        yield from answer.finish(
            prompt_tokens=len(tokens),
            evaluated=evaluated,
            generated=generated,
            reasoning_tokens=reasoning_tokens,
            stop=stop,
            n_ctx=n_ctx,
        )

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
