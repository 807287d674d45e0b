"""The xllamacpp engine (llama.cpp's server engine in-process) on real xllamacpp.

The same scripted GGUF models as tests/test_engine_llama.py, whose output is known: a
transformer (qwen2) and a miniature of the real model's architecture (qwen35moe: Gated
DeltaNet and gated attention, mixture of experts). Its stream must look like the other
engines' to every front-end: reasoning then answer, stop, answer-now, the reasoning
budget; and it must run several generations at once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ggufgen import split_script, write_qwen35moe_model
from test_engine_llama import (
    ANSWER_SCRIPT,
    DOMAIN,
    GREEDY,
    LONG_REASONING,
    MESSAGES,
    OBSERVATION,
    REASONING,
    SCENARIO,
    SCRIPT,
    Run,
    collect,
    from_another_thread,
    new_terminal_session,
    restarted_reasoning,
)

from agentworld_tui.engines.base import (
    AnswerDelta,
    ContextOverflowError,
    EngineError,
    EngineEvent,
    GenerationControl,
    GenerationParams,
    PromptProgress,
    ReasoningDelta,
)
from agentworld_tui.engines.factory import EngineSpec, make_engine
from agentworld_tui.engines.xllamacpp import XLlamaEngine
from agentworld_tui.simulator import run_turn
from agentworld_tui.simulator.queue import EngineQueue, GenerationJob
from agentworld_tui.world.session import Conversation

KINDS = ["qwen2", "qwen35moe"]


@pytest.fixture(params=KINDS)
def model(request: pytest.FixtureRequest, tmp_path: Path, scripted_model):
    """Factory: the scripted model of this kind that writes ``script``."""

    def make(script=SCRIPT, **kwargs: object) -> Path:
        if request.param == "qwen2":
            return scripted_model(script, **kwargs)
        name = f"qwen35moe-{len(list(tmp_path.glob('*.gguf')))}.gguf"
        return write_qwen35moe_model(tmp_path / name, script, **kwargs)  # type: ignore[arg-type]

    return make


# -- output -----------------------------------------------------------------------------


def test_greedy_output_is_the_script(model, xllama_engine) -> None:
    engine = xllama_engine(model())
    assert engine.info.engine == "xllamacpp" and engine.info.parallel == 2
    assert not engine.info.remote
    run = collect(engine.stream(MESSAGES, GREEDY, GenerationControl()))
    done = run.finished
    assert (done.reasoning, done.observation, done.closed_reasoning) == (
        REASONING,
        OBSERVATION,
        True,
    )
    assert run.reasoning.strip() == REASONING
    assert run.answer.rstrip() == OBSERVATION
    stats = done.stats
    assert stats.stop_reason == "eos"
    assert stats.generated_tokens == len(split_script(SCRIPT))
    assert stats.prompt_tokens == stats.evaluated_prompt_tokens > 0
    assert stats.prompt_tokens == engine.count_tokens(engine.render(MESSAGES, GREEDY))
    assert 0 < stats.reasoning_tokens < stats.generated_tokens
    assert stats.n_ctx == 2048
    progress = [e for e in run.events if isinstance(e, PromptProgress)]
    assert progress and progress[-1].evaluated == progress[-1].total == stats.prompt_tokens
    kinds = [type(e) for e in run.events if isinstance(e, ReasoningDelta | AnswerDelta)]
    assert kinds.index(AnswerDelta) > kinds.index(ReasoningDelta)
    assert ReasoningDelta not in kinds[kinds.index(AnswerDelta) :]


@pytest.mark.parametrize("seed", [1, 2])
def test_sampled_output_at_the_recommended_temperature_is_the_script(
    model, xllama_engine, seed: int
) -> None:
    engine = xllama_engine(model())
    params = GenerationParams(temperature=0.6, top_p=0.95, top_k=20, seed=seed)
    done = collect(engine.stream(MESSAGES, params, GenerationControl())).finished
    assert (done.reasoning, done.observation) == (REASONING, OBSERVATION)


def test_the_same_prompt_again_reads_only_its_last_tokens(model, xllama_engine) -> None:
    engine = xllama_engine(model())
    first = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    again = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    assert again.observation == first.observation == OBSERVATION
    # The server reads at least one token again; a hybrid model goes back to the
    # checkpoint it keeps a few tokens before the end of each prompt.
    assert 1 <= again.stats.evaluated_prompt_tokens <= 4


# -- stopping and steering ----------------------------------------------------------------


def test_cancel_from_another_thread_keeps_the_partial_text(model, xllama_engine) -> None:
    engine = xllama_engine(model(LONG_REASONING))
    control = GenerationControl()

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, ReasoningDelta) and len(run.reasoning) >= 30 and not control.cancelled:
            from_another_thread(control.cancel)

    run = collect(engine.stream(MESSAGES, GREEDY, control), on_event)
    done = run.finished
    assert done.stats.stop_reason == "cancelled"
    assert done.reasoning and "".join(LONG_REASONING).startswith(done.reasoning)
    assert 3 <= done.stats.generated_tokens < len(LONG_REASONING)
    assert done.observation == ""
    # The slot is free again: the next request runs to its end.
    again = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    assert again.stats.stop_reason == "eos"


def test_cancel_while_the_prompt_is_evaluated(model, xllama_engine) -> None:
    engine = xllama_engine(model())
    control = GenerationControl()
    long_prompt = [MESSAGES[0], {"role": "user", "content": "x " * 600}]

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, PromptProgress) and not control.cancelled:
            from_another_thread(control.cancel)

    run = collect(engine.stream(long_prompt, GREEDY, control), on_event)
    assert run.finished.stats.stop_reason == "cancelled"
    assert run.finished.stats.generated_tokens == 0
    assert not [e for e in run.events if isinstance(e, ReasoningDelta | AnswerDelta)]


def test_cancel_before_a_slot_is_free_returns_at_once(model, xllama_engine) -> None:
    """A request waiting for a slot has no chunk yet: the stream ends without one."""
    engine = xllama_engine(model(LONG_REASONING), slots=1)
    busy = GenerationControl()
    started = threading.Event()

    def occupy() -> None:
        for event in engine.stream(MESSAGES, GREEDY, busy):
            if isinstance(event, ReasoningDelta):
                started.set()
                time.sleep(0.05)

    holder = threading.Thread(target=occupy, daemon=True)
    holder.start()
    assert started.wait(30)
    control = GenerationControl()
    control.cancel()
    done = collect(engine.stream(MESSAGES, GREEDY, control)).finished
    assert done.stats.stop_reason == "cancelled"
    busy.cancel()
    holder.join(30)
    assert not holder.is_alive()


def test_answer_now_closes_the_reasoning_and_answers(model, xllama_engine) -> None:
    engine = xllama_engine(model(ANSWER_SCRIPT))
    control = GenerationControl()
    asked: list[int] = []

    def on_event(event: EngineEvent, run: Run) -> None:
        if isinstance(event, ReasoningDelta) and event.generated >= 3 and not asked:
            asked.append(event.generated)
            from_another_thread(control.answer_now)

    run = collect(engine.stream(MESSAGES, GREEDY, control), on_event)
    done = run.finished
    assert done.stats.stop_reason == "eos"
    assert done.closed_reasoning
    cut = done.stats.reasoning_tokens
    # Cut well before the 300 steps of the script; how soon depends on the machine's load.
    assert 3 <= cut < len(LONG_REASONING) // 2
    # The scripted model starts its script over after "</think>\n\n", and closes that
    # reasoning again: the reasoning ends at the last close before the answer.
    assert done.reasoning == "".join(LONG_REASONING[:cut]) + "\n\n" + restarted_reasoning()
    assert done.observation == "$ ls\nsrc"
    assert run.answer == "$ ls\nsrc"
    # The continuation is read from the slot's cache: the prompt was read once.
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens


def test_reasoning_budget_caps_the_reasoning(model, xllama_engine) -> None:
    engine = xllama_engine(model(ANSWER_SCRIPT))
    params = GenerationParams(temperature=0.0, reasoning_budget=5)
    done = collect(engine.stream(MESSAGES, params, GenerationControl())).finished
    assert done.stats.reasoning_tokens == 5
    assert done.reasoning == "".join(LONG_REASONING[:5]) + "\n\n" + restarted_reasoning()
    assert done.observation == "$ ls\nsrc"


def test_max_tokens_while_reasoning_gives_no_answer(model, xllama_engine) -> None:
    engine = xllama_engine(model())
    session = new_terminal_session()
    turn = session.begin_turn(DOMAIN.parse_action("ls", SCENARIO))
    params = GenerationParams(temperature=0.0, max_tokens=5)
    run = collect(run_turn(engine, session, turn, params, GenerationControl()))
    assert run.finished.stats.stop_reason == "max_tokens"
    assert run.finished.stats.generated_tokens == 5
    assert turn.status == "no_answer"


def test_a_prompt_longer_than_the_context_is_a_context_error(model, xllama_engine) -> None:
    engine = xllama_engine(model(), n_ctx=256)
    too_long = [MESSAGES[0], {"role": "user", "content": "x " * 400}]
    with pytest.raises(ContextOverflowError):
        collect(engine.stream(too_long, GREEDY, GenerationControl()))
    session = new_terminal_session()  # through a turn: a failed turn, said in its note
    turn = session.begin_turn(DOMAIN.parse_action("x " * 400, SCENARIO))
    collect(run_turn(engine, session, turn, GREEDY, GenerationControl()))
    assert turn.status in ("error", "complete")


# -- the process around it ----------------------------------------------------------------


def native_handler(number: int) -> bytes:
    """The process's disposition of a signal as the kernel holds it (the handler's address
    first), read with sigaction."""
    import ctypes

    buffer = ctypes.create_string_buffer(512)
    assert ctypes.CDLL(None).sigaction(number, None, buffer) == 0
    return buffer.raw[:8]


def test_loading_keeps_the_process_signal_handlers(model) -> None:
    """Ctrl+C must stay Python's KeyboardInterrupt (and the app's). xllamacpp's source
    has its server install SIGINT and SIGTERM handlers that stop it as it starts; the
    tested release does not, and this fails if one does. Python's own SIGINT handler is
    put in place first: a test run earlier in the process may have left another."""
    python_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    before = {n: native_handler(n) for n in (signal.SIGINT, signal.SIGTERM)}
    engine = XLlamaEngine(model(), n_ctx=512, threads=1, slots=1)
    engine.load()
    try:
        assert {n: native_handler(n) for n in before} == before
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
            time.sleep(1)
        done = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
        assert done.observation == OBSERVATION  # the server was not stopped by it
    finally:
        engine.unload()
        signal.signal(signal.SIGINT, python_handler)


UNLOAD_AT_ONCE = """
import sys
from agentworld_tui.engines.xllamacpp import XLlamaEngine
for _ in range(8):
    engine = XLlamaEngine(sys.argv[1], n_ctx=512, threads=1, slots=2)
    engine.load()
    engine.unload()
