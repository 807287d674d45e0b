"""The remote engine against real servers on 127.0.0.1.

``python -m llama_cpp.server`` serving a scripted GGUF checks a whole turn, through the
engine and through ``agentworld predict --server``; ``faultserver.FaultServer`` checks
what real servers and networks do wrong, and that the engine stays usable afterwards.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply, free_port
from ggufgen import write_scripted_model

from agentworld_tui.config import log_path, setup_logging
from agentworld_tui.domains import get_domain
from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    ReasoningDelta,
)
from agentworld_tui.engines.remote import RemoteEngine, base_url, display_url
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import new_session
from agentworld_tui.world.splitter import ObservationSplitter

SCRIPT = (
    "The action lists the folder.</think>\n\n<predicted_observation>\n"
    "file_a  file_b\nroot@box:/app# \n</predicted_observation>"
)
OBSERVATION = "file_a  file_b\nroot@box:/app#"
REASONING = "The action lists the folder."
MESSAGES = [
    {"role": "system", "content": "You simulate a shell."},
    {"role": "user", "content": "ls"},
]
PARAMS = GenerationParams(max_tokens=200, seed=7)
SERVER_START_LIMIT_S = 90.0
REPO = Path(__file__).resolve().parent.parent


def collect(engine: RemoteEngine, params: GenerationParams = PARAMS) -> list[EngineEvent]:
    return list(engine.stream(MESSAGES, params, GenerationControl()))


def finished(events: list[EngineEvent]) -> Finished:
    assert events, "no events"
    last = events[-1]
    assert isinstance(last, Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return last


def streamed(events: list[EngineEvent]) -> tuple[str, str]:
    """Reasoning and answer as a viewer would have assembled them from the deltas."""
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    answer = ""
    for e in events:
        if isinstance(e, AnswerDelta):
            answer = e.text if e.reset else answer + e.text
    return reasoning, answer


# -- a real llama.cpp server ---------------------------------------------------------------
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("llama-server")
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
            "--model_alias",
            "scripted-world",
            "--n_ctx",
            "4096",
            "--n_threads",
            "2",
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


def test_turn_end_to_end_through_llama_cpp_server(llama_server: str) -> None:
    engine = RemoteEngine(llama_server, n_ctx=4096)
    progress: list[str] = []
    engine.load(progress.append)
    assert engine.loaded
    assert engine.info.name == "scripted-world"  # the one model served is picked
    assert engine.info.where == llama_server
    assert engine.info.n_ctx == 4096  # llama_cpp.server does not report it: the setting
    assert not engine.context_reported
    assert progress[-1] == "ready"

    domain = get_domain("terminal")
    session, _problems = new_session(domain, Scenario("t", "Test", state="root@box:/app# "))
    for number in (1, 2):  # the second turn sends the first one as history
        turn = session.begin_turn(domain.parse_action("ls", session.scenario))
        events = list(run_turn(engine, session, turn, PARAMS, GenerationControl()))
        done = finished(events)
        assert done.error == ""
        assert (turn.observation, turn.reasoning, turn.status) == (
            OBSERVATION,
            REASONING,
            "complete",
        ), number
        assert streamed(events)[0].strip() == REASONING
        assert streamed(events)[1].strip() == OBSERVATION
        assert done.closed_reasoning
        stats = done.stats
        assert stats.stop_reason == "eos"
        assert stats.generated_tokens > 10  # estimated from the streamed text
        assert 0 < stats.reasoning_tokens < stats.generated_tokens
        assert stats.prompt_tokens > 0
        assert stats.n_ctx == 4096


def test_predict_command_with_server(llama_server: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "agentworld_tui", "predict", "--server", llama_server]
    result = subprocess.run(
        [*command, "--json", "ls"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["observation"] == OBSERVATION
    assert data["reasoning"] == REASONING
    assert data["status"] == "complete"

    wrong = subprocess.run(
        [*command, "--server-model", "other", "ls"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert wrong.returncode == 2
    lines = wrong.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not serve 'other'" in lines[0], wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_predict_command_with_no_server(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "predict", "--server", url, "ls"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"agentworld: cannot connect to {url}: connection refused (is the server running, "
        "and are the host and port right?)"
    )


# -- the fault-injecting server ------------------------------------------------------------
@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def connected(
    server: FaultServer, *, timeout: float = 5.0, idle_timeout: float = 120.0
) -> RemoteEngine:
    engine = RemoteEngine(server.url, timeout=timeout, idle_timeout=idle_timeout)
    engine.load()
    return engine


def test_reasoning_in_its_own_field_and_usage(server: FaultServer) -> None:
    engine = connected(server)
    assert engine.info.n_ctx == 8192 and engine.context_reported  # vLLM's max_model_len
    usage = {
        "prompt_tokens": 40,
        "completion_tokens": 12,
        "total_tokens": 52,
        "prompt_tokens_details": {"cached_tokens": 30},
    }
    server.queue(
        Reply(
            reasoning=["The user ", "lists files."],
            content=["\n\n<predicted_obs", "ervation>\nfile_a\n", "</predicted_observation>"],
            usage=usage,
        )
    )
    events = collect(engine)
    done = finished(events)
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        "The user lists files.",
        "file_a",
        True,
    )
    assert streamed(events) == ("The user lists files.", "file_a\n")
    stats = done.stats
    assert (stats.prompt_tokens, stats.evaluated_prompt_tokens) == (40, 10)
    assert stats.generated_tokens == 12
    reasoning_chars = len("The user lists files.")
    answer_chars = len("\n\n<predicted_observation>\nfile_a\n</predicted_observation>")
    # The server gave no reasoning count: its total is shared out by the text's length.
    assert stats.reasoning_tokens == round(12 * reasoning_chars / (reasoning_chars + answer_chars))
    assert stats.stop_reason == "eos"
    assert done.error == ""

    body = server.chat_requests()[-1].body
    assert body["model"] == "world-model"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["temperature"], body["top_p"], body["top_k"], body["seed"]) == (0.6, 0.95, 20, 7)
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["messages"] == MESSAGES
    assert 0 < body["max_tokens"] <= 200


def test_reasoning_field_named_reasoning(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(Reply(reasoning=["newer vLLM"], reasoning_field="reasoning", content=["ok"]))
    done = finished(collect(engine))
    assert (done.reasoning, done.observation) == ("newer vLLM", "ok")


def test_reasoning_only_means_no_answer_yet(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(Reply(reasoning=["still ", "thinking"], finish_reason="length"))
    done = finished(collect(engine))
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        "still thinking",
        "",
        False,
    )
    assert done.stats.stop_reason == "max_tokens"


def test_thinking_off_sends_the_switch_and_reads_an_answer(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(Reply(content=["<predicted_observation>\nquick\n</predicted_observation>"]))
    params = GenerationParams(max_tokens=50, enable_thinking=False)
    done = finished(collect(engine, params))
    assert (done.reasoning, done.observation, done.closed_reasoning) == ("", "quick", True)
    body = server.chat_requests()[-1].body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "seed" not in body  # -1 means the server picks


def test_max_tokens_capped_to_the_servers_context(server: FaultServer) -> None:
    server.models = [{"id": "small", "object": "model", "max_model_len": 1000}]
    engine = connected(server)
    finished(collect(engine, GenerationParams(max_tokens=32768)))
    sent = server.chat_requests()[-1].body["max_tokens"]
    assert 800 < sent < 1000

    too_long = [{"role": "user", "content": "x" * 5000}]
    done = finished(list(engine.stream(too_long, PARAMS, GenerationControl())))
    assert done.stats.stop_reason == "error"
    assert "the context holds 1000" in done.error
    assert len(server.chat_requests()) == 1  # refused before sending

    capped = RemoteEngine(server.url, n_ctx=600)  # --ctx caps what the server offers
    capped.load()
    assert capped.info.n_ctx == 600
    finished(list(capped.stream(MESSAGES, GenerationParams(max_tokens=32768), GenerationControl())))
    assert 400 < server.chat_requests()[-1].body["max_tokens"] < 600


def test_exact_prompt_size_from_vllm_tokenize(server: FaultServer) -> None:
    server.tokenize = True
    server.models = [{"id": "m", "object": "model", "max_model_len": 1000}]
    engine = connected(server)
    finished(collect(engine, GenerationParams(max_tokens=32768)))
    tokenized = [r for r in server.requests if r.path == "/tokenize"]
    assert tokenized and tokenized[-1].body["messages"] == MESSAGES
    count = len("You simulate a shell.ls") // 4 + 8  # what the server's /tokenize says
    assert server.chat_requests()[-1].body["max_tokens"] == 1000 - math.ceil(count * 1.15)


def test_connection_refused(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = RemoteEngine(url)
    with pytest.raises(EngineError, match=r"connection refused \(is the server running"):
        engine.load()
    assert not engine.loaded


def test_server_going_away_between_turns(server: FaultServer) -> None:
    engine = connected(server)
    assert finished(collect(engine)).error == ""
    server.stop()
    done = finished(collect(engine))
    assert done.stats.stop_reason == "error"
    assert done.error.startswith(f"cannot connect to {server.url}: connection refused")
    with FaultServer(port_wanted=server.port):  # back where it was: the same engine retries
        retry = finished(collect(engine, GenerationParams(enable_thinking=False)))
    assert (retry.error, retry.observation) == ("", "hello")


def test_timeout_before_the_first_byte_then_retry(server: FaultServer) -> None:
    engine = connected(server, timeout=0.5)
    server.queue(Reply(hang=True))
    done = finished(collect(engine))
    assert done.stats.stop_reason == "error"
    assert "sent nothing for 0.5 s while starting the answer (timeout)" in done.error
    assert "\n" not in done.error
    server.queue(Reply(reasoning=["ok"], content=["fine"]))
    retry = finished(collect(engine))
    assert (retry.error, retry.observation) == ("", "fine")


def test_timeout_mid_answer_keeps_the_partial_output(server: FaultServer) -> None:
    engine = connected(server, timeout=30.0, idle_timeout=0.5)
    server.queue(
        Reply(reasoning=["half a thought"], content=["<predicted_observation>\nab"], hang_after=2)
    )
    done = finished(collect(engine))
    assert done.stats.stop_reason == "error"
    assert "sent nothing for 0.5 s while streaming the answer (idle timeout)" in done.error
    assert "the partial output is kept" in done.error
    assert (done.reasoning, done.observation) == ("half a thought", "ab")


@pytest.mark.parametrize("chunked", [True, False], ids=["incomplete-body", "clean-close"])
def test_stream_cut_mid_answer_keeps_the_partial_output(server: FaultServer, chunked: bool) -> None:
    engine = connected(server)
    server.queue(
        Reply(
            reasoning=["thinking about it"],
            content=["<predicted_observation>\nline 1\n", "line 2\n", "line 3"],
            cut_after=2,
            chunked=chunked,
        )
    )
    events = collect(engine)
    done = finished(events)
    assert done.stats.stop_reason == "error"
    assert (done.reasoning, done.observation) == ("thinking about it", "line 1")
    assert "partial output is kept" in done.error
    expected = "broke during the answer" if chunked else "ended before the answer was finished"
    assert expected in done.error
    assert "\n" not in done.error

    server.queue(Reply(content=["<predicted_observation>\nall 3 lines\n</predicted_observation>"]))
    retry = finished(collect(engine, GenerationParams(enable_thinking=False, max_tokens=50)))
    assert (retry.error, retry.observation, retry.stats.stop_reason) == ("", "all 3 lines", "eos")


def test_error_event_in_the_stream(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(
        Reply(reasoning=["a"], content=["b"], error_event_after=1, error_message="GPU fell over")
    )
    done = finished(collect(engine))
    assert done.stats.stop_reason == "error"
    assert "reported an error while streaming the answer: GPU fell over" in done.error
    assert done.reasoning == "a"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, "answered HTTP 500 while starting the answer: boom; try again"),
        (503, "answered HTTP 503 while starting the answer: boom; try again"),
        (400, "answered HTTP 400 while starting the answer: boom"),
        (404, "answered 404 (model 'world-model'?): boom"),
    ],
)
def test_http_errors(server: FaultServer, status: int, expected: str) -> None:
    engine = connected(server)
    server.queue(Reply(status=status, error_message="boom"))
    done = finished(collect(engine))
    assert done.stats.stop_reason == "error"
    assert done.error == f"{server.url} {expected}"
    assert finished(collect(engine)).error == ""  # the engine stays usable


def test_api_key_from_the_environment(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.api_key = "sk-right-key-123"
    with pytest.raises(EngineError, match=r"needs an API key \(401 unauthorized\).*--api-key-env"):
        RemoteEngine(server.url).load()
    assert all("authorization" not in r.headers for r in server.requests)  # none sent

    monkeypatch.delenv("WORLD_KEY", raising=False)
    with pytest.raises(EngineError, match=r"WORLD_KEY .*not set"):
        RemoteEngine(server.url, api_key_env="WORLD_KEY").load()

    monkeypatch.setenv("WORLD_KEY", "sk-wrong-key")
    with pytest.raises(EngineError, match=r"rejected the API key in \$WORLD_KEY \(401"):
        RemoteEngine(server.url, api_key_env="WORLD_KEY").load()

    monkeypatch.setenv("WORLD_KEY", "sk-right-key-123")
    engine = RemoteEngine(server.url, api_key_env="WORLD_KEY")
    engine.load()
    assert finished(collect(engine)).error == ""
    assert server.chat_requests()[-1].headers["authorization"] == "Bearer sk-right-key-123"

    # Read at request time: a rotated key is used at once, a revoked one is reported.
    monkeypatch.setenv("WORLD_KEY", "sk-revoked")
    done = finished(collect(engine))
    assert "rejected the API key in $WORLD_KEY" in done.error
    monkeypatch.setenv("WORLD_KEY", "sk-right-key-123")
    assert finished(collect(engine)).error == ""


@pytest.mark.parametrize("bad", ["\n", " x", "\x7f", "é", "\t"])
def test_a_key_a_header_cannot_carry_is_refused_unshown(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    """The HTTP client's error quotes an illegal header whole, key and all, and the error
    is shown and logged: such a key never reaches it."""
    secret = "sk-do-not-show-5521"
    monkeypatch.setenv("WORLD_KEY", secret + bad)
    engine = RemoteEngine(server.url, api_key_env="WORLD_KEY")
    with pytest.raises(EngineError, match="cannot carry") as refused:
        engine.load()
    assert secret not in str(refused.value)
    monkeypatch.setenv("WORLD_KEY", secret)
    engine.load()
    monkeypatch.setenv("WORLD_KEY", secret + bad)  # changed between turns
    done = finished(collect(engine))
    assert "cannot carry" in done.error and secret not in done.error
    assert not server.chat_requests()


def test_api_key_never_kept(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "sk-do-not-store-8472"
    server.api_key = secret
    monkeypatch.setenv("WORLD_KEY", secret)
    logger = logging.getLogger("agentworld")
    saved = (logger.level, logger.propagate)
    setup_logging("DEBUG")
    try:
        engine = RemoteEngine(server.url, api_key_env="WORLD_KEY")
        engine.load()
        domain = get_domain("terminal")
        session, _ = new_session(domain, Scenario("t", "Test"))
        turn = session.begin_turn(domain.parse_action("ls", session.scenario))
        server.queue(Reply(reasoning=["r"], content=["<predicted_observation>\nx"]))
        list(run_turn(engine, session, turn, PARAMS, GenerationControl()))
        server.queue(Reply(status=500))
        turn = session.begin_turn(domain.parse_action("pwd", session.scenario))
        list(run_turn(engine, session, turn, PARAMS, GenerationControl()))
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    assert server.chat_requests()[0].headers["authorization"] == f"Bearer {secret}"
    assert turn.status == "error"
    assert secret.encode() not in pickle.dumps(engine)
    assert secret not in json.dumps(session.to_dict())
    assert secret not in log_path().read_text()
    assert secret not in repr(vars(engine))
    client = engine._client()  # the engine's one client, kept until unload: no key in it
    assert secret not in f"{client.api_key} {client.default_headers} {client._client.headers}"


def test_requests_share_one_client_and_its_connections(server: FaultServer) -> None:
    """One client serves the engine from load to unload: its requests reuse the server's
    kept-alive connections instead of opening one each."""
    server.keep_alive = True
    server.tokenize = True
    engine = connected(server)
    for _ in range(3):
        assert engine._server_prompt_tokens(MESSAGES) > 0
    assert server.connections == 1  # the model list and three /tokenize
    turns = 3
    for _ in range(turns):
        done = finished(collect(engine, GenerationParams(enable_thinking=False)))
        assert (done.error, done.observation) == ("", "hello")
    # Each turn asks /tokenize then streams; a stream ends its connection (the client
    # stops reading at [DONE]), so at most one more for each turn.
    assert server.connections <= 1 + turns
    assert len([r for r in server.requests if r.path == "/tokenize"]) == 3 + turns


def test_threads_share_the_engine(server: FaultServer) -> None:
    server.keep_alive = True
    engine = connected(server)
    results: list[Finished] = []

    def turns() -> None:
        for _ in range(3):
            results.append(finished(collect(engine, GenerationParams(enable_thinking=False))))

    threads = [threading.Thread(target=turns) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 24
    assert {(r.error, r.observation) for r in results} == {("", "hello")}
    assert len(server.chat_requests()) == 24


def test_unload_closes_the_client(server: FaultServer) -> None:
    server.keep_alive = True
    engine = connected(server)
    assert finished(collect(engine)).error == ""
    engine.unload()
    wait_until(lambda: server.closed == server.connections, "the server to see them closed")
    engine.load()  # a new client
    assert finished(collect(engine, GenerationParams(enable_thinking=False))).error == ""
    engine.unload()
    wait_until(lambda: server.closed == server.connections, "the server to see them closed")


def test_a_failed_load_closes_the_client(server: FaultServer) -> None:
    server.keep_alive = True
    engine = RemoteEngine(server.url, model="not-served")
    with pytest.raises(EngineError, match="does not serve"):
        engine.load()
    wait_until(lambda: server.closed == server.connections == 1, "the server to see it closed")


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (a deadline, not a measurement)."""
    deadline = time.monotonic() + 30.0
    while not condition():
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("keep_alive", [False, True])
def test_cancel_while_the_server_is_silent(server: FaultServer, keep_alive: bool) -> None:
    server.keep_alive = keep_alive  # a stopped stream's connection is not used again
    engine = connected(server, timeout=25.0)
    server.queue(Reply(reasoning=["first thought"], content=["never"], hang_after=1))
    control = GenerationControl()
    events: list[EngineEvent] = []
    for event in engine.stream(MESSAGES, PARAMS, control):
        events.append(event)
        if isinstance(event, ReasoningDelta):
            control.cancel()  # the server now sends nothing for 25 s
    done = finished(events)
    assert done.stats.stop_reason == "cancelled"  # not "error" after the timeout
    assert (done.reasoning, done.error) == ("first thought", "")
    server.queue(Reply(content=["next"]))
    assert finished(collect(engine, GenerationParams(enable_thinking=False))).observation == "next"


