"""The world model in-process on llama.cpp's own server engine, through xllamacpp.

One model serves many conversations at once: the server keeps ``slots`` sequences in one
context and decodes them together (continuous batching), so a pool of environments, many
MCP clients or a rollout's episodes share the model instead of queueing behind each
other. Its prompt cache does what ``engines/llama/cache.py`` does by hand: a request goes to the
slot whose cache shares the most with its prompt, a hybrid model's recurrent state is
checkpointed a few tokens before the end of every prompt (so the next turn, whose prompt
goes on from there, reads only what is new), and a slot taken by another conversation
first saves the one it held in host memory, to be restored when that conversation comes
back.

Prompts are rendered here, by ``engines.template`` (within its bounds), and sent as text
to the completions endpoint, so both in-process engines give the model the same tokens.
Stop is the stream's callback saying so; answer-now and the reasoning budget end the
request and continue it with the reasoning closed, which the prompt cache reads from
where the first one stopped.

The server also listens on 127.0.0.1 (xllamacpp always starts its HTTP side): on a free
port, behind an API key made for this process, used here only to count tokens.

A native crash in the server would end the process with no word, so before a build first
runs a model, a child process loads it with the same settings and decodes on two slots
(``engines/probe.py``); a crash there stops the load with what to do (another xllamacpp
wheel, or the other engine).
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import logging
import os
import queue
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentworld_tui.engines.answer import CLOSE_REASONING, LocalAnswer, ended
from agentworld_tui.engines.base import (
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineInfo,
    ErrorKind,
    GenerationControl,
    GenerationParams,
    Message,
    ProgressCallback,
    PromptProgress,
    StopReason,
)
from agentworld_tui.engines.model_file import check_gguf, context_size, model_metadata
from agentworld_tui.engines.prefix import common_prefix, common_text
from agentworld_tui.engines.probe import CrashProbe, Trial, xllamacpp_crash_message
from agentworld_tui.engines.state_file import DEFAULT_MAX_BYTES, KeptStateFile
from agentworld_tui.engines.template import ChatTemplate, RenderCancelled

log = logging.getLogger("agentworld.engine")

ENGINE_NAME = "xllamacpp"
DEFAULT_SLOTS = 4
"""Slots when none are asked for and the front-end did not size them to the machine."""
CHECKPOINTS_PER_SLOT = 8
"""Recurrent-state checkpoints a slot keeps (a hybrid model's; each is the state's size)."""
PROMPT_CACHE_MIB = 2048
"""Host memory for the states of conversations whose slot another one took."""
POLL_S = 0.05
"""How often a stream waiting for the server looks at its control."""
TOKENIZE_TIMEOUT_S = 30.0
LISTEN_TIMEOUT_S = 30.0


def server_params(
    model_path: Path,
    *,
    n_ctx: int,
    slots: int,
    gpu_layers: int,
    threads: int,
    checkpoints: int = CHECKPOINTS_PER_SLOT,
    prompt_cache_mib: int = PROMPT_CACHE_MIB,
) -> Any:
    """xllamacpp's server settings (``n_ctx`` for each slot), the same for the engine and
    its trial (``probe``); listening on a free port of 127.0.0.1 behind a key made here."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_parallel = slots
    params.n_ctx = n_ctx * slots  # each slot holds one conversation's context
    params.kv_unified = False
    params.n_gpu_layers = gpu_layers
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_ctx_checkpoints = checkpoints
    # A checkpoint where each prompt's last message begins (see _stream), however close
    # to the one before: the server's default spacing keeps one in thousands of tokens.
    params.checkpoint_min_step = 1
    params.cache_ram_mib = prompt_cache_mib
    # Not every idle slot copied into the prompt cache at every request's start: with
    # many conversations in their slots that copying took more than the decoding. A
    # slot another conversation takes is still kept there first.
    params.cache_idle_slots = False
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [secrets.token_urlsafe(32)]
    params.warmup = False
    params.verbosity = 0  # the native log would go to the terminal the app draws on
    # A request that goes on from no slot's conversation takes the least recently used
    # slot, whose conversation the server first keeps in its prompt cache (and it
    # restores this one's from there): never a slot by a shared system prompt alone.
    params.slot_prompt_similarity = 0.0
    return params


