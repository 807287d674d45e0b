"""Completing a path as it is typed: the rest of the first entry of its folder that starts
with what was typed (folders and the wanted kind of file first); Right or End accepts it."""

from __future__ import annotations

import os
from pathlib import Path

from textual.suggester import Suggester

MAX_ENTRIES = 2000
"""Entries of a folder looked at for one suggestion (a huge folder is not listed whole)."""


class PathSuggester(Suggester):
    def __init__(self, *suffixes: str) -> None:
        """``suffixes``: the files wanted (".gguf"); other files are offered after them."""
        super().__init__(use_cache=False, case_sensitive=True)
        self.suffixes = tuple(s.lower() for s in suffixes)

    async def get_suggestion(self, value: str) -> str | None:
        if not value or "\n" in value:
            return None
        typed = os.path.expanduser(value)
        folder, _, start = typed.rpartition(os.sep)
        where = Path(folder or ("/" if typed.startswith(os.sep) else "."))
        try:
            names = []
            with os.scandir(where) as entries:
                for i, entry in enumerate(entries):
                    if i >= MAX_ENTRIES:
                        break
                    if entry.name.startswith(start) and not entry.name.startswith("."):
                        names.append((self._rank(entry), entry.name, entry.is_dir()))
        except OSError:
            return None
        if not names:
            return None
        _rank, name, is_dir = min(names)
        rest = name[len(start) :] + (os.sep if is_dir else "")
        return value + rest if rest else None

    def _rank(self, entry: os.DirEntry[str]) -> int:
        try:
            if entry.is_dir():
                return 0
        except OSError:
            return 3
        return 1 if entry.name.lower().endswith(self.suffixes) else 2