@pytest.mark.parametrize("keep_alive", [False, True])
def test_cancel_before_the_first_byte(server: FaultServer, keep_alive: bool) -> None:
    server.keep_alive = keep_alive  # a stopped stream's connection is not used again
    engine = connected(server, timeout=25.0)
    server.queue(Reply(hang=True))
    control = GenerationControl()
    timer = threading.Timer(0.2, control.cancel)
    timer.start()
    done = finished(list(engine.stream(MESSAGES, PARAMS, control)))
    timer.join()
    assert done.stats.stop_reason == "cancelled"
    assert done.error == ""
    assert finished(collect(engine, GenerationParams(enable_thinking=False))).error == ""


def test_answer_now_is_not_available(server: FaultServer) -> None:
    engine = connected(server)
    assert engine.supports_answer_now is False
    control = GenerationControl()
    control.answer_now()
    server.queue(Reply(reasoning=["thinking"], content=["<predicted_observation>\ny"]))
    done = finished(list(engine.stream(MESSAGES, PARAMS, control)))
    assert (done.reasoning, done.observation, done.error) == ("thinking", "y", "")


def test_choosing_the_model(server: FaultServer) -> None:
    server.models = [{"id": "a", "object": "model"}, {"id": "b", "object": "model"}]
    with pytest.raises(EngineError, match=r"serves 2 models \(a, b\); choose one with --server"):
        RemoteEngine(server.url).load()
    with pytest.raises(EngineError, match=r"does not serve 'c'; it serves: a, b"):
        RemoteEngine(server.url, model="c").load()
    engine = RemoteEngine(server.url, model="b", n_ctx=2048)
    engine.load()
    assert (engine.info.name, engine.info.n_ctx, engine.context_reported) == ("b", 2048, False)
    collect(engine)
    assert server.chat_requests()[-1].body["model"] == "b"


