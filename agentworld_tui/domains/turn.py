"""How every domain writes a turn: the benchmark's Markdown layout."""

from __future__ import annotations

import re


def fenced(text: str, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


_FENCED = re.compile(
    r"\A\s*(?P<fence>`{3,}|~{3,})[^\n`]*\n(?P<body>.*?)\n?\s*(?P=fence)\s*\Z", re.S
)


def unfenced(text: str) -> str:
    """The body of a text that is one fenced code block (as models and chat clients paste an
    action), else the text as it is."""
    match = _FENCED.match(text)
    return match.group("body") if match else text


def turn_markdown(
    number: int,
    action: str,
    *,
    action_lang: str = "json",
    state: str | None = None,
    state_lang: str = "",
    sections: dict[str, str] | None = None,
) -> str:
    """``### Turn N``, then optional extra sections, the current state, and the action."""
    parts = [f"### Turn {number}"]
    for title, body in (sections or {}).items():
        if body.strip():
            parts.append(f"**{title}:**\n{body.strip()}")
    if state is not None:
        parts.append("**Current State:**\n" + fenced(state, state_lang))
    parts.append("**Action:**\n" + fenced(action, action_lang))
    return "\n\n".join(parts)
