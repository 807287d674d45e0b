"""Colour observations with Pygments, once per finished turn.

Streaming text is shown plain; when a turn finishes its lines are replaced by highlighted
ones, so highlighting costs one pass per turn, never one per token. Colouring changes
styles only: the lines spell the text exactly as it came (tests/test_highlight.py).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from pygments.lexer import Lexer

THEME = "ansi_dark"
# A shell prompt: user@host:dir$, [user@host dir]$, or a bare $, # or > that a space or
# the line's end follows (so `#!/bin/bash`, `## Usage`, `>>> x` and `$HOME` are output).
PROMPT = re.compile(
    r"^(?P<prompt>(?:\(\S+\) )?(?:[\w.-]+@[\w.-]+:[^\n$#]*[$#]|\[[^\]\n]+\][$#]|[$#>](?= |$)))"
    r"(?P<gap> ?)(?P<command>.*)$"
)
_HIGHLIGHT_LIMIT = 200_000


@lru_cache(maxsize=32)
def lexer(name: str) -> Lexer | None:
    if name in ("", "text"):
        return None
    # Pygments loads here, at the first coloured block, not while the app starts.
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(name, stripnl=False)  # blank lines at the ends stay
    except ClassNotFound:
        return None


def plain_lines(text: str) -> list[Text]:
    return [Text(line) for line in text.split("\n")]


def highlight(code: str, lexer_name: str) -> list[Text]:
    """``code`` coloured with a Pygments lexer, as lines; plain when it is too big, or
    when the lexer would change a character."""
    found = lexer(lexer_name)
    if found is None or len(code) > _HIGHLIGHT_LIMIT:
        return plain_lines(code)
    from rich.syntax import Syntax

    syntax = Syntax("", found, theme=THEME)
    text = syntax.highlight(code + "\n")  # Pygments ends every text with a newline
    text.right_crop(1)
    if text.plain != code:
        return plain_lines(code)
    text.style = ""  # the view's own background shows through
    return list(text.split("\n", allow_blank=True))


def _block_lexer(block: str) -> str:
    """Recognise a terminal output block worth colouring."""
    stripped = block.strip()
    if not stripped:
        return "text"
    if stripped[0] in "[{" and stripped[-1] in "]}":
        try:
            json.loads(stripped)
            return "json"
        except ValueError:
            pass
    if stripped.startswith(("diff --git", "--- ", "@@ ")) or "\n@@ " in stripped:
        return "diff"
    if "Traceback (most recent call last):" in stripped:
        return "pytb"
    return "text"


def highlight_terminal(screen: str) -> list[Text]:
    """A terminal screen: prompts bold, commands as shell, output blocks by their kind."""
    out: list[Text] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            out.extend(highlight("\n".join(block), _block_lexer("\n".join(block))))
            block.clear()

    for line in screen.split("\n"):
        match = PROMPT.match(line) if len(line) < 2000 else None
        if match:
            flush()
            text = Text(match.group("prompt") + match.group("gap"), style="bold green")
            command = match.group("command")
            if command:
                text.append_text(highlight(command, "bash")[0])
            out.append(text)
        else:
            block.append(line)
    flush()
    return out
