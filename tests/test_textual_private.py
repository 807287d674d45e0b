"""Every private piece of Textual the app leans on is fenced in ui/textual_private.py;
this fails when an installed Textual moves any of it."""

from __future__ import annotations

import pytest

from agentworld_tui.ui import textual_private


def test_what_the_fence_relies_on_is_all_there() -> None:
    assert textual_private.check() == []


def test_the_fence_names_something_for_each_private_use() -> None:
    assert len(textual_private.RELIES_ON) >= 15
    assert all(reason for reason in textual_private.RELIES_ON.values())


def test_a_piece_textual_no_longer_has_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(textual_private.RELIES_ON, "Widget._no_such_part", "a test")
    assert textual_private.check() == ["Widget._no_such_part"]


def test_the_measurement_switch_names_only_render_pieces() -> None:
    """AGENTWORLD_RENDER_OFF (for measurement only) switches named pieces off; a name it
    does not know is an error, not a run that measures nothing."""
    assert textual_private._render_off("") == frozenset()
    assert textual_private._render_off(" scrollbar, ") == {"scrollbar"}
    with pytest.raises(ValueError, match="no render piece clock"):
        textual_private._render_off("clock")


@pytest.mark.parametrize(
    ("sent", "key"),
    [
        ("\x1b1", "alt+1"),  # tmux, xterm, most terminals: ESC then the digit
        ("\x1b7", "alt+7"),
        ("\x1b[50;3u", "alt+2"),  # CSI u (kitty keyboard protocol)
        ("\x1b[27;3;51~", "alt+3"),  # xterm modifyOtherKeys (tmux extended-keys)
        ("\x1b[27;5;97~", "ctrl+a"),
        ("£", "pound_sign"),  # a character typed as such stays that character
        ("\x1b[1;3C", "alt+right"),
    ],
)
def test_keys_are_read_as_terminals_send_them(sent: str, key: str) -> None:
    from textual._xterm_parser import XTermParser

    textual_private.read_keys_as_sent()
    read = [event for event in XTermParser().feed(sent) if hasattr(event, "key")]
    assert [event.key for event in read] == [key]