def test_not_an_openai_server(server: FaultServer) -> None:
    root = server.url.removesuffix("/v1")
    with pytest.raises(EngineError, match=r"no OpenAI-compatible API at .*/other \(404"):
        RemoteEngine(root + "/other").load()
    with pytest.raises(EngineError, match="invalid server URL"):
        RemoteEngine("ftp://example.org").load()


def test_stream_before_load_reports_instead_of_raising() -> None:
    engine = RemoteEngine("http://127.0.0.1:9/v1")
    done = finished(list(engine.stream(MESSAGES, PARAMS, GenerationControl())))
    assert done.stats.stop_reason == "error" and "not loaded" in done.error


def test_urls() -> None:
    assert base_url("localhost:8000") == "http://localhost:8000/v1"
    assert base_url("http://gpu-box:30000/") == "http://gpu-box:30000/v1"
    assert base_url("https://api.example.org/v1/") == "https://api.example.org/v1"
    assert base_url("https://h/api/v1") == "https://h/api/v1"
    assert display_url("http://user:pw@h:8000/v1?x=1") == "http://h:8000/v1"


def test_token_estimate_recalibrates_from_usage(server: FaultServer) -> None:
    engine = connected(server)
    before = engine.count_tokens("x" * 300)
    chars = sum(len(m["content"]) for m in MESSAGES)
    server.queue(
        Reply(
            content=["a"],
            usage={"prompt_tokens": chars, "completion_tokens": 1, "total_tokens": chars + 1},
        )
    )
    collect(engine)
    assert before == 100  # three characters a token to start with
    assert engine.count_tokens("x" * 300) == 300  # the server said one character a token


