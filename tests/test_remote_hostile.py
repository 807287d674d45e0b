"""A hostile server on 127.0.0.1: nothing it sends besides the answer reaches a user raw.

Error bodies, error events, model ids and broken streams carry terminal escapes (a
clipboard write, a window title), C1 controls, bidi overrides, DEL and NUL; whatever the
engine hands out (EngineError messages, a turn's error, EngineInfo, log records) must be
one bounded line with none of them.
"""

from __future__ import annotations

import gzip
import json
import logging
import unicodedata
from collections.abc import Iterator

import pytest
from faultserver import ENDLESS_CHUNKS, FaultServer, Reply

from agentworld_tui.engines.base import (
    EngineError,
    EngineEvent,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
)
from agentworld_tui.engines.remote import RemoteEngine, safe_line

HOSTILE = (
    "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned title\x07\x1b[31m\x9b2J\u202etxet\u202c\x7f\x00"
    "\r\nnext\tline\x1bPq#0\x1b\\\x85\u2028\u2066end\x07"
)
"""Clipboard write (OSC 52), window title (OSC 0), CSI, 8-bit CSI, bidi override and
isolate, DEL, NUL, CR LF, tab, DCS, NEL, line separator, BEL."""
READABLE = ("txet", "next line", "end")
MESSAGES = [{"role": "user", "content": "ls"}]
PARAMS = GenerationParams(max_tokens=50, enable_thinking=False)
LIMIT = 800
"""No message the engine writes is longer than this, however long the server's text."""


def is_harmful(ch: str) -> bool:
    return (
        unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        or ch in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    )


def assert_safe(text: str, *, readable: bool = True) -> None:
    assert text, "empty"
    bad = sorted({f"U+{ord(ch):04X}" for ch in text if is_harmful(ch)})
    assert not bad, f"{bad} in {text!r}"
    assert len(text) <= LIMIT, len(text)
    if readable:  # the visible part of the server's text is still there to read
        assert all(word in text for word in READABLE), text


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG, logger="agentworld"):
        yield caplog


def assert_logs_safe(records: pytest.LogCaptureFixture) -> None:
    messages = [r.getMessage() for r in records.records if r.name.startswith("agentworld")]
    assert messages
    for message in messages:
        assert_safe(message, readable=False)


def load_error(engine: RemoteEngine) -> str:
    with pytest.raises(EngineError) as caught:
        engine.load()
    return str(caught.value)


def turn(engine: RemoteEngine) -> Finished:
    events: list[EngineEvent] = list(engine.stream(MESSAGES, PARAMS, GenerationControl()))
    last = events[-1]
    assert isinstance(last, Finished)
    return last


def test_safe_line_bounds_and_cleans() -> None:
    line = safe_line(HOSTILE + "x" * 100_000, 200)
    assert_safe(line)
    assert len(line) == 200 and line.endswith("…")
    unterminated = safe_line("\x1b]52;c;" + "A" * 50_000 + " tail", 120)
    assert "\x1b" not in unterminated and len(unterminated) <= 120


# -- loading: /v1/models -----------------------------------------------------------------
def test_a_hostile_model_id_is_shown_clean(
    server: FaultServer, records: pytest.LogCaptureFixture
) -> None:
    server.models = [{"id": HOSTILE, "object": "model", "max_model_len": 4096}]
    engine = RemoteEngine(server.url)
    engine.load()
    assert_safe(engine.info.name)
    assert_safe(engine.info.where, readable=False)
    assert_logs_safe(records)
    assert turn(engine).error == ""
    assert server.chat_requests()[-1].body["model"] == HOSTILE  # sent back as the server named it


def test_hostile_model_ids_in_load_errors(server: FaultServer) -> None:
    server.models = [{"id": HOSTILE, "object": "model"}, {"id": "b" + HOSTILE, "object": "model"}]
    assert_safe(load_error(RemoteEngine(server.url)))
    assert_safe(load_error(RemoteEngine(server.url, model="missing")))
    server.models = [{"id": HOSTILE * 2000, "object": "model"}] * 20  # huge ids, many of them
    assert_safe(load_error(RemoteEngine(server.url, model="missing")))