@dataclass(frozen=True)
class _Placement:
    """Where one prompt goes: see ``_SlotTable.take``."""

    slot: int
    """The slot the first request names (-1: the server's choice)."""
    chosen: int
    """The slot that will hold the conversation (-1: unknown, all are busy)."""
    source: int = -1
    """A slot to copy into ``chosen`` first (a fork of the conversation it holds)."""
    new_head: bool = False
    """The prompt's head (up to its last message) is new to the slot: worth a checkpoint."""


class _SlotTable:
    """Which conversation each slot holds, as far as this engine sent them.

    A prompt that goes on from the history of a slot's last prompt (the next turn, a
    retry) is sent to that slot (``id_slot``), where the server reads only what is new.
    One that shares with a slot's history its first turn and at least half of itself,
    without going on from it (a fork of that conversation, or a retry of an
    earlier turn), gets a copy of that slot in another one, when the engine can copy
    slots and another is idle: both conversations keep their state (several forks of one
    conversation copy it at once). Any other (a new conversation, one coming back) is
    left to the server (-1): it takes the least recently used slot, keeps the
    conversation there in its prompt cache and restores the best one it has for this
    prompt. The table follows it by the same rule (the engine sends such prompts one at
    a time); were it wrong, a prompt would only be read again, never answered wrong.
    """

    def __init__(self, slots: int, *, can_copy: bool = False) -> None:
        self._lock = threading.Lock()
        self._history = [""] * slots
        self._head = [""] * slots
        self._busy = [False] * slots
        self._reading = [0] * slots
        """Copies being made of each slot: it is read, so nothing may be written there."""
        self._used = [0.0] * slots
        self._asked: dict[int, tuple[str, str]] = {}
        self._can_copy = can_copy

    def take(self, prompt: str, history: str, head: str = "", first: int = 0) -> _Placement:
        """Where to send ``prompt`` (whose history part is ``history``, head ``head``, and
        system message and first turn ``first`` characters long)."""
        with self._lock:
            readable = [i for i, busy in enumerate(self._busy) if not busy]
            idle = [i for i in readable if not self._reading[i]]
            held = [i for i in idle if self._history[i] and prompt.startswith(self._history[i])]
            shared = {i: common_text(prompt, self._history[i]) for i in readable}
            near = [i for i in readable if shared[i] > first and shared[i] * 2 >= len(prompt)]
            source = -1
            if near and not held and self._can_copy:
                source = max(near, key=lambda i: (shared[i], self._used[i]))
                if not [i for i in idle if i != source]:
                    source = -1  # no other slot to copy it to: the server's cache
            if held:
                slot = max(held, key=lambda i: len(self._history[i]))
                chosen = slot
            elif source >= 0:
                others = [i for i in idle if i != source]
                slot = chosen = min(others, key=lambda i: (self._used[i], -i))
                self._reading[source] += 1
            else:
                slot = -1
                # The server's rule: the oldest use, the last slot of equals.
                chosen = min(idle, key=lambda i: (self._used[i], -i)) if idle else -1
            new_head = False
            if chosen >= 0:
                self._busy[chosen] = True
                self._asked[chosen] = (history, head)
                kept = self._head[source if source >= 0 else chosen]
                new_head = bool(head) and head != kept
            return _Placement(slot, chosen, source, new_head)

    def copied(self, placement: _Placement) -> None:
        """The copy of ``placement.source`` is done: that slot may be written again."""
        with self._lock:
            self._reading[placement.source] -= 1

    def give_back(self, chosen: int) -> None:
        if chosen < 0:
            return
        with self._lock:
            self._busy[chosen] = False
            self._used[chosen] = time.monotonic()
            self._history[chosen], self._head[chosen] = self._asked.pop(chosen, ("", ""))


