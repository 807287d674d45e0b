"""Make untrusted model text safe to show.

A world model may predict escape sequences (a screen clear, a window-title or clipboard
OSC), bidi overrides or NULs. None of them may reach the user's real terminal, so they are
removed before display; tabs and newlines stay.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any, TextIO

# ESC-introduced sequences: CSI, OSC/DCS/SOS/PM/APC strings (terminated by BEL or ST; an
# unterminated one ends at the line's end), and two-byte escapes. The 8-bit C1 forms are
# handled too. Every part is bounded so a stream can judge a sequence from a bounded tail.
_ESCAPES = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]{0,64}[ -/]{0,16}[@-~]?   # CSI ... final byte
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])      # OSC, DCS, SOS, PM, APC ...
      [^\x07\x1b\n\x80-\x9f]{0,4000}(?:\x07|\x1b\\|\x9c)?  # ... up to BEL or ST
  | \x1b[ -/]{0,16}[0-~]?                        # other escapes (ESC c, ESC 7, ESC ( B)
    """,
    re.VERBOSE,
)
# C0 and C1 controls except tab and newline; DEL; bidi embeddings, overrides and isolates;
# the line/paragraph separators that some terminals treat as newlines.
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)


# Every control character, tabs and newlines too, and the marks _CONTROLS removes: none of
# them takes a cell on screen, and a terminal acts on each.
_CELL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)


def cell_safe(text: str) -> str:
    """``text`` less every character a terminal acts on, for text already laid out in
    cells: each takes none, so what follows stays where it was drawn (``sanitize``
    removes whole escape sequences, whose printable part takes cells)."""
    return _CELL_UNSAFE.sub("", text)


def cell_unsafe(text: str) -> bool:
    """Whether ``cell_safe`` would change ``text``."""
    return _CELL_UNSAFE.search(text) is not None


def is_clean(text: str) -> bool:
    """Whether ``sanitize`` leaves ``text`` as it is (every sequence it removes starts with
    a control character), at the cost of one search."""
    return _CONTROLS.search(text) is None


def sanitize(text: str) -> str:
    """Return ``text`` with escape sequences and control characters removed.

    ``\\r\\n`` becomes ``\\n``; a lone carriage return becomes a newline so that progress
    bars drawn with ``\\r`` stay readable.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("", text)


def one_line(text: str, limit: int | None = None) -> str:
    """Untrusted text for one line of a screen, a message or a log: sanitized, each run of
    whitespace (newlines too) one space; longer than ``limit``, cut with an ellipsis."""
    line = " ".join(sanitize(text).split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 1] + "…"


class StreamSanitizer:
    """Sanitize a stream whose escape sequences may be split across chunks.

    Text from the last ESC (or ``\\r``) on is held back until the sequence can be judged,
    so every chunking of a stream gives the same output as sanitizing it whole.
    """

    _HOLD_LIMIT = 4096  # longer than any sequence _ESCAPES can match

    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        self._held = ""
        cut = max(text.rfind(c) for c in "\x1b\x9b\x90\x98\x9d\x9e\x9f\r")
        if cut != -1 and len(text) - cut < self._HOLD_LIMIT:
            tail = text[cut:]
            if tail == "\r" or not _is_complete(tail):
                text, self._held = text[:cut], tail
        return sanitize(text)

    def finish(self) -> str:
        text, self._held = self._held, ""
        return sanitize(text)


def _is_complete(tail: str) -> bool:
    """Whether an escape sequence at the start of ``tail`` has its end in ``tail``."""
    if tail.startswith("\r"):
        return len(tail) > 1
    match = _ESCAPES.match(tail)
    if match is None or match.end() < len(tail):
        return True
    seq = match.group(0)
    if seq.startswith(("\x1b[", "\x9b")):
        body = seq[2:] if seq.startswith("\x1b[") else seq[1:]
        return bool(body) and "@" <= body[-1] <= "~"
    if seq[:2] in ("\x1b]", "\x1bP", "\x1bX", "\x1b^", "\x1b_") or seq[0] in "\x90\x98\x9d\x9e\x9f":
        return seq.endswith(("\x07", "\x1b\\", "\x9c"))
    return len(seq) >= 2 and "0" <= seq[-1] <= "~"


def sanitize_output(text: str) -> str:
    """``sanitize`` for text written to a terminal by the command line.

    A carriage return that starts the text stays: that is how a progress line redraws
    itself in place. Anywhere else it is treated as ``sanitize`` treats it.
    """
    if text.startswith("\r") and not text.startswith("\r\n"):
        return "\r" + sanitize(text[1:])
    return sanitize(text)


# Characters json.dumps(ensure_ascii=False) writes as they are although a terminal acts on
# them (DEL, C1 controls, bidi marks, line separators), and lone surrogates, which cannot
# be encoded at all.
_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


def safe_json(value: object) -> str:
    """``value`` as JSON text that is safe to print: lossless, and still valid JSON.

    Non-ASCII text stays readable; only the characters a terminal could act on are
    written as ``\\uXXXX`` escapes (json.dumps already escapes the C0 controls).
    """
    text = json.dumps(value, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class SanitizingWriter:
    """A text stream that sanitizes everything written through it (``sanitize_output``).

    The command line puts one in front of ``sys.stdout`` and ``sys.stderr``, so no place
    that prints can forget to clean what it prints. Anything else, ``buffer`` included
    (bytes written there pass untouched), is the wrapped stream's own.
    """

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(sanitize_output(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


class SanitizingFormatter(logging.Formatter):
    """Log records as ``logging.Formatter`` writes them, then sanitized: a message that
    quotes a server or a file cannot put escape sequences into the log."""

    def format(self, record: logging.LogRecord) -> str:
        return sanitize(super().format(record))
