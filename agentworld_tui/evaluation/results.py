"""Append-only result files: one JSON record a line, each written whole and synced.

A run that is killed leaves every finished record on disk and at worst a torn last line,
which is dropped when the file is opened again; nothing is ever rewritten, so a run resumes
by reading back what is there. Later records for the same key replace earlier ones (a
failed sample tried again).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from agentworld_tui.world.export import dump_json


class ResultsError(Exception):
    """A results file that cannot be read or written; the message is one line."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def record_line(record: dict[str, Any]) -> str:
    """One record as a line of JSON that UTF-8 can always encode: a lone surrogate (which
    JSON can carry, from a benchmark line's ``\\ud800``) is written as its escape."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", dump_json(record))


class ResultLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.skipped = 0
        """Lines of the file that were not records (damaged by hand, say)."""

    def read(self) -> dict[str, dict[str, Any]]:
        """The latest record of each key."""
        latest: dict[str, dict[str, Any]] = {}
        self.skipped = 0
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return latest
        except OSError as exc:
            raise ResultsError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        complete, _, _torn = raw.rpartition(b"\n")
        for line in complete.split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # torn, damaged, too deep or too long
                self.skipped += 1
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                latest[record["key"]] = record
            else:
                self.skipped += 1
        return latest

    def drop_torn_tail(self) -> None:
        """Cut a last line left half-written by a killed run, so the next record starts on
        a line of its own."""
        try:
            with self.path.open("rb+") as handle:
                size = handle.seek(0, os.SEEK_END)
                if size == 0:
                    return
                handle.seek(size - 1)
                if handle.read(1) == b"\n":
                    return
                block = 1 << 16
                end = size
                while end > 0:
                    start = max(0, end - block)
                    handle.seek(start)
                    chunk = handle.read(end - start)
                    cut = chunk.rfind(b"\n")
                    if cut != -1:
                        handle.truncate(start + cut + 1)
                        return
                    end = start
                handle.truncate(0)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ResultsError(f"{self.path}: cannot repair ({exc.strerror or exc})") from None

    def append(self, record: dict[str, Any]) -> None:
        line = (record_line(record) + "\n").encode("utf-8")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("ab") as handle:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                raise ResultsError(f"{self.path}: cannot write ({exc.strerror or exc})") from None
