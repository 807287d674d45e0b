"""Splitting an answer's event stream into events (engines/remote/events.py), however the
bytes are cut: the remote engine reads every server's stream through it."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from agentworld_tui.engines.remote.events import sse_data
from agentworld_tui.engines.remote.transport import Connections

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


def test_kept_connections_the_server_closed_are_all_passed_over() -> None:
    """Kept connections the server has closed meanwhile, one after the other (answers in
    flight on other threads give theirs back while this one starts): each is dropped in
    turn, and the answer comes on a new connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stale = 3

    def serve() -> None:
        for n in range(stale + 1):
            peer, _ = listener.accept()
            if n < stale:
                peer.close()  # kept by the client, closed here
                continue
            request = b""
            while b"\r\n\r\n" not in request:
                request += peer.recv(4096)
            peer.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Connection: close\r\n\r\n" + BODY
            )
            peer.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    connections = Connections(url)
    for _ in range(stale):
        kept = http.client.HTTPConnection("127.0.0.1", port, timeout=5.0)
        kept.connect()
        connections.give(kept)
    time.sleep(0.2)  # the server has closed them
    connection, response = connections.send(
        "POST", url, b"{}", {}, connect_timeout=5.0, read_timeout=5.0
    )
    assert response.status == 200
    assert list(sse_data(iter(lambda: response.read1(64), b""))) == EVENTS
    connection.close()
    server.join(5)
    listener.close()
