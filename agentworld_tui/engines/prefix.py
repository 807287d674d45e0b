"""How far two prompts begin alike, in tokens or in characters.

An engine's cache serves a prompt up to what it shares with what the cache holds, so both
in-process engines measure that, one in tokens, one in the text it sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Tokens = Sequence[int] | np.ndarray[Any, Any]


def common_prefix(a: Tokens, b: Tokens) -> int:
    """How many tokens ``a`` and ``b`` begin with alike."""
    x, y = np.asarray(a), np.asarray(b)
    n = min(len(x), len(y))
    if n == 0:
        return 0
    diff = np.flatnonzero(x[:n] != y[:n])
    return int(diff[0]) if len(diff) else n


def common_text(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` begin with alike."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