@dataclass
class _Request:
    """One completions request in flight: its chunks arrive on ``chunks``."""

    body: dict[str, Any]
    chunks: queue.SimpleQueue[dict[str, Any] | None] = field(default_factory=queue.SimpleQueue)
    halt: bool = False
    """Set to end the request at its next chunk (the callback's answer)."""
    stop_at: int = 0
    """Generated tokens after which the request ends (the reasoning budget); 0: none.
    Checked here, on the thread that receives the chunks, so it is exact."""
    placing: threading.Lock | None = None
    """Released at the first chunk (the server has placed the request) or at the end."""

    def placed(self) -> None:
        placing, self.placing = self.placing, None
        if placing is not None:
            placing.release()

    def on_chunk(self, chunk: dict[str, Any]) -> bool:
        self.placed()
        self.chunks.put(chunk)
        if self.stop_at:
            timings = chunk.get("timings")
            generated = timings.get("predicted_n", 0) if isinstance(timings, dict) else 0
            if isinstance(generated, int) and generated >= self.stop_at:
                self.halt = True
        return self.halt


@dataclass
class _Progress:
    """What the stream has seen of the server's counters so far."""

    prompt_tokens: int = 0
    evaluated: int = 0
    generated: int = 0
    finish: str = ""


class XLlamaEngine:
    """A GGUF model on xllamacpp's in-process server, with ``slots`` conversations at once."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 0,
        gpu_layers: int = -1,
        threads: int = 0,
        slots: int = 0,
        checkpoints: int = CHECKPOINTS_PER_SLOT,
        prompt_cache_mib: int = PROMPT_CACHE_MIB,
        probe: CrashProbe | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        self.probe = probe if probe is not None else CrashProbe()
        """Tries a model in a child process before the server loads it here."""
        self.requested_ctx = n_ctx
        self.requested_gpu_layers = gpu_layers
        self.threads = threads
        self.slots = max(1, slots or DEFAULT_SLOTS)
        self.checkpoints = checkpoints
        self.prompt_cache_mib = prompt_cache_mib
        self._server: Any = None
        self._template: ChatTemplate | None = None
        self._n_ctx = 0
        self._address = ""
        self._key = ""
        self._gpu = False
        self._lock = threading.Lock()
        self._slots = _SlotTable(self.slots)
        self._unplaced = threading.Lock()
        """Held by a request the server places (-1) until the server has placed it, so
        the slot table can follow the server's choice."""
        self._checkpointed = False
        self._slot_dir: Path | None = None
        self._build = ""
        self._kept = KeptStateFile()

    def keep_state(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Go on from the state in ``path`` when it begins the next prompt, and write there
        the state of that prompt's history (``engines.state_file``): the server saves and
        restores a slot. None: no file."""
        self._kept.keep(path, max_bytes)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._server is not None

    @property
    def info(self) -> EngineInfo:
        where = f"{'GPU' if self._gpu else 'CPU'}, {self.slots} slots"
        return EngineInfo(
            self.model_path.name,
            where,
            self._n_ctx or self.requested_ctx,
            parallel=self.slots,
            engine=ENGINE_NAME,
        )

    @property
    def supports_answer_now(self) -> bool:
        """The engine closes the reasoning itself and has the model answer."""
        return True

    def load(self, progress: ProgressCallback | None = None) -> None:
        say = progress or (lambda _msg: None)
        check_gguf(self.model_path)
        say("starting llama.cpp (xllamacpp)")
        if importlib.util.find_spec("xllamacpp") is None:
            raise EngineError("the xllamacpp engine is not installed; pip install xllamacpp")
        from agentworld_tui.engines.threads import physical_cores

        threads = self.threads or physical_cores()
        self._try_first(threads, say)  # before its library is loaded in this process
        try:
            import xllamacpp
        except ImportError as exc:
            raise EngineError(
                f"the xllamacpp engine is not installed ({exc}); pip install xllamacpp"
            ) from exc

        header = model_metadata(self.model_path)
        n_ctx = context_size(self.requested_ctx, header.trained_context)
        params = server_params(
            self.model_path,
            n_ctx=n_ctx,
            slots=self.slots,
            gpu_layers=self.requested_gpu_layers,
            threads=threads,
            checkpoints=self.checkpoints,
            prompt_cache_mib=self.prompt_cache_mib,
        )
        key = params.api_keys[0]
        # Where the server saves and restores slots: a fork copies its conversation's
        # slot, and a state file goes through here. Private to this process.
        slot_dir = Path(tempfile.mkdtemp(prefix="agentworld-slots-"))
        params.slot_save_path = str(slot_dir) + os.sep
        say(f"loading {self.model_path.name}")
        try:
            server = xllamacpp.Server(params)
        except RuntimeError as exc:
            shutil.rmtree(slot_dir, ignore_errors=True)
            raise EngineError(
                f"could not load {self.model_path.name} with xllamacpp: {exc} (the file may be "
                "truncated, its context too large for this machine's memory, or its "
                "architecture newer than this build)"
            ) from exc
        self._template = ChatTemplate(header.template, bos_token=header.bos, eos_token=header.eos)
        self._checkpointed = header.checkpointed
        self._slot_dir = slot_dir
        self._build = f"xllamacpp {_version(xllamacpp)}"
        self._gpu = self.requested_gpu_layers != 0 and _offloads(xllamacpp)
        self._server = server
        self._slots = _SlotTable(self.slots, can_copy=True)
        self._address = str(server.listening_address)
        self._key = key
        self._n_ctx = n_ctx
        wait_serving(self._address, key)
        log.info(
            "loaded %s with xllamacpp %s: n_ctx=%d per slot, slots=%d, threads=%d",
            self.model_path,
            getattr(xllamacpp, "__version__", "?"),
            n_ctx,
            self.slots,
            threads,
        )
        say("ready")

    def _try_first(self, threads: int, say: ProgressCallback) -> None:
        """Run the model's first decode in a child process (``probe``) unless it passed
        before; raises EngineError (``ErrorKind.CRASHED``) when llama.cpp crashed there."""
        trial = Trial(self.model_path, threads, self.requested_gpu_layers, engine=ENGINE_NAME)
        outcome = self.probe.first_decode(trial, say)
        if outcome.crashed:
            message = xllamacpp_crash_message(self.model_path.name, outcome)
            raise EngineError(message, ErrorKind.CRASHED)

    def unload(self) -> None:
        with self._lock:
            server, self._server = self._server, None
            slot_dir, self._slot_dir = self._slot_dir, None
        del server  # its destructor stops the server's loop and frees the model
        if slot_dir is not None:
            shutil.rmtree(slot_dir, ignore_errors=True)

    # -- tokens -------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        if self._server is None:
            return max(1, len(text) // 3)
        return len(self.tokenize(text))

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        """The model's tokens for ``text`` (special tokens parsed; with ``add_special``, a
        BOS as the model asks, as the server adds it to a prompt)."""
        reply = self._call("/tokenize", {"content": text, "add_special": add_special})
        tokens = reply.get("tokens")
        if not isinstance(tokens, list):
            raise EngineError("the xllamacpp server did not tokenize the text")
        return [int(t) for t in tokens]

    def _slot_action(self, slot: int, action: str, filename: str) -> int:
        """Save a slot to, or restore it from, ``filename`` in the slot folder; returns the
        tokens it held (0: none, or it failed)."""
        try:
            reply = self._call(f"/slots/{slot}?action={action}", {"filename": filename})
        except EngineError as exc:
            log.warning("xllamacpp could not %s slot %d: %s", action, slot, exc)
            return 0
        count = reply.get("n_saved" if action == "save" else "n_restored")
        return count if isinstance(count, int) else 0

    def _copy_slot(self, source: int, target: int) -> None:
        """Give ``target`` the conversation ``source`` holds, with its checkpoints."""
        assert self._slot_dir is not None
        name = f"copy-{secrets.token_hex(8)}.bin"
        try:
            if self._slot_action(source, "save", name):
                self._slot_action(target, "restore", name)
        finally:
            with contextlib.suppress(OSError):
                (self._slot_dir / name).unlink()

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to the server's own HTTP side on 127.0.0.1 (never through a proxy)."""
        where = urlsplit(self._address)
        connection = http.client.HTTPConnection(
            where.hostname or "127.0.0.1", where.port, timeout=TOKENIZE_TIMEOUT_S
        )
        try:
            connection.request(
                "POST",
                path,
                body=json.dumps(body),
                headers={
                    "Authorization": f"Bearer {self._key}",
                    "Content-Type": "application/json",
                },
            )
            response = connection.getresponse()
            data = response.read()
        except OSError as exc:
            raise EngineError(f"the xllamacpp server did not answer: {exc}") from exc
        finally:
            connection.close()
        try:
            reply = json.loads(data)
        except ValueError as exc:
            raise EngineError("the xllamacpp server answered with something not JSON") from exc
        if response.status != 200 or not isinstance(reply, dict):
            raise EngineError(f"the xllamacpp server refused {path} ({response.status})")
        return reply

    def render(
        self,
        messages: list[Message],
        params: GenerationParams,
        control: GenerationControl | None = None,
        *,
        generation_prompt: bool = True,
    ) -> str:
        """The prompt; without ``generation_prompt``, its history part."""
        assert self._template is not None
        return self._template.render(
            messages,
            add_generation_prompt=generation_prompt,
            enable_thinking=params.enable_thinking,
            control=control,
        )

    # -- generation ---------------------------------------------------------------------
    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        server = self._server
        if server is None:
            raise EngineError("no model is loaded")
        started = time.perf_counter()
        assert self._template is not None
        try:
            prompt, history = self._template.render_turn(
                messages, enable_thinking=params.enable_thinking, control=control
            )
        except RenderCancelled:
            yield ended(started, "cancelled", self._n_ctx)
            return
        head = self._head(messages, params, prompt) if self._checkpointed else ""
        place = self._slots.take(prompt, history, head, self._first_turn(messages, params))
        try:
            if place.source >= 0:
                try:
                    self._copy_slot(place.source, place.chosen)
                finally:
                    self._slots.copied(place)
            slot, prefixes, whole = self._prefixes(prompt, history, head, place)
            yield from self._stream(
                server, prompt, (slot, prefixes, whole), place, params, control, started
            )
        finally:
            self._slots.give_back(place.chosen)

    # -- the state file -----------------------------------------------------------------
    def _restore_state_file(self, prompt: list[int], slot: int) -> int:
        """Restore the state file's state into ``slot`` when it begins ``prompt``; returns
        how many tokens it holds (0: none restored)."""
        state = self._kept.open(self._build, self.model_path)
        saved = state.load(prompt) if state is not None else None
        if state is None or saved is None or self._slot_dir is None:
            return 0
        name = f"state-{secrets.token_hex(8)}.bin"
        try:
            if state.copy_state(saved, self._slot_dir / name) and self._slot_action(
                slot, "restore", name
            ) == len(saved.tokens):
                return len(saved.tokens)
        finally:
            with contextlib.suppress(OSError):
                (self._slot_dir / name).unlink()
        state.drop("the server could not restore it")
        return 0

    def _save_state_file(self, slot: int, tokens: list[int]) -> None:
        """Save ``slot``, which holds exactly ``tokens``, into the state file."""
        state = self._kept.open(self._build, self.model_path)
        if state is None or self._slot_dir is None:
            return
        name = f"state-{secrets.token_hex(8)}.bin"
        try:
            if self._slot_action(slot, "save", name) == len(tokens):
                state.save(tokens, self._slot_dir / name)
        finally:
            with contextlib.suppress(OSError):
                (self._slot_dir / name).unlink()

    def _first_turn(self, messages: list[Message], params: GenerationParams) -> int:
        """How long the prompt's system message and first turn are. Conversations of one
        domain share the system prompt and the way an action is written: a prompt that
        shares no more than that with a slot is no fork of its conversation."""
        if len(messages) < 4:
            return sys.maxsize
        try:
            return len(self.render(messages[:3], params, generation_prompt=False))
        except (EngineError, RenderCancelled):
            return sys.maxsize

    def _head(self, messages: list[Message], params: GenerationParams, prompt: str) -> str:
        """The prompt up to where its last message's content begins (found by rendering
        it with that content left empty): a retried, edited or forked last turn shares it."""
        assert self._template is not None
        text = self._template.blank_last(messages, enable_thinking=params.enable_thinking)
        return prompt[: common_text(text, prompt)]

    def _prefixes(
        self, prompt: str, history: str, head: str, place: _Placement
    ) -> tuple[int, list[tuple[list[int], bool]], int]:
        """The slot for the first request, and the parts of the prompt to send first.

        On a model the server can take back only to its checkpoints, a prompt whose head
        is new to its slot is sent up to the head first, so the server keeps a checkpoint
        there for a later retry, edit or fork of this turn. With a state file, its state
        is restored into the slot, and the prompt is sent up to its history's end, whose
        state is then saved to the file (True beside it).
        """
        slot = place.slot
        want_head = self._checkpointed and place.new_head
        if place.chosen < 0 or not (want_head or self._kept.asked):
            return slot, [], 0
        full = self.tokenize(prompt, add_special=True)
        stops: dict[int, bool] = {}
        if want_head:
            stops[common_prefix(self.tokenize(head, add_special=True), full)] = False
        held = 0
        if self._kept.asked:
            held = self._restore_state_file(full, place.chosen)
            if held:
                slot = place.chosen
            end = common_prefix(self.tokenize(history, add_special=True), full)
            if end != held:
                stops[end] = True
        parts = [(full[:n], save) for n, save in sorted(stops.items()) if held < n < len(full)]
        return slot, parts, len(full)

    def _stream(
        self,
        server: Any,
        prompt: str,
        first_requests: tuple[int, list[tuple[list[int], bool]], int],
        place: _Placement,
        params: GenerationParams,
        control: GenerationControl,
        started: float,
    ) -> Iterator[EngineEvent]:
        answer = LocalAnswer(prompt, params, started)
        seen = _Progress()
        slot, prefixes, whole = first_requests
        reading = _Reading(whole if prefixes else 0)
        for tokens, save in prefixes:
            request = _Request(self._body(tokens, params, 0, slot))
            runner = self._start(server, request, control)
            part = _Progress()
            for chunk in self._chunks(request, control):
                error = chunk.get("error")
                if error is not None:
                    raise _failure(error)
                progress = chunk.get("prompt_progress")
                if isinstance(progress, dict):
                    yield reading.progress(progress)
                _read_counters(chunk, part)
            reading.done += part.evaluated
            if control.cancelled:
                yield ended(
                    started,
                    "cancelled",
                    self._n_ctx,
                    prompt_tokens=len(tokens),
                    evaluated=reading.done,
                )
                return
            runner.join()
            slot = place.chosen
            if save:
                self._save_state_file(slot, tokens)
        reasoning_tokens = 0
        stop: StopReason = "max_tokens"
        text = prompt
        first = True
        while True:
            left = params.max_tokens - seen.generated
            request = _Request(self._body(text, params, left, slot))
            if answer.in_reasoning and params.reasoning_budget:
                request.stop_at = max(1, params.reasoning_budget - seen.generated)
            runner = self._start(server, request, control)
            part = _Progress()
            try:
                for chunk in self._chunks(request, control):
                    error = chunk.get("error")
                    if error is not None:
                        raise _failure(error)
                    progress = chunk.get("prompt_progress")
                    if first and isinstance(progress, dict):
                        yield reading.progress(progress)
                    _read_counters(chunk, part)
                    piece = _text(chunk)
                    if piece:
                        answer.first_token()
                        if answer.in_reasoning:
                            reasoning_tokens = seen.generated + part.generated
                        text += piece
                        yield from answer.feed(
                            piece, seen.generated + part.generated, reasoning_tokens
                        )
                    if not answer.in_reasoning:
                        request.stop_at = 0
                    elif control.take_answer_request():
                        # It ends at its next chunk; what it generated until then is read
                        # on, so the text sent next is what the slot's cache holds.
                        request.halt = True
            finally:
                request.halt = True
            if part.finish == "stop" and part.generated:
                part.generated -= 1  # the server counts the end-of-generation token too
            if first:
                seen.prompt_tokens = part.prompt_tokens
                seen.evaluated = reading.done + part.evaluated
                first = False
                slot = place.chosen  # a continuation goes on in the slot that holds it
            seen.generated += part.generated
            if control.cancelled:  # the request ends at its next chunk, unwaited for
                stop = "cancelled"
                break
            runner.join()
            if part.finish or seen.generated >= params.max_tokens:
                stop = "max_tokens" if part.finish != "stop" else "eos"
                break
            # Halted for answer-now or the reasoning budget: go on with the reasoning
            # closed (or as it was, when the model closed it itself meanwhile).
            if answer.in_reasoning:
                text += CLOSE_REASONING
                yield from answer.feed(CLOSE_REASONING, seen.generated, reasoning_tokens)
        yield from answer.finish(
            prompt_tokens=seen.prompt_tokens,
            evaluated=seen.evaluated,
            generated=seen.generated,
            reasoning_tokens=reasoning_tokens,
            stop=stop,
            n_ctx=self._n_ctx,
        )

    def _body(
        self, prompt: str | list[int], params: GenerationParams, max_tokens: int, slot: int
    ) -> dict[str, Any]:
        """The completions request: the same sampling chain as ``engines/llama/engine.py``."""
        body: dict[str, Any] = {
            "prompt": prompt,
            "id_slot": slot,
            "stream": True,
            "max_tokens": max_tokens,
            "cache_prompt": True,
            "return_progress": True,
            "timings_per_token": True,
            "temperature": max(0.0, params.temperature),
            "top_p": params.top_p,
            "top_k": max(0, params.top_k),
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "samplers": ["top_k", "top_p", "temperature"],
        }
        if params.seed >= 0:
            body["seed"] = params.seed
        return body

    def _start(
        self, server: Any, request: _Request, control: GenerationControl
    ) -> threading.Thread:
        """Send the request on a thread of its own; one the server places (no slot named)
        waits until the one before it was placed (a stop ends the wait: the request is
        then ended before it is sent)."""
        if request.body.get("id_slot", -1) < 0:
            while not self._unplaced.acquire(timeout=POLL_S):
                if control.cancelled:
                    request.halt = True
                    break
            else:
                request.placing = self._unplaced
        runner = threading.Thread(
            target=self._run, args=(server, request), name="xllamacpp-request", daemon=True
        )
        runner.start()
        return runner

    @staticmethod
    def _run(server: Any, request: _Request) -> None:
        """Send the request; its chunks go to its queue, then None."""
        try:
            server.handle_completions(request.body, request.on_chunk)
        except Exception as exc:  # reported to the stream, never lost on this thread
            log.exception("xllamacpp request failed")
            request.chunks.put({"error": {"message": str(exc), "type": "server_error"}})
        finally:
            request.placed()
            request.chunks.put(None)

    @staticmethod
    def _chunks(request: _Request, control: GenerationControl) -> Iterator[dict[str, Any]]:
        """The request's chunks until it ends or the control cancels it.

        A cancelled request is told to stop at its next chunk; the stream does not wait
        for it (a request still queued for a slot has none yet).
        """
        while not control.cancelled:
            try:
                chunk = request.chunks.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if chunk is None:
                return
            yield chunk
        request.halt = True


