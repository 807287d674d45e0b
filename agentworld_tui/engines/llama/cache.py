"""The llama context's one sequence, reused, kept and restored across prompts.

Transformer caches can be cut back to any prefix, but the real model is hybrid (Gated
DeltaNet layers keep a recurrent state that cannot be rolled back), so the engine saves the
sequence state at two points of each prompt and restores the best matching saved state
when a new prompt shares only part of what the cache holds:

- where the last message (the action) begins: the prefix that a retried, undone, edited or
  unanswered (hence dropped) last turn shares with the prompt that follows it;
- at the end of the history (before the generation prompt): the prefix of the next turn's
  prompt once this turn's answer joins the history, and of a retry.

Only the recurrent part of the state is saved there (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``):
such a state is restored only when its tokens are a prefix of what the cache holds, so a
hybrid model's attention cache is still there and is cut back to the same position.

One context holds one conversation, but the app runs several (a tab each, branches, forks
of one history). When a prompt leaves the conversation the cache holds (it does not go on
from the end of the last prompt's history), the cache first keeps that conversation's
state whole, attention cache included: a transformer's cache cut back to the last prompt,
a hybrid's state at the end of the last prompt's history (its recurrent checkpoint there,
with the attention cache cut back to it). Coming back to it later, or to a fork that shares
its prefix, restores that state and reads only what is new. A purely recurrent model has
no attention cache: its checkpoints stand alone already.

A state file (``engines.state_file``) is one more whole state, offered like those and
written at the end of the history.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import numpy as np

from agentworld_tui.engines.llama.states import Checkpoint, StateStore
from agentworld_tui.engines.prefix import common_prefix
from agentworld_tui.engines.state_file import StateFile

log = logging.getLogger("agentworld.engine")


class SequenceCache:
    """What the context's sequence holds, and the saved states it can go back to."""

    def __init__(self, llm: Any, states: StateStore, *, hybrid: bool, attention: bool) -> None:
        self.llm = llm
        self.states = states
        self.hybrid = hybrid
        """The model keeps a recurrent state (it is recurrent or hybrid)."""
        self.attention = attention
        """The model has an attention cache (it is not purely recurrent)."""
        self.last_prompt: tuple[np.ndarray[Any, Any], int] | None = None
        """The last prompt's tokens and where its history ends."""
        self._file_tokens = 0
        """How many tokens the state read from the state file held (0: none read)."""

    def reuse(self, tokens: np.ndarray[Any, Any]) -> int:
        """Keep or restore as much of ``tokens`` as is saved; returns the tokens kept.

        What the cache holds is reused up to its common prefix with ``tokens`` (through a
        recurrent checkpoint on a recurrent model); a standalone saved state (another
        conversation's, kept when the engine left it) is restored when it goes further.
        """
        llm = self.llm
        cached = llm.input_ids[: llm.n_tokens]
        # At least one token is always evaluated, so there are fresh logits to sample.
        limit = len(tokens) - 1
        common = min(common_prefix(cached, tokens), limit)
        if common and common == llm.n_tokens:
            return common
        in_cache = self.states.best(tokens, common) if self.hybrid else None
        elsewhere = self.states.best(tokens, limit, standalone_only=True)
        self._keep_conversation(common)
        reach = in_cache.reach(tokens, common) if in_cache is not None else 0
        if not self.hybrid:
            reach = common
        if elsewhere is not None and elsewhere.reach(tokens, limit) > reach:
            return self.restore(elsewhere, elsewhere.reach(tokens, limit))
        if not self.hybrid:
            llm.n_tokens = common  # eval() removes everything after n_tokens
            return common
        if in_cache is not None:
            return self.restore(in_cache, reach)
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

        llm = self.llm
        if self.last_prompt is None or not self.attention:
            return
        last, history_end = self.last_prompt
        if common >= history_end:
            return
        held = common_prefix(llm.input_ids[: llm.n_tokens], last)
        if self.hybrid:
            end = history_end
            checkpoint = self.states.get(last[:end], standalone=False)
            if held < end or checkpoint is None or self.states.get(last[:end], standalone=True):
                return
            if not self.restore(checkpoint, end):
                return
        else:
            end = held
            if end <= common or self.states.get(last[:end], standalone=True):
                return
            memory = llama_cpp.llama_get_memory(llm.ctx)
            if not llama_cpp.llama_memory_seq_rm(memory, 0, end, -1):
                return
            llm.n_tokens = end
        self.save(last[:end], whole=True, history=min(history_end, end))

    def save(self, tokens: np.ndarray[Any, Any], *, whole: bool = False, history: int = -1) -> None:
        """Save the state of the sequence, which holds exactly ``tokens``.

        Unless ``whole``, only the recurrent part: a hybrid model's attention cache can be
        cut back, and it grows with the context, where the recurrent state has a fixed size.
        """
        import llama_cpp

        flags = 0 if whole else llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        data = self.state_bytes(flags, self.states.budget)
        if data is not None:
            standalone = whole or not self.attention
            cuttable = whole and not self.hybrid
            self.states.add(
                tokens,
                data,
                flags=flags,
                standalone=standalone,
                cuttable=cuttable,
                history=history,
            )

    def state_bytes(self, flags: int, limit: int) -> np.ndarray[Any, Any] | None:
        """The sequence's state as llama.cpp writes it (None when empty or over ``limit``)."""
        import llama_cpp

        ctx = self.llm.ctx
        size = int(llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags))
        if size > limit:
            return None
        # llama.cpp writes the state straight into the stored array: nothing zero-filled
        # first, nothing copied after.
        buffer = np.empty(size, dtype=np.uint8)
        pointer = buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        written = int(llama_cpp.llama_state_seq_get_data_ext(ctx, pointer, size, 0, flags))
        return buffer[:written] if written else None

    def restore(self, checkpoint: Checkpoint, n: int) -> int:
        """Restore a saved state so that the cache holds its first ``n`` tokens; returns
        ``n``, or 0 when it failed (the cache is then empty).

        A recurrent-only state of a hybrid model needs the attention cache to hold the
        checkpoint's tokens at its start (``reuse`` asks only for such states): it is kept
        and cut back to the same position. A standalone state replaces the sequence; a
        transformer's is then cut back to ``n``.
        """
        import llama_cpp

        llm = self.llm
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

    # -- the state file -----------------------------------------------------------------
    def offer_file(self, file: StateFile, tokens: np.ndarray[Any, Any]) -> None:
        """Offer the state file's state to ``reuse`` when it begins ``tokens``."""
        self._file_tokens = 0
        saved = file.load(tokens.tolist())
        if saved is None or self.states.get(np.asarray(saved.tokens), standalone=True):
            return
        data = file.read_state(saved)
        if data is None:
            return
        held = np.asarray(saved.tokens, dtype=np.intc)
        self.states.add(
            held, np.frombuffer(data, dtype=np.uint8), standalone=True, cuttable=not self.hybrid
        )
        self._file_tokens = len(held)

    def write_file(self, file: StateFile, tokens: np.ndarray[Any, Any]) -> None:
        """Write the whole state of the sequence, which holds exactly ``tokens``."""
        if len(tokens) == self._file_tokens:
            return  # the file holds this state already
        data = self.state_bytes(0, file.max_bytes)
        if data is None:
            file.drop("the state is over its bound")
            return
        if file.save(tokens.tolist(), data):
            self._file_tokens = len(tokens)