# -- the splitter's separate-reasoning mode -------------------------------------------------
def test_splitter_reasoning_fed_apart() -> None:
    splitter = ObservationSplitter(starts_in_reasoning=True)
    assert splitter.feed_reasoning("plan: list") == "plan: list"
    assert not splitter.in_reasoning and not splitter.closed_reasoning
    assert splitter.feed("<predicted_observation>\nout\n</predicted_observation>") == (
        "",
        "out\n",
        False,
    )
    split = splitter.finish()[0]
    assert (split.reasoning, split.observation, split.closed_reasoning) == (
        "plan: list",
        "out",
        True,
    )


def test_splitter_reasoning_apart_with_answer_tag_but_no_content() -> None:
    splitter = ObservationSplitter()
    splitter.feed_reasoning("thinking <predicted_observation>\nscreen")
    split, _reasoning, answer, reset = splitter.finish()
    assert (split.reasoning, split.observation, split.closed_reasoning) == (
        "thinking",
        "screen",
        False,
    )
    assert (answer, reset) == ("screen", True)


def test_no_key_is_read_from_openai_api_key(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-someone-else")
    engine = connected(server)
    assert finished(collect(engine)).error == ""
    assert all("authorization" not in r.headers for r in server.requests)


def test_generated_tokens_are_estimated_from_the_text(server: FaultServer) -> None:
    engine = connected(server)
    chunks = [
        "The user lists the files in the folder. ",
        "It holds four of them.</think>\n\n<predicted_observation>\n",
        "file_a  file_b  file_c  file_d\n",
        "</predicted_observation>",
    ]
    server.queue(Reply(content=chunks))  # no usage reported
    events = collect(engine)
    done = finished(events)
    assert done.error == ""
    text = "".join(chunks)
    assert done.stats.generated_tokens == math.ceil(len(text) / 3.0) == engine.count_tokens(text)
    assert 0 < done.stats.reasoning_tokens < done.stats.generated_tokens
    first = next(e for e in events if isinstance(e, ReasoningDelta))
    assert first.generated == math.ceil(len(chunks[0]) / 3.0)  # tokens, not chunks
    counts = [e.generated for e in events if isinstance(e, (ReasoningDelta, AnswerDelta))]
    assert counts == sorted(counts) and counts[-1] <= done.stats.generated_tokens


def test_the_servers_usage_corrects_the_estimate(server: FaultServer) -> None:
    engine = connected(server)
    usage = {
        "prompt_tokens": 30,
        "completion_tokens": 9,
        "total_tokens": 39,
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    server.queue(
        Reply(
            reasoning=["a long thought " * 20], content=["<predicted_observation>\nok"], usage=usage
        )
    )
    events = collect(engine)
    done = finished(events)
    streamed_counts = [e.generated for e in events if isinstance(e, ReasoningDelta)]
    assert streamed_counts[0] == math.ceil(len("a long thought " * 20) / 3.0)  # estimated
    assert (done.stats.generated_tokens, done.stats.reasoning_tokens) == (9, 4)  # corrected


# -- a strict endpoint that refuses parameters it does not know ------------------------------
OPENAI_FIELDS = frozenset(
    {"model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens"}
)


@pytest.mark.parametrize("refusal", ["openai", "pydantic", "vague"])
def test_parameters_a_strict_server_refuses_are_dropped(
    server: FaultServer, refusal: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.accepted = OPENAI_FIELDS | {"seed"}
    server.refusal = refusal
    engine = connected(server)
    assert engine.dropped_params == ()
    domain = get_domain("terminal")
    session, _ = new_session(domain, Scenario("t", "Test"))
    first = session.begin_turn(domain.parse_action("ls", session.scenario))
    server.queue(Reply(content=["<predicted_observation>\nfirst"]))
    with caplog.at_level(logging.WARNING, logger="agentworld.remote"):
        params = GenerationParams(max_tokens=50, seed=3)
        done = finished(list(run_turn(engine, session, first, params, GenerationControl())))
    assert (done.error, done.observation) == ("", "first")
    refused, accepted = server.chat_requests()
    assert "top_k" in refused.body and "chat_template_kwargs" in refused.body
    assert set(accepted.body) <= server.accepted and accepted.body["seed"] == 3
    assert engine.dropped_params == ("chat_template_kwargs", "top_k")
    assert any("left out from now on" in r.getMessage() for r in caplog.records)
    # The person hears it beside the turn it happened on, as well as in the log.
    assert (first.status, first.note) == (
        "complete",
        "the server refused chat_template_kwargs, top_k; left out from now on "
        "(the thinking switch no longer reaches it)",
    )

    server.queue(Reply(content=["second"]))  # remembered: one request, without them
    second = session.begin_turn(domain.parse_action("pwd", session.scenario))
    params = GenerationParams(enable_thinking=False)
    list(run_turn(engine, session, second, params, GenerationControl()))
    assert (second.observation, second.note) == ("second", "")
    assert len(server.chat_requests()) == 3
    assert set(server.chat_requests()[-1].body) <= server.accepted


def test_a_refused_seed_is_dropped_when_the_server_names_it(server: FaultServer) -> None:
    server.accepted = OPENAI_FIELDS
    engine = connected(server)
    done = finished(collect(engine, GenerationParams(max_tokens=50, seed=3)))
    assert done.error == ""
    assert engine.dropped_params == ("chat_template_kwargs", "seed", "top_k")


def test_a_refusal_that_dropping_does_not_cure_is_reported(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(
        Reply(status=400, error_message="Unsupported value: messages[0].role"),
        Reply(status=400, error_message="Unsupported value: messages[0].role"),
    )
    done = finished(collect(engine))
    assert done.error.endswith(
        "answered HTTP 400 while starting the answer: Unsupported value: messages[0].role"
    )
    assert len(server.chat_requests()) == 2  # tried once without the extras
    assert engine.dropped_params == ()  # that did not help: they are sent again
    assert finished(collect(engine)).error == ""
    assert "top_k" in server.chat_requests()[-1].body


def test_a_refusal_for_another_reason_is_not_retried(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(Reply(status=400, error_message="This model's maximum context length is 8192"))
    done = finished(collect(engine))
    assert "the context of 8192 tokens" in done.error
    assert len(server.chat_requests()) == 1 and engine.dropped_params == ()


def test_a_validation_error_names_the_field(server: FaultServer) -> None:
    server.queue(
        Reply(
            status=422,
            error_body=json.dumps(
                {"detail": [{"loc": ["body", "messages", 0], "msg": "Field required"}]}
            ).encode(),
        )
    )
    done = finished(collect(connected(server)))
    assert done.error.endswith(
        "answered HTTP 422 while starting the answer: messages.0: Field required"
    )


# -- a reasoning parser that sends an empty reasoning field ----------------------------------
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize(
    ("content", "observation"),
    [
        (["file_a  file_b\n", "root@box:/app# "], "file_a  file_b\nroot@box:/app#"),
        (["<predicted_observation>\nfile_a\n", "</predicted_observation>"], "file_a"),
        (["**Environment Observation:**\n", "file_a"], "file_a"),
    ],
    ids=["bare", "tagged", "marker"],
)
def test_an_empty_reasoning_field_means_the_content_is_the_answer(
    server: FaultServer, field: str, content: list[str], observation: str
) -> None:
    """A server with a reasoning parser (the serving the release recommends) may stamp an
    empty reasoning field on every chunk when the model thought nothing: its content is
    the answer, not reasoning that never closes."""
    engine = connected(server)
    server.queue(Reply(content=content, delta_extra={field: ""}))
    events = collect(engine)
    done = finished(events)
    assert (done.reasoning, done.observation, done.error) == ("", observation, "")
    assert done.closed_reasoning
    assert streamed(events)[0] == ""  # nothing was shown as reasoning
    assert streamed(events)[1].strip() == observation


def test_an_empty_reasoning_field_after_the_reasoning(server: FaultServer) -> None:
    engine = connected(server)
    server.queue(
        Reply(
            reasoning=["it lists files"], content=["file_a"], delta_extra={"reasoning_content": ""}
        )
    )
    done = finished(collect(engine))
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        "it lists files",
        "file_a",
        True,
    )


def test_a_null_reasoning_field_leaves_inline_thinking_alone(server: FaultServer) -> None:
    engine = connected(server)
    inline = ["it lists files</think>\n\n", "<predicted_observation>\nfile_a"]
    server.queue(Reply(content=inline, delta_extra={"reasoning_content": None}))
    done = finished(collect(engine))
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        "it lists files",
        "file_a",
        True,
    )