def test_a_model_list_of_the_wrong_shape_is_a_clear_error(server: FaultServer) -> None:
    server.models = [{"object": "model"}, {"id": 7}]  # type: ignore[list-item]
    message = load_error(RemoteEngine(server.url))
    assert "lists no models" in message


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, error_message=HOSTILE),
        Reply(status=503, error_body=HOSTILE.encode()),
        Reply(status=403, error_message=HOSTILE),
        Reply(status=401, error_message=HOSTILE),
        Reply(status=400, error_body=json.dumps({"detail": HOSTILE}).encode()),
        Reply(status=502, error_body=(HOSTILE * 40_000).encode(), error_content_type="text/html"),
    ],
    ids=["500-json", "503-text", "403", "401-key", "400-detail", "502-huge"],
)
def test_error_bodies_while_loading(
    server: FaultServer,
    reply: Reply,
    monkeypatch: pytest.MonkeyPatch,
    records: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("WORLD_KEY", "sk-1")
    server.models_reply = reply
    message = load_error(RemoteEngine(server.url, api_key_env="WORLD_KEY"))
    assert_safe(message)
    assert f"HTTP {reply.status}" in message or f"({reply.status}" in message


def test_a_redirect_is_not_followed(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key goes only to the address the user gave; the message says where to go."""
    monkeypatch.setenv("WORLD_KEY", "sk-1")
    elsewhere = "http://elsewhere.invalid/v1/models\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x9b2J\x7f"
    server.models_reply = Reply(status=301, error_body=b"", location=elsewhere)
    with pytest.raises(EngineError) as caught:
        RemoteEngine(server.url, api_key_env="WORLD_KEY").load()
    message = str(caught.value)
    assert caught.value.kind is ErrorKind.REFUSED
    assert message.startswith(f"{server.url} redirects to http://elsewhere.invalid/v1/models")
    assert "(HTTP 301) while listing the models" in message
    assert_safe(message, readable=False)
    assert [r.path for r in server.requests] == ["/v1/models"]

    engine = RemoteEngine(server.url)
    server.models_reply = None
    engine.load()
    server.queue(Reply(status=307, error_body=b"", location="https://elsewhere.invalid/v1"))
    done = turn(engine)
    assert done.error_kind is ErrorKind.REFUSED
    assert "redirects to https://elsewhere.invalid/v1 (HTTP 307) while starting" in done.error


# -- streaming ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=400, error_message=HOSTILE),
        Reply(status=422, error_body=HOSTILE.encode()),
        Reply(status=500, error_message=HOSTILE),
        Reply(status=503, error_body=(HOSTILE * 40_000).encode()),
        Reply(status=429, error_body=json.dumps({"error": HOSTILE}).encode()),
    ],
    ids=["400-json", "422-text", "500-json", "503-huge", "429-error-string"],
)
def test_error_bodies_while_streaming(
    server: FaultServer, reply: Reply, records: pytest.LogCaptureFixture
) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    server.queue(reply)
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert_safe(done.error)
    assert_logs_safe(records)
    assert turn(engine).error == ""  # still usable


def test_a_404_names_a_hostile_model_clean(server: FaultServer) -> None:
    server.models = [{"id": HOSTILE, "object": "model"}]
    engine = RemoteEngine(server.url)
    engine.load()
    server.queue(Reply(status=404, error_message=HOSTILE))
    assert_safe(turn(engine).error)


def test_an_error_event_in_the_stream(
    server: FaultServer, records: pytest.LogCaptureFixture
) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    server.queue(Reply(content=["a", "b"], error_event_after=1, error_message=HOSTILE * 500))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert_safe(done.error)
    assert_logs_safe(records)


@pytest.mark.parametrize("chunked", [True, False])
def test_a_connection_dropped_after_hostile_bytes(server: FaultServer, chunked: bool) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    garbage = (HOSTILE + "\r\n").encode()
    server.queue(Reply(content=["a", "b"], cut_after=1, cut_with=garbage, chunked=chunked))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert_safe(done.error, readable=False)


def test_chunks_of_the_wrong_shape_end_the_turn_cleanly(server: FaultServer) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    odd = [
        {"choices": HOSTILE},
        {"choices": [HOSTILE]},
        {"choices": [{"delta": HOSTILE, "finish_reason": {"x": 1}}]},
        {"choices": [{"delta": {"content": {"x": HOSTILE}}}], "usage": HOSTILE},
        {"choices": [], "usage": {"prompt_tokens": HOSTILE, "completion_tokens": [1]}},
        {"choices": [{"delta": {"reasoning_content": [1]}}], "usage": {"prompt_tokens_details": 7}},
        {"usage": {"completion_tokens": True, "completion_tokens_details": [HOSTILE]}},
        [HOSTILE],
        HOSTILE,
        None,
        5,
    ]
    server.queue(Reply(raw_chunks=odd, content=["<predicted_observation>\nfine"]))
    done = turn(engine)
    assert (done.observation, done.error, done.stats.stop_reason) == ("fine", "", "eos")


# -- replies too big or too slow -------------------------------------------------------------
def test_a_huge_model_list_is_refused_without_reading_it_all(server: FaultServer) -> None:
    server.models = [{"id": f"model-{i:08d}", "object": "model"} for i in range(1_000_000)]
    server.models_reply = Reply(status=200)
    message = load_error(RemoteEngine(server.url))
    assert "sent a reply longer than 8 MiB while listing the models" in message
    assert_safe(message, readable=False)
    assert server.body_bytes_sent < len(json.dumps({"data": server.models})) // 2


def test_a_huge_error_body_is_cut_short(server: FaultServer) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    body = ("boom " * 20_000_000).encode()
    server.queue(Reply(status=500, error_body=body))
    done = turn(engine)
    assert (
        done.error
        == f"{server.url} answered HTTP 500 while starting the answer: "
        + ("boom " * 47)
        + "boom…; try again"
    )
    assert server.body_bytes_sent < len(body) // 2


def test_a_compressed_error_body_is_not_unpacked(server: FaultServer) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    secret = json.dumps({"error": {"message": "unpacked " * 1000}}).encode()
    body = gzip.compress(secret + b" " * (256 << 20))  # a small reply, 256 MiB unpacked
    server.queue(Reply(status=500, error_body=body, content_encoding="gzip"))
    done = turn(engine)
    assert done.error.startswith(f"{server.url} answered HTTP 500 while starting the answer")
    assert "unpacked" not in done.error
    assert_safe(done.error, readable=False)
    assert all(r.headers.get("accept-encoding") == "identity" for r in server.requests)


def test_a_trickled_model_list_is_given_up(server: FaultServer) -> None:
    server.models_reply = Reply(status=200, trickle_s=0.05)
    message = load_error(RemoteEngine(server.url, timeout=0.5))
    assert "took more than 0.5 s to send its reply while listing the models" in message


def test_a_trickled_error_body_is_given_up(server: FaultServer) -> None:
    engine = RemoteEngine(server.url, timeout=0.5)
    engine.load()
    server.queue(Reply(status=500, error_message="slow " * 1000, trickle_s=0.05))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert "sent nothing for 0.5 s while starting the answer (timeout)" in done.error


def test_an_endless_line_in_the_stream_is_refused(server: FaultServer) -> None:
    engine = RemoteEngine(server.url, timeout=20)
    engine.load()
    server.queue(Reply(content=["<predicted_observation>\nbegun"], endless_line=True))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert "sent a line of its stream longer than 4 MiB while streaming the answer" in done.error
    assert "partial output is kept" in done.error
    assert done.observation == "begun"


# -- servers that do not stop ----------------------------------------------------------------
@pytest.mark.parametrize("text", ["more text ", "x" * 100_000], ids=["small-chunks", "huge-chunks"])
def test_a_server_that_ignores_max_tokens_is_cut_off(server: FaultServer, text: str) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    server.queue(Reply(content=["<predicted_observation>\n"], endless=text))
    done = turn(engine)
    assert (done.stats.stop_reason, done.error) == ("max_tokens", "")
    assert done.observation.startswith(text.strip())
    assert len(done.observation) <= (PARAMS.max_tokens + 1) * len(text)
    assert done.stats.generated_tokens > PARAMS.max_tokens
    if len(text) > 1000:  # gigabytes on offer: only a little was taken
        assert server.body_bytes_sent < ENDLESS_CHUNKS * len(text) // 100
    assert server.chat_requests()[-1].body["max_tokens"] == PARAMS.max_tokens
    server.queue(Reply(content=["next"]))
    assert turn(engine).observation == "next"


def test_a_server_that_sends_empty_chunks_for_ever_is_cut_off(server: FaultServer) -> None:
    engine = RemoteEngine(server.url)
    engine.load()
    blank = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}}]}
    server.queue(Reply(raw_chunks=[blank] * 20_000, content=["never"]))
    done = turn(engine)
    assert (done.stats.stop_reason, done.error, done.observation) == ("max_tokens", "", "")


def test_a_server_sending_a_byte_at_a_time_hits_the_idle_timeout(server: FaultServer) -> None:
    engine = RemoteEngine(server.url, timeout=30.0, idle_timeout=0.5)
    engine.load()
    content = ["<predicted_observation>\nbegun", " and more"]
    server.queue(Reply(content=content, trickle_after=1, trickle_s=0.05))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert "sent nothing for 0.5 s while streaming the answer (idle timeout)" in done.error
    assert "[server] idle_timeout" in done.error and "partial output is kept" in done.error
    assert done.observation == "begun"


def test_a_server_trickling_its_first_chunk_hits_the_timeout(server: FaultServer) -> None:
    engine = RemoteEngine(server.url, timeout=0.5, idle_timeout=0.5)
    engine.load()
    server.queue(Reply(content=["<predicted_observation>\nlate"], trickle_after=0, trickle_s=0.05))
    done = turn(engine)
    assert done.stats.stop_reason == "error"
    assert "sent nothing for 0.5 s while starting the answer (timeout)" in done.error