"""


def test_a_model_unloaded_at_once_after_loading_never_hangs(scripted_model) -> None:
    """xllamacpp's server deleted before its task loop has started waits for it forever
    (the loop's stop is lost; 1 of about 10 runs of eight loads on a loaded 2-core machine
    before the fix): a load returns once the loop answers. In a child process, so a hang
    fails; its limit is a deadline for a hang, not a measurement."""
    path = scripted_model(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-c", UNLOAD_AT_ONCE, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_its_http_side_refuses_requests_without_its_key(model, xllama_engine) -> None:
    import http.client
    from urllib.parse import urlsplit

    engine = xllama_engine(model())
    where = urlsplit(engine._address)
    assert where.hostname == "127.0.0.1"
    connection = http.client.HTTPConnection("127.0.0.1", where.port, timeout=10)
    connection.request("POST", "/tokenize", body='{"content": "hi"}')
    assert connection.getresponse().status == 401
    connection.close()
    assert engine.count_tokens("hi") == 2


def test_the_slot_folder_is_private_and_removed(model, xllama_engine) -> None:
    """Slots are saved and restored (a fork's copy, a state file) in a folder of this
    process's own, which only its owner reads, and which goes with the model."""
    import http.client
    import json
    import stat
    from urllib.parse import urlsplit

    engine = xllama_engine(model())
    folder = engine._slot_dir
    assert folder is not None and folder.is_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert engine._slot_action(0, "save", "a.bin") == 0  # an empty slot: nothing saved
    where = urlsplit(engine._address)
    connection = http.client.HTTPConnection("127.0.0.1", where.port, timeout=10)
    connection.request("POST", "/slots/0?action=save", body=json.dumps({"filename": "a.bin"}))
    assert connection.getresponse().status == 401  # not without the process's key
    connection.close()
    assert engine._slot_action(0, "save", "../escape.bin") == 0
    assert not (folder.parent / "escape.bin").exists()
    engine.unload()
    assert not folder.exists()


def test_missing_and_bad_model_files_are_engine_errors(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not found"):
        XLlamaEngine(tmp_path / "none.gguf").load()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load"):
        XLlamaEngine(bad, n_ctx=256, threads=1, slots=1).load()


def test_the_factory_makes_it_by_name(model) -> None:
    engine = make_engine(EngineSpec(model_path=str(model()), engine="xllamacpp", slots=3))
    assert isinstance(engine, XLlamaEngine) and engine.slots == 3
    with pytest.raises(EngineError, match="no engine"):
        make_engine(EngineSpec(model_path=str(model()), engine="vllm"))


# -- many at once ---------------------------------------------------------------------------


def test_the_queue_runs_as_many_generations_as_the_engine_has_slots(model, xllama_engine) -> None:
    """The engine queue hands an in-process engine's generations out like a server's:
    up to its slots at once, each streaming as the others do."""
    engine = xllama_engine(model(LONG_REASONING), slots=3)
    engine_queue = EngineQueue(engine, concurrency=1)  # [server] concurrency is a server's
    assert engine_queue.limit(engine) == 3
    session = new_terminal_session()
    turn = session.begin_turn(DOMAIN.parse_action("ls", SCENARIO))
    conversation: Conversation = session.conversation(turn)
    most = 0
    lock = threading.Lock()
    finished = threading.Semaphore(0)
    jobs = []

    def sink(event: EngineEvent) -> None:
        nonlocal most
        with lock:
            most = max(most, engine_queue.in_flight())
        if type(event).__name__ == "Finished":
            finished.release()

    params = GenerationParams(temperature=0.0, max_tokens=40)
    for n in range(5):
        job = GenerationJob(f"env-{n}", conversation, params, sink)
        jobs.append(job)
        engine_queue.submit(job)
    for _ in jobs:
        assert finished.acquire(timeout=120)
    engine_queue.close()
    engine_queue.join(30)
    assert most == 3


# -- settings and flags -----------------------------------------------------------------


def test_the_engine_and_its_slots_come_from_the_settings_and_flags(model, isolated_dirs) -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.launch import settings_from_args
    from agentworld_tui.config import load_settings

    path = model()
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[model]\nengine = "vllm"\nslots = 1000\n')
    loaded = load_settings()
    assert loaded.settings.model.engine == "llama-cpp-python"
    assert any("engine" in p and "xllamacpp" in p for p in loaded.problems)
    assert any("slots" in p for p in loaded.problems)

    args = build_parser().parse_args(["predict", "--model", str(path), "--slots", "3", "ls"])
    spec = settings_from_args(args).engine_spec()
    assert (spec.engine, spec.slots) == ("xllamacpp", 3)
    args = build_parser().parse_args(
        ["predict", "--model", str(path), "--engine", "xllamacpp", "ls"]
    )
    spec = settings_from_args(args).engine_spec()
    assert spec.engine == "xllamacpp" and 1 <= spec.slots <= 8  # sized to this machine
    args = build_parser().parse_args(["predict", "--model", str(path), "ls"])
    assert settings_from_args(args).engine_spec().engine == ""  # llama-cpp-python


def test_slots_fit_the_memory_left_after_the_weights() -> None:
    from agentworld_tui.models.fit import ModelShape, parallel_slots

    gib = 1 << 30
    shape = ModelShape(
        architecture="qwen35moe",
        n_layers=40,
        attention_layers=10,
        kv_bytes_per_token=20 * 1024,
        recurrent_bytes=63 << 20,
        trained_context=262144,
        weights_bytes=21 * gib,
    )
    per_slot = 20 * 1024 * 32768 + 9 * (63 << 20)
    free = 21 * gib + gib // 2 + 3 * per_slot + 1
    assert parallel_slots(shape, 32768, free, limit=16) == 3
    assert parallel_slots(shape, 32768, 10 * gib) == 1  # never fewer than one
    assert parallel_slots(shape, 1024, 1000 * gib, limit=8) == 8
