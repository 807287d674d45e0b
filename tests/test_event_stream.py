"""Splitting an answer's event stream into events (engines/remote/events.py), however the
bytes are cut: the remote engine reads every server's stream through it."""

from __future__ import annotations

import json

import pytest

from agentworld_tui.engines.remote.events import sse_data

BODY = (
    ": a comment the server sends to keep the line open\r\n"
    'data: {"a": 1}\r\n\r\n'
    "event: message\n"
    "id: 7\n"
    'data: {"text": "caf\u00e9 \u2603",\n'
    'data:  "more": true}\n\n'
    "data: [DONE]\n\n"
).encode()
EVENTS = ['{"a": 1}', '{"text": "caf\u00e9 \u2603",\n "more": true}', "[DONE]"]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(BODY)])
def test_events_are_the_same_however_the_bytes_are_cut(size: int) -> None:
    """One byte at a time splits the two-byte é and the three-byte snowman too."""
    chunks = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    events = list(sse_data(chunks))
    assert events == EVENTS
    assert json.loads(events[1]) == {"text": "caf\u00e9 \u2603", "more": True}


def test_a_last_event_without_its_blank_line_is_kept() -> None:
    assert list(sse_data([b'data: {"x": 1}\n\ndata: {"y"', b": 2}"])) == ['{"x": 1}', '{"y": 2}']
    assert list(sse_data([b'data: {"z": 3}\n'])) == ['{"z": 3}']


def test_lines_other_than_data_make_no_event() -> None:
    assert list(sse_data([b": ping\n\nevent: x\n\nretry: 10\n\n", b"\n\n"])) == []
    assert list(sse_data([b"data:tight\n\n"])) == ["tight"]
