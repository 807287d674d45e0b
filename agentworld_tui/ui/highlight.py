"""Colour observations with Pygments, once per finished turn.

Streaming text is shown plain; when a turn finishes its lines are replaced by highlighted
ones, so highlighting costs one pass per turn, never one per token.
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
PROMPT = re.compile(
    r"^(?P<prompt>(?:\(\S+\) )?(?:[\w.-]+@[\w.-]+:[^\n$#]*[$#]|\[[^\]\n]+\][$#]|[$#>])) ?"
    r"(?P<command>.*)$"
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
        return get_lexer_by_name(name)
    except ClassNotFound:
        return None


def highlight(code: str, lexer_name: str) -> list[Text]:
    """``code`` coloured with a Pygments lexer, as lines; plain when it is too big."""
    found = lexer(lexer_name)
    if found is None or len(code) > _HIGHLIGHT_LIMIT:
        return [Text(line) for line in code.split("\n")]
    from rich.syntax import Syntax

    syntax = Syntax("", found, theme=THEME)
    text = syntax.highlight(code)
    text.style = ""  # the view's own background shows through
    text.rstrip()
    lines = text.split("\n", allow_blank=True)
    return list(lines)


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
            text = Text(match.group("prompt"), style="bold green")
            command = match.group("command")
            if command:
                text.append(" ")
                text.append_text(highlight(command, "bash")[0])
            elif line.endswith(" "):
                text.append(" ")
            out.append(text)
        else:
            block.append(line)
    flush()
    return out
