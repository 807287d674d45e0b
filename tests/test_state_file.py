"""A conversation's model state kept on disk between processes (issue 43, item 2).

``agentworld predict --session`` runs one turn per process. Each engine here stands for
one such process: it is loaded, told to keep its state in the file beside the session,
plays one turn and is unloaded; the next engine goes on from the file. What each turn
cost is read from the engine's own counters. The file is a cache: a damaged, truncated,
foreign or outdated one is dropped, the prompt is read whole, and the answer is right.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ggufgen import write_qwen35moe_model, write_scripted_model
from test_conversation_states import write_model
from test_engine_llama import GREEDY, OBSERVATION, SCRIPT, collect
from test_hybrid_cache import conversation, last_logits
from test_hybrid_checkpoints import Player, with_random_attention

from agentworld_tui.engines.base import GenerationControl, GenerationParams
from agentworld_tui.engines.state_file import (
    MAGIC,
    StateFile,
    model_identity,
    state_path,
)

TARGET = 1.1
TURNS = 5
ONE_TOKEN = GenerationParams(temperature=0.0, max_tokens=1)
KINDS = ["qwen2", "qwen35moe"]
ENGINES = ["llama-cpp-python", "xllamacpp"]


@pytest.fixture(params=KINDS)
def model_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"{request.param}.gguf"
    if request.param == "qwen2":
        return write_scripted_model(path, SCRIPT)
    return write_qwen35moe_model(path, SCRIPT)


@pytest.fixture(params=ENGINES)
def process(request: pytest.FixtureRequest, llama_engine, xllama_engine):
    """``process(model, state)``: a loaded engine of one kind keeping its state in
    ``state``, as one ``predict`` call makes it."""
    load = llama_engine if request.param == "llama-cpp-python" else xllama_engine

    def start(path: Path, state: Path | None, **kwargs):
        engine = load(path, n_ctx=8192, **kwargs)
        engine.keep_state(state)
        return engine

    start.engine_name = request.param  # type: ignore[attr-defined]
    return start


def play_in_processes(start, path: Path, state: Path | None, turns: int) -> Player:
    """Each turn on a fresh engine (a new process); the player keeps the prompts and the
    turns' ends."""
    player = None
    for n in range(turns):
        engine = start(path, state)
        if player is None:
            player = Player(engine)
        player.engine = engine
        assert player.action(f"cat notes-{n}.txt").observation == OBSERVATION
        engine.unload()
    assert player is not None
    return player


def test_each_call_reads_only_what_is_new(model_path, process, tmp_path) -> None:
    state = state_path(tmp_path / "run.json")
    player = play_in_processes(process, model_path, state, TURNS)
    done = player.finished
    assert done[0].stats.evaluated_prompt_tokens == done[0].stats.prompt_tokens
    ratios = []
    for n in range(1, TURNS):
        now, before = np.asarray(player.prompts[n]), np.asarray(player.prompts[n - 1])
        new = len(now) - _common(now, before)
        ratios.append(done[n].stats.evaluated_prompt_tokens / new)
    print(f"\n{process.engine_name}, {model_path.stem}: evaluated/new per call", ratios)
    assert max(ratios) <= TARGET, ratios
    assert state.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_without_the_file_each_call_reads_everything(model_path, process, tmp_path) -> None:
    """The comparison the first test makes has teeth: no file, the history read whole."""
    player = play_in_processes(process, model_path, None, 3)
    for done in player.finished:
        assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens


@pytest.mark.parametrize("kind", KINDS)
def test_a_restored_file_gives_the_same_logits_as_reading_everything(
    tmp_path: Path, llama_engine, kind: str
) -> None:
    path = with_random_attention(write_model(tmp_path / f"{kind}.gguf", kind, mixing=0.002), 0.01)
    state = tmp_path / "s.state"
    first = llama_engine(path)
    first.keep_state(state)
    collect(first.stream(conversation(3), ONE_TOKEN, GenerationControl()))
    first.unload()

    restored = llama_engine(path)
    restored.keep_state(state)
    done = collect(restored.stream(conversation(4), ONE_TOKEN, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens < done.stats.prompt_tokens // 3
    fresh = llama_engine(path)
    done = collect(fresh.stream(conversation(4), ONE_TOKEN, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
    np.testing.assert_allclose(last_logits(restored), last_logits(fresh), rtol=0, atol=1e-4)


# -- a file that cannot serve is dropped ----------------------------------------------------
def _second_call(start, path: Path, state: Path, messages_turns: int = 3):
    engine = start(path, state)
    done = collect(engine.stream(conversation(messages_turns), GREEDY, GenerationControl()))
    engine.unload()
    return done.finished


def _written(start, path: Path, state: Path) -> None:
    _second_call(start, path, state, 2)
    assert state.is_file()


def _damage(state: Path, at: int) -> None:
    data = bytearray(state.read_bytes())
    data[at] ^= 0xFF
    state.write_bytes(bytes(data))


def _header(state: Path) -> tuple[dict, int]:
    data = state.read_bytes()
    length = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    start = len(MAGIC) + 4
    return json.loads(data[start : start + length]), start + length


@pytest.mark.parametrize(
    "spoil",
    [
        "state bytes",
        "tokens",
        "truncated",
        "another build",
        "another model",
        "not a state file",
        "history",
    ],
)
def test_a_file_that_cannot_serve_is_dropped_and_the_prompt_read_whole(
    tmp_path: Path, process, spoil: str
) -> None:
    path = write_qwen35moe_model(tmp_path / "qwen35moe.gguf", SCRIPT)
    state = tmp_path / "s.state"
    _written(process, path, state)
    header, body = _header(state)
    if spoil == "state bytes":
        _damage(state, state.stat().st_size - 3)
    elif spoil == "tokens":
        _damage(state, body + 1)
    elif spoil == "truncated":
        state.write_bytes(state.read_bytes()[:-100])
    elif spoil == "another build":
        header["key"]["build"] += " (another)"
        packed = json.dumps(header).encode()
        rest = state.read_bytes()[body:]
        state.write_bytes(MAGIC + len(packed).to_bytes(4, "little") + packed + rest)
    elif spoil == "another model":
        other = write_qwen35moe_model(tmp_path / "other.gguf", SCRIPT, mixing=0.002)
        assert model_identity(other) != model_identity(path)
        path = other
    elif spoil == "not a state file":
        state.write_bytes(b"GGUF" + state.read_bytes()[4:])
    done = _second_call(process, path, state, 1 if spoil == "history" else 3)
    assert done.observation == OBSERVATION
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
    # The next turn's state replaced it, whole and valid.
    assert _header(state)[0]["key"]["model"] == model_identity(path)
    again = _second_call(process, path, state, 4 if spoil != "history" else 2)
    assert again.stats.evaluated_prompt_tokens < again.stats.prompt_tokens // 2


def test_a_state_over_the_bound_is_not_written(tmp_path: Path, process) -> None:
    path = write_qwen35moe_model(tmp_path / "qwen35moe.gguf", SCRIPT)
    state = tmp_path / "s.state"
    _written(process, path, state)
    engine = process(path, None)
    engine.keep_state(state, max_bytes=1024)
    collect(engine.stream(conversation(3), GREEDY, GenerationControl()))
    engine.unload()
    assert not state.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_link_or_folder_in_its_place_is_neither_read_nor_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(MAGIC + b"anything")
    link = tmp_path / "s.state"
    link.symlink_to(target)
    key = {"build": "b", "model": {}}
    assert StateFile(link, key).load([1, 2, 3]) is None
    assert target.read_bytes() == MAGIC + b"anything" and link.is_symlink()
    folder = tmp_path / "folder.state"
    folder.mkdir()
    assert StateFile(folder, key).load([1, 2, 3]) is None and folder.is_dir()


def test_the_state_of_a_session_lies_beside_it(tmp_path: Path) -> None:
    assert state_path(tmp_path / "runs" / "a.json") == tmp_path / "runs" / "a.json.state"


def _common(a: np.ndarray, b: np.ndarray) -> int:
    from agentworld_tui.engines.prefix import common_prefix

    return common_prefix(a, b)


# -- through the command line ---------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_predict_session_calls_read_only_what_is_new(
    model_path: Path, engine: str, tmp_path: Path, isolated_dirs: dict
) -> None:
    from test_cli_predict import predict
    from test_engine_llama import rendered, tokenizer

    from agentworld_tui.world.workspace import open_or_new

    session = tmp_path / "run.json"
    stats = []
    for n in range(4):
        result = predict(
            *("--model", str(model_path), "--engine", engine, "--threads", "1"),
            *("--ctx", "8192", "--temperature", "0", "--json"),
            *("--session", str(session), f"cat notes-{n}.txt"),
        )
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["observation"] == OBSERVATION
        stats.append(data["stats"])
    assert state_path(session).is_file()
    workspace = open_or_new(session, hold=False)
    played = workspace.tab_for("terminal")
    assert played is not None and len(played.turns) == 4
    tokenize = tokenizer(model_path)
    prompts = [np.asarray(tokenize(rendered(played.prompt(t).messages))) for t in played.turns]
    assert [len(p) for p in prompts] == [s["prompt_tokens"] for s in stats]
    ratios = [
        stats[n]["evaluated_prompt_tokens"]
        / (len(prompts[n]) - _common(prompts[n], prompts[n - 1]))
        for n in range(1, 4)
    ]
    print(f"\npredict --session, {engine}, {model_path.stem}: evaluated/new per call", ratios)
    assert stats[0]["evaluated_prompt_tokens"] == stats[0]["prompt_tokens"]
    assert max(ratios) <= TARGET, ratios
