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
