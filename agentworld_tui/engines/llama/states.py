"""Saved sequence states of the llama context, within a byte budget.

Each is what llama.cpp wrote for the sequence when it held some tokens: a hybrid model's
recurrent checkpoint, or a conversation's whole state. They share one store, least recently
used dropped first, so the memory they take stays bounded (``engines.llama.cache`` decides
what is saved and restored).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentworld_tui.engines.prefix import common_prefix


@dataclass(eq=False)  # compared by identity: == on numpy token arrays is not a bool
class Checkpoint:
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
        self._items: list[Checkpoint] = []

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

        def replaced(c: Checkpoint) -> bool:
            if c.standalone != standalone:
                return False
            if np.array_equal(c.tokens, tokens):
                return True
            # A conversation's newer whole state serves all that an older one served but
            # a retry of an old turn: the older one only takes room.
            covered = len(c.tokens) if c.history < 0 else c.history
            return whole and c.flags == 0 and common_prefix(c.tokens, tokens) >= covered

        self._items = [c for c in self._items if not replaced(c)]
        saved = Checkpoint(
            tokens.copy(), data, time.monotonic(), flags, standalone, cuttable, history
        )
        self._items.append(saved)
        while self.size > self.budget:
            self._items.remove(min(self._items, key=lambda c: c.used))

    def get(self, tokens: np.ndarray[Any, Any], *, standalone: bool) -> Checkpoint | None:
        """The saved state of exactly ``tokens``, of that kind, if there is one."""
        for c in self._items:
            if c.standalone == standalone and np.array_equal(c.tokens, tokens):
                return c
        return None

    def best(
        self, tokens: np.ndarray[Any, Any], limit: int, *, standalone_only: bool = False
    ) -> Checkpoint | None:
        """The saved state that restores the most of ``tokens``, at most ``limit`` of them.

        That is the longest one that is a prefix of ``tokens``, or, for a state that can
        be cut back, the one sharing the longest prefix with them.
        """
        best: Checkpoint | None = None
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
