"""Context budget: which earlier turns still fit in the prompt."""

from __future__ import annotations

from collections.abc import Sequence


def history_budget(n_ctx: int, max_tokens: int) -> int:
    """Prompt tokens available: the context less the generation budget.

    The generation budget is ``max_tokens`` but never more than half the context, so a
    32k default still leaves room for history in a 32k context.
    """
    return max(0, n_ctx - min(max_tokens, n_ctx // 2))


def first_kept_turn(turn_sizes: Sequence[int], fixed: int, budget: int) -> int:
    """Index of the oldest earlier turn to keep so the prompt fits ``budget`` tokens.

    ``turn_sizes`` are the token counts of the earlier turns (action plus observation),
    oldest first; ``fixed`` counts what is always sent (system prompt, current action).
    Returns ``len(turn_sizes)`` when no earlier turn fits.
    """
    total = fixed + sum(turn_sizes)
    first = 0
    while first < len(turn_sizes) and total > budget:
        total -= turn_sizes[first]
        first += 1
    return first
