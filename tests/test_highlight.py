"""A predicted screen is shown exactly as predicted: colouring changes styles, never text.

Every domain's highlighter (each pane's, and ``highlight`` with every lexer a domain can
choose) is given generated screens full of what looks like prompts, comments, shebangs,
Markdown headings, REPL prompts, blank lines and trailing spaces; the lines it returns
must spell the screen character for character (tabs expanded as the view shows them).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from agentworld_tui.domains import DOMAINS
from agentworld_tui.domains.search import search_results
from agentworld_tui.domains.swe import file_lexer
from agentworld_tui.ui.highlight import highlight, highlight_terminal
from agentworld_tui.ui.panes.search import search_page
from agentworld_tui.ui.panes.web import page_lines
from agentworld_tui.ui.start import first_scenario, pane_class

TRICKY_LINES = [
    "#!/bin/bash",
    "## Usage",
    "# comment",
    ">>> import os",
    "> quoted",
    "$HOME/bin",
    "$ ls -la",
    "# ls",
    "$",
    "$ ",
    ">",
    "root@box:/# cat /etc/hosts",
    "user@devbox:~/project$ ",
    "(venv) user@devbox:~$ make",
    "[user@host ~]$ ls",
    "{",
    '  "a": [1, 2]',
    "}",
    "--- a/x.py",
    "@@ -1 +1 @@",
    "Traceback (most recent call last):",
    '<div class="x">a</div>',
    "    indented  ",
    "",
    "\t\tTabbed\tline",
    "  ",
]
CHARS = "abcXYZ019 #$>!/~@:.-_=+*'\"{}[]()<>,;\\|&\téü漢"
line_text = st.one_of(st.sampled_from(TRICKY_LINES), st.text(alphabet=CHARS, max_size=30))
screens = st.lists(line_text, max_size=12).map("\n".join)

# Every lexer a domain's pane can pick for a screen or a turn.
FILES = "a.py a.js a.ts a.go a.rs a.c a.sh a.json a.toml a.yaml a.ini a.md a.rst a.html a.css"
FILES += " a.sql a.xml a.diff Makefile Dockerfile CMakeLists.txt"
LEXERS = sorted(
    {DOMAINS[name].lexer for name in DOMAINS}
    | {"json", "xml", "html", "markdown", "diff", "pytb", "bash", "text"}
    | {file_lexer(name) for name in FILES.split()}
)


def shown(lines: list[Text], tab: int = 8) -> str:
    return "\n".join(line.plain.expandtabs(tab) for line in lines)


def as_predicted(screen: str, tab: int = 8) -> str:
    return "\n".join(line.expandtabs(tab) for line in screen.split("\n"))


def pane_highlighter(name: str) -> Callable[[str], list[Text]]:
    domain = DOMAINS[name]
    pane = pane_class(domain)(domain, first_scenario(name), None)  # type: ignore[arg-type]
    return pane.highlight_observation


@pytest.mark.parametrize(
    ("screen", "expected"),
    [
        ("#!/bin/bash", "#!/bin/bash"),
        ("## Usage", "## Usage"),
        (">>> import os", ">>> import os"),
        ("$HOME/bin", "$HOME/bin"),
        ("\n\nfirst line after two blank ones\n", "\n\nfirst line after two blank ones\n"),
    ],
)
def test_the_terminal_shows_lines_that_start_like_a_prompt_as_they_are(
    screen: str, expected: str
) -> None:
    assert shown(highlight_terminal(screen)) == expected


def test_a_real_prompt_is_still_picked_out() -> None:
    [line] = highlight_terminal("user@devbox:~/project$ ls -la")
    assert line.plain == "user@devbox:~/project$ ls -la"
    styles = [str(line.style), *(str(span.style) for span in line.spans if span.start == 0)]
    assert any("green" in style for style in styles)


@settings(max_examples=300, deadline=None)
@given(screen=screens)
def test_the_terminal_highlighter_keeps_every_character(screen: str) -> None:
    assert shown(highlight_terminal(screen)) == as_predicted(screen)


@pytest.mark.parametrize("lexer", LEXERS)
@settings(max_examples=60, deadline=None)
@given(screen=screens)
def test_highlighting_with_any_lexer_keeps_every_character(lexer: str, screen: str) -> None:
    assert shown(highlight(screen, lexer)) == as_predicted(screen)


@pytest.mark.parametrize("domain", list(DOMAINS))
@settings(max_examples=100, deadline=None)
@given(screen=screens)
def test_every_panes_highlighter_keeps_every_character(domain: str, screen: str) -> None:
    lines = pane_highlighter(domain)(screen)
    # The web tab indents an accessibility tree by 4 columns a tab (an HTML page by 8).
    tab = 4 if domain == "web" and not screen.lstrip().startswith("<") else 8
    assert shown(lines) == as_predicted(screen, tab)


@settings(max_examples=200, deadline=None)
@given(screen=screens)
def test_web_pages_keep_every_character(screen: str) -> None:
    assert shown(page_lines(screen)) == as_predicted(screen, 4)


@settings(max_examples=200, deadline=None)
@given(screen=screens)
def test_a_search_answer_without_numbered_results_keeps_every_character(screen: str) -> None:
    """Numbered results are laid out as a list on purpose; anything else is Markdown,
    shown as predicted, blank lines included."""
    if search_results(screen):
        return
    assert shown(search_page(screen)) == as_predicted(screen)
