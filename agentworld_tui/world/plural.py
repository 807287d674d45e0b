"""Counts in messages: "1 turn", "2 turns", never "1 turns" or "turn(s)"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one
    (``plural`` for nouns that do not just take an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
