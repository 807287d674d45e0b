"""Untrusted model text: escape sequences and controls never reach the user's terminal."""

from __future__ import annotations

import itertools
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.world.sanitize import StreamSanitizer, one_line, sanitize

ALLOWED_CONTROLS = {"\n", "\t"}
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def is_harmful(ch: str) -> bool:
    """A character that may change the terminal's state or the reading order."""
    if ch in ALLOWED_CONTROLS:
        return False
    return unicodedata.category(ch) == "Cc" or ch in BIDI or ch in "\u2028\u2029"


def stream(chunks: list[str]) -> str:
    sanitizer = StreamSanitizer()
    return "".join(sanitizer.feed(c) for c in chunks) + sanitizer.finish()


def chunked(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[2Jcleared", "cleared"),
        ("\x1b[1;31mred\x1b[0m text", "red text"),
        ("\x1b[?1049hscreen\x1b[?1049l", "screen"),
        ("before\x1b]0;pwned title\x07after", "beforeafter"),
        ("a\x1b]52;c;ZWNobyBoaQ==\x07b", "ab"),  # OSC 52: write the clipboard
        ("a\x1b]52;c;ZWNobyBoaQ==\x1b\\b", "ab"),  # ... terminated by ST
        ("a\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("\x1bcreset", "reset"),  # ESC c: full terminal reset
        ("\x1b(Bascii", "ascii"),
        ("nul\x00byte", "nulbyte"),
        ("bell\x07", "bell"),
        ("\x9b31mc1 csi", "c1 csi"),
        ("\x9d0;title\x9cc1 osc", "c1 osc"),
        ("del\x7fete", "delete"),
        ("user\u202egnp.exe", "usergnp.exe"),
        ("iso\u2066late\u2069", "isolate"),
        ("line1\r\nline2\rline3", "line1\nline2\nline3"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("unterminated \x1b]0;title", "unterminated "),
    ],
)
def test_sanitize_removes(raw: str, clean: str) -> None:
    assert sanitize(raw) == clean
    assert stream(list(raw)) == clean


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=200))
def test_plain_text_is_untouched(text: str) -> None:
    text = "".join(ch for ch in text if not is_harmful(ch))
    assert sanitize(text) == text
    assert stream([text]) == text


# Text rich in escape material: ESC, C1 bytes, CSI/OSC bodies, terminators, bidi marks.
escape_text = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "\x1b",
                "\x1b[",
                "\x1b]",
                "\x1bP",
                "\x1b\\",
                "\x07",
                "\x9b",
                "\x9c",
                "\x9d",
                "\x90",
                "\r",
                "\r\n",
                "\x00",
                "\x7f",
                "\u202e",
                "\u2067",
                "\x1b[2J",
                "\x1b]0;t\x07",
                "\x1b]52;c;aGk=\x07",
                "[31m",
                ";",
                "?",
                "\n",
                "\t",
                "é",
            ]
        ),
        st.text(max_size=5),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=escape_text, cuts=st.lists(st.integers(min_value=0), max_size=15))
def test_stream_equals_whole_for_any_chunking(text: str, cuts: list[int]) -> None:
    assert stream(chunked(text, cuts)) == sanitize(text)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(escape_text, st.text(max_size=100)))
def test_output_never_holds_a_control(text: str) -> None:
    for out in (sanitize(text), stream(list(text))):
        assert "\x1b" not in out
        assert not [ch for ch in out if is_harmful(ch)]


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(escape_text, st.text(max_size=100)), limit=st.integers(1, 60))
def test_one_line_is_one_clean_bounded_line(text: str, limit: int) -> None:
    line = one_line(text)
    assert line == " ".join(sanitize(text).split())
    assert "\n" not in line and "  " not in line and line == line.strip()
    assert not [ch for ch in line if is_harmful(ch)]
    bounded = one_line(text, limit)
    assert len(bounded) <= limit
    assert bounded == line or (bounded.endswith("…") and line.startswith(bounded[:-1]))


def test_one_line_says_where_it_cut() -> None:
    assert one_line("\x1b[31mred\x1b[0m\n  and\tblue\r\n") == "red and blue"
    assert one_line("abcdef", 4) == "abc…"
    assert one_line("abcd", 4) == "abcd"


def test_long_unterminated_sequence_is_not_held_forever() -> None:
    sanitizer = StreamSanitizer()
    out = sanitizer.feed("\x1b]0;" + "x" * 1000)
    out += sanitizer.feed(" visible")
    out += sanitizer.finish()
    assert "\x1b" not in out
    assert out == sanitize("\x1b]0;" + "x" * 1000 + " visible")


def test_text_before_a_split_escape_is_shown_at_once() -> None:
    sanitizer = StreamSanitizer()
    assert sanitizer.feed("ready\x1b[") == "ready"
    assert sanitizer.feed("2Jdone") == "done"