def wait_serving(address: str, key: str) -> None:
    """Return once the server's task loop answers (or ``LISTEN_TIMEOUT_S`` has passed).

    xllamacpp's destructor stops the loop and joins its thread; a stop said before the
    loop has started is lost (the loop marks itself running as it starts), and the
    destructor then waits forever. Its HTTP side listens before the loop starts, so a
    ``/health`` that answers is not enough: ``GET /slots`` is answered by the loop itself.
    """
    where = urlsplit(address)
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while True:
        connection = http.client.HTTPConnection(
            where.hostname or "127.0.0.1", where.port, timeout=LISTEN_TIMEOUT_S
        )
        try:
            connection.request("GET", "/slots", headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                return
            problem = f"/slots answered {response.status}"
        except OSError as exc:
            problem = str(exc)
        finally:
            connection.close()
        if time.monotonic() > deadline:
            log.warning("the xllamacpp server does not serve at %s: %s", address, problem)
            return
        time.sleep(POLL_S / 5)


def _version(xllamacpp: Any) -> str:
    """The package's version and the commit it was built from (its llama.cpp with it)."""
    try:
        revision = str(xllamacpp._version.get_versions().get("full-revisionid", ""))
    except Exception:
        revision = ""
    return f"{getattr(xllamacpp, '__version__', '?')} {revision}".strip()


def _offloads(xllamacpp: Any) -> bool:
    try:
        devices = xllamacpp.get_device_info()
    except Exception:
        return False
    return any("cpu" not in str(d.get("name", "")).lower() for d in devices)


def _text(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    text = choices[0].get("text")
    return text if isinstance(text, str) else ""


def _read_counters(chunk: dict[str, Any], progress: _Progress) -> None:
    """The server's own counters: tokens read and reused, tokens generated, why it ended."""
    timings = chunk.get("timings")
    if isinstance(timings, dict):
        progress.evaluated = int(timings.get("prompt_n", progress.evaluated) or 0)
        progress.generated = int(timings.get("predicted_n", progress.generated) or 0)
        cached = int(timings.get("cache_n", 0) or 0)
        progress.prompt_tokens = max(progress.prompt_tokens, cached + progress.evaluated)
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        progress.prompt_tokens = int(usage.get("prompt_tokens", progress.prompt_tokens) or 0)
        progress.generated = int(usage.get("completion_tokens", progress.generated) or 0)
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
        if isinstance(reason, str):
            progress.finish = reason


@dataclass
class _Reading:
    """How far the prompt has been read, over the requests that read it."""

    whole: int
    """The tokens of the whole prompt when parts of it go first (0: the request's own)."""
    done: int = 0
    """Tokens read by the requests that ended."""
    total: int = 0

    def progress(self, progress: dict[str, Any]) -> PromptProgress:
        cached = int(progress.get("cache", 0) or 0)
        total = int(progress.get("total", 0) or 0)
        read = max(0, int(progress.get("processed", 0) or 0) - cached)
        if not self.total:
            self.total = max(0, (self.whole or total) - cached)
        return PromptProgress(self.done + read, max(self.total, self.done + read))


def _failure(error: object) -> EngineError:
    """The server's error as the engine's: a prompt too long for the context is its own."""
    if not isinstance(error, dict):
        return EngineError(f"the xllamacpp server failed: {error}")
    message = str(error.get("message", "")) or "no message"
    if error.get("type") == "exceed_context_size_error":
        return ContextOverflowError(message)
    return EngineError(f"the xllamacpp server failed: {message}")
