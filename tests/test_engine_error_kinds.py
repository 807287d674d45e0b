"""Engines say what kind of failure ended a generation, as a typed value beside the message.

Retries and advice read the kind (``ErrorKind``), never the wording. Each kind is produced
here by a real server on 127.0.0.1 doing what real servers do: ``faultserver.FaultServer``
for refusals, cuts and silence, and ``python -m llama_cpp.server`` with a context too small
for the prompt (it answers a streamed request with an empty body and says why only in its
own log, so the engine must find out).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from faultserver import FaultServer, Reply, free_port
from ggufgen import write_scripted_model

from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy, is_transient
from agentworld_tui.engines.base import (
    EngineError,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
)
from agentworld_tui.engines.remote import RemoteEngine

MESSAGES = [
    {"role": "system", "content": "You simulate a shell."},
    {"role": "user", "content": "ls"},
]
PARAMS = GenerationParams(max_tokens=200, seed=7)
SCRIPT = "listing</think>\n\n<predicted_observation>\nfile_a\n</predicted_observation>"


def run(engine: RemoteEngine, messages: list[dict[str, str]] = MESSAGES) -> Finished:
    events = list(engine.stream(messages, PARAMS, GenerationControl()))
    last = events[-1]
    assert isinstance(last, Finished)
    return last


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def connected(server: FaultServer, **kwargs: float) -> RemoteEngine:
    engine = RemoteEngine(server.url, **kwargs)  # type: ignore[arg-type]
    engine.load()
    return engine


# -- each failure, its kind ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(status=500, error_message="boom"), ErrorKind.TRANSIENT),
        (Reply(status=503, error_message="busy"), ErrorKind.TRANSIENT),
        (Reply(status=429, error_message="slow down"), ErrorKind.TRANSIENT),
        (Reply(status=400, error_message="temperature must be a number"), ErrorKind.REFUSED),
        (Reply(status=401, error_message="bad key"), ErrorKind.AUTH),
        (Reply(status=403, error_message="not for you"), ErrorKind.AUTH),
        (Reply(status=404, error_message="no such model"), ErrorKind.NOT_FOUND),
        (Reply(content=["<predicted_observation>\nab"], cut_after=0), ErrorKind.TRANSIENT),
        (Reply(content=["x"], cut_after=0, chunked=False), ErrorKind.TRANSIENT),
        (
            Reply(content=["x"], error_event_after=1, error_message="GPU fell over"),
            ErrorKind.FAILED,
        ),
        (Reply(content=["x"], endless_line=True), ErrorKind.BAD_REPLY),
    ],
    ids=[
        "500",
        "503",
        "429",
        "400",
        "401",
        "403",
        "404",
        "cut",
        "empty-body",
        "error-event",
        "endless-line",
    ],
)
def test_each_failure_has_its_kind(server: FaultServer, reply: Reply, kind: ErrorKind) -> None:
    engine = connected(server)
    server.queue(reply)
    done = run(engine)
    assert done.error
    assert done.error_kind is kind, done.error
    assert run(engine).error_kind is None  # a turn that works has none


def test_a_server_that_is_gone_is_transient(server: FaultServer) -> None:
    engine = connected(server)
    server.stop()
    assert run(engine).error_kind is ErrorKind.TRANSIENT


def test_silence_is_a_timeout(server: FaultServer) -> None:
    engine = connected(server, timeout=0.5)
    server.queue(Reply(hang=True))
    assert run(engine).error_kind is ErrorKind.TIMEOUT


def test_load_failures_carry_their_kind(server: FaultServer) -> None:
    with pytest.raises(EngineError) as refused:
        RemoteEngine(f"http://127.0.0.1:{free_port()}/v1").load()
    assert refused.value.kind is ErrorKind.TRANSIENT
    with pytest.raises(EngineError) as missing:
        RemoteEngine(server.url, model="another-model").load()
    assert missing.value.kind is ErrorKind.NOT_FOUND
    server.api_key = "sk-right"
    with pytest.raises(EngineError) as unauthorised:
        RemoteEngine(server.url).load()
    assert unauthorised.value.kind is ErrorKind.AUTH


# -- retries read the kind ---------------------------------------------------------------------
def failure(text: str, kind: ErrorKind | None) -> Finished:
    return Finished("", "", False, GenerationStats(stop_reason="error"), text, error_kind=kind)


def test_retries_read_the_kind_not_the_words() -> None:
    assert is_transient(failure("the server coughed", ErrorKind.TRANSIENT))
    # Words that once meant "ask again" decide nothing any more.
    cut = "the stream ended before the answer was finished (the connection was cut); try again"
    assert not is_transient(failure(cut, ErrorKind.CONTEXT_TOO_LONG))
    assert not is_transient(failure("connection refused", ErrorKind.AUTH))
    assert not is_transient(failure("connection refused", None))


def test_a_context_too_small_is_not_asked_again(server: FaultServer) -> None:
    server.models = [{"id": "world-model", "object": "model", "owned_by": "llamacpp"}]
    server.queue(*[llama_server_context_refusal(3389, 2048)] * 3)
    engine = RetryingEngine(connected(server), RetryPolicy(attempts=3, first_pause=0.01))
    control = GenerationControl()
    events = list(engine.stream(MESSAGES, PARAMS, control))
    done = events[-1]
    assert isinstance(done, Finished)
    assert done.error_kind is ErrorKind.CONTEXT_TOO_LONG
    assert engine.retries(control) == 0
    assert len(server.chat_requests()) == 1


# -- a context too small -----------------------------------------------------------------------
def llama_server_context_refusal(prompt: int, n_ctx: int) -> Reply:
    """llama.cpp's llama-server refusing a prompt longer than a slot's context."""
    error = {
        "code": 400,
        "message": f"request ({prompt} tokens) exceeds the available context size "
        f"({n_ctx} tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": prompt,
        "n_ctx": n_ctx,
    }
    body = json.dumps({"error": error}).encode()
    return Reply(status=400, error_body=body, error_content_type="application/json")


def test_llama_server_context_too_small_says_what_to_change(server: FaultServer) -> None:
    server.models = [{"id": "world-model", "object": "model", "owned_by": "llamacpp"}]
    engine = connected(server)
    server.queue(llama_server_context_refusal(3389, 2048))
    done = run(engine)
    assert done.error_kind is ErrorKind.CONTEXT_TOO_LONG
    assert "3389" in done.error and "2048" in done.error
    assert "-c " in done.error  # llama-server's flag
    assert "try again" not in done.error
    # What was learnt is used: the next turns fit their history to the server's context.
    assert engine.info.n_ctx == 2048
    assert engine.context_reported


def test_vllm_context_too_small_names_its_flag(server: FaultServer) -> None:
    server.models = [{"id": "world-model", "object": "model", "owned_by": "vllm"}]
    engine = connected(server)
    message = (
        "This model's maximum context length is 8192 tokens. However, you requested 9100 "
        "tokens (9000 in the messages, 100 in the completion). Please reduce the length of "
        "the messages or completion."
    )
    server.queue(Reply(status=400, error_message=message))
    done = run(engine)
    assert done.error_kind is ErrorKind.CONTEXT_TOO_LONG
    assert "--max-model-len" in done.error
    assert engine.info.n_ctx == 8192


def test_an_answer_too_long_for_the_context_is_asked_again_shorter(server: FaultServer) -> None:
    """The prompt fits, prompt plus max_tokens does not: asked again with room to answer."""
    server.models = [{"id": "world-model", "object": "model", "owned_by": "vllm"}]
    engine = connected(server)
    message = (
        "This model's maximum context length is 1024 tokens. However, you requested 1200 "
        "tokens (1000 in the messages, 200 in the completion)."
    )
    server.queue(Reply(status=400, error_message=message), Reply(content=["fine"]))
    done = run(engine)
    assert (done.error, done.error_kind) == ("", None)
    requests = server.chat_requests()
    assert [r.body["max_tokens"] for r in requests] == [200, 24]


# -- llama_cpp.server, for real ------------------------------------------------------------------
SERVER_START_LIMIT_S = 90.0


@pytest.fixture(scope="module")
def small_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("small-llama-server")
    model = write_scripted_model(folder / "scripted.gguf", SCRIPT)
    port = free_port()
    log_file = (folder / "server.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--n_ctx",
            "512",
            "--n_threads",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + SERVER_START_LIMIT_S
    try:
        while True:
            if process.poll() is not None:
                log_file.flush()
                pytest.fail(f"llama_cpp.server exited: {(folder / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not become ready")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log_file.close()


def test_llama_cpp_server_context_too_small_is_not_a_cut_connection(
    small_llama_server: str,
) -> None:
    engine = RemoteEngine(small_llama_server)
    engine.load()
    assert engine.info.n_ctx == 32768  # not reported: assumed until the server says
    long_state = "root@box:/app# ls\n" + "file_with_a_long_name.txt\n" * 120
    messages = [MESSAGES[0], {"role": "user", "content": long_state}]
    done = run(engine, messages)
    assert done.error_kind is ErrorKind.CONTEXT_TOO_LONG, done.error
    assert "ended before the answer was finished" not in done.error
    assert "--n_ctx" in done.error  # llama_cpp.server's flag
    assert "512" in done.error
    assert engine.info.n_ctx == 512
    assert done.stats.n_ctx == 512
    counted = int(done.error.split("the prompt is ")[1].split()[0])
    again = run(engine, messages)  # now refused before it is sent, with the size calibrated
    assert again.error_kind is ErrorKind.CONTEXT_TOO_LONG
    estimate = int(again.error.split("the prompt is about ")[1].split()[0])
    assert 0.8 * counted < estimate < 1.25 * counted
    assert run(engine).error == ""  # a prompt that fits still works


def test_a_context_the_server_never_reported_is_not_claimed(small_llama_server: str) -> None:
    engine = RemoteEngine(small_llama_server)
    engine.load()
    done = run(engine)
    assert done.error == ""
    assert done.stats.n_ctx == 0  # unknown, rather than the 32768 assumed for fitting
    given = RemoteEngine(small_llama_server, n_ctx=512)
    given.load()
    assert run(given).stats.n_ctx == 512


def test_no_reasoning_counts_no_reasoning_tokens(server: FaultServer) -> None:
    engine = connected(server)
    usage = {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}
    server.queue(
        Reply(content=["<predicted_observation>\nfile_a\n</predicted_observation>"], usage=usage)
    )
    done = run(engine)
    assert done.observation == "file_a"
    assert done.reasoning == ""
    assert (done.stats.generated_tokens, done.stats.reasoning_tokens) == (12, 0)
