"""The cache of recurrent models: save and restore the state instead of re-reading history.

The real Qwen-AgentWorld model is hybrid (Gated DeltaNet layers keep a recurrent state).
llama.cpp cannot cut such a state back to an earlier position, so a prompt that shares only
part of what the context holds would be evaluated from the start. The engine saves the
state at the end of each prompt's history and where its last action begins, and restores
the longest that fits on the next turn (tests/test_hybrid_checkpoints.py has the second).
These tests run that path on small generated models: llama.cpp's ``mamba`` architecture
(purely recurrent: nothing of its cache can be truncated) and ``jamba`` (Mamba layers and
attention layers, a hybrid like the real model; only the recurrent part of its state is
saved, its KV cache stays in the context and is cut back).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from ggufgen import write_qwen35moe_model, write_recurrent_model
from test_engine_llama import (
    GREEDY,
    MESSAGES,
    OBSERVATION,
    SCRIPT,
    collect,
    new_since_previous,
    play_session,
)

from agentworld_tui.engines.base import GenerationControl, GenerationParams
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.llama.states import StateStore

TURNS = 10


@pytest.fixture(params=["mamba", "jamba", "qwen35moe"])
def recurrent_model(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Path]:
    """Factory for a scripted recurrent (mamba) or hybrid (jamba, or qwen35moe: the real
    model's architecture in miniature) model."""
    hybrid = request.param == "jamba"

    def make(mixing: float = 0.0, name: str = "") -> Path:
        path = tmp_path / (name or f"{request.param}-{mixing}.gguf")
        if request.param == "qwen35moe":
            return write_qwen35moe_model(path, SCRIPT, mixing=mixing)
        n_layer = 4 if hybrid else 2
        return write_recurrent_model(path, SCRIPT, mixing=mixing, hybrid=hybrid, n_layer=n_layer)

    return make


def test_the_generated_model_is_recurrent_and_writes_its_script(
    recurrent_model, llama_engine
) -> None:
    engine = llama_engine(recurrent_model())
    assert engine.recurrent
    done = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    assert done.observation == OBSERVATION


def test_llama_cpp_cannot_cut_a_recurrent_state_back(recurrent_model, scripted_model) -> None:
    """Why the engine needs checkpoints: partial removal works only for a KV cache."""
    results = {}
    for kind, path in (("recurrent", recurrent_model()), ("transformer", scripted_model(SCRIPT))):
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, verbose=False)
        llm.eval(llm.tokenize(b"a prompt of a few tokens", add_bos=False))
        memory = llama_cpp.llama_get_memory(llm.ctx)
        results[kind] = bool(llama_cpp.llama_memory_seq_rm(memory, 0, 5, -1))
        llm.close()
    assert results == {"recurrent": False, "transformer": True}


def test_without_checkpoints_every_turn_reads_the_whole_history(
    recurrent_model, llama_engine
) -> None:
    engine = llama_engine(recurrent_model(), state_budget_bytes=0)
    _, prompts, evaluated = play_session(engine, 4)
    assert evaluated == [len(p) for p in prompts]
    assert len(engine.states) == 0


def test_with_checkpoints_each_turn_reads_only_what_is_new(recurrent_model, llama_engine) -> None:
    engine = llama_engine(recurrent_model(), n_ctx=8192)
    _, prompts, evaluated = play_session(engine, TURNS)
    assert evaluated[0] == len(prompts[0])
    ratios = []
    for n in range(1, TURNS):
        new = new_since_previous(prompts, n)
        assert evaluated[n] >= new, f"turn {n + 1}: fewer tokens evaluated than are new"
        ratios.append(evaluated[n] / new)
        # Without the checkpoint the whole prompt would be read again.
        assert len(prompts[n]) / new > 1.5 or n == 1
    print(f"\nhybrid evaluated/new per turn 2..{TURNS}:", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= 1.1, ratios


def test_checkpoints_stay_within_their_memory_budget(recurrent_model, llama_engine) -> None:
    # Two checkpoints a turn: where the last action begins and at the end of the history.
    # Only the recurrent part is saved, so every state has the same size.
    probe = llama_engine(recurrent_model(), n_ctx=8192)
    play_session(probe, 6)
    sizes = {len(c.data) for c in probe.states._items}
    assert len(probe.states) == 12 and len(sizes) == 1 and min(sizes) > 0

    budget = int(max(sizes) * 2.5)
    engine = llama_engine(recurrent_model(), n_ctx=8192, state_budget_bytes=budget)
    _, prompts, evaluated = play_session(engine, 6)
    # The two of the last turn are kept: the least recently used go first.
    assert len(engine.states) == 2
    assert engine.states.size <= budget
    assert {len(c.tokens) for c in engine.states._items} < set(range(len(prompts[-1])))
    for n in range(1, 6):  # only the newest end-of-history checkpoint is needed
        assert evaluated[n] / new_since_previous(prompts, n) <= 1.1


def test_retry_reads_only_the_generation_prompt_again(recurrent_model, llama_engine) -> None:
    engine = llama_engine(recurrent_model())
    first = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    again = collect(engine.stream(MESSAGES, GREEDY, GenerationControl())).finished
    full, history = engine.render(MESSAGES, GREEDY)
    assert full.startswith(history)
    generation_prompt = engine.count_tokens(full) - engine.count_tokens(history)
    assert again.stats.evaluated_prompt_tokens == generation_prompt
    assert again.observation == first.observation == OBSERVATION


def last_logits(engine: LlamaEngine) -> np.ndarray:
    llm = engine._llm
    pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()


def conversation(turns: int, first_action: str = "ls") -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are a Linux terminal."}]
    for i in range(turns):
        action = first_action if i == 0 else f"cat notes-{i}.txt"
        messages += [
            {"role": "user", "content": action},
            {"role": "assistant", "content": f"output {i}"},
        ]
    messages.append({"role": "user", "content": f"cat notes-{turns}.txt"})
    return messages


def test_a_restored_state_gives_the_same_logits_as_reading_everything(
    recurrent_model, llama_engine
) -> None:
    # Small random Mamba weights: the state now shapes the logits (the script still wins).
    path = recurrent_model(mixing=0.002)
    one_token = GenerationParams(temperature=0.0, max_tokens=1)

    restored = llama_engine(path)
    for n in range(6):
        collect(restored.stream(conversation(n), GREEDY, GenerationControl()))
    done = collect(restored.stream(conversation(6), one_token, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens < done.stats.prompt_tokens // 3
    via_checkpoint = last_logits(restored)

    fresh = llama_engine(path)
    done = collect(fresh.stream(conversation(6), one_token, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
    np.testing.assert_allclose(via_checkpoint, last_logits(fresh), rtol=0, atol=1e-4)

    # The comparison has teeth: another first action, hundreds of tokens back, shows.
    collect(fresh.stream(conversation(6, "pwd"), one_token, GenerationControl()))
    assert np.abs(last_logits(fresh) - via_checkpoint).max() > 1e-3


def test_state_store_keeps_the_newest_within_budget() -> None:
    store = StateStore(budget_bytes=250)
    a, b, c = np.arange(5), np.arange(8), np.arange(10)
    store.add(a, b"x" * 100)
    store.add(b, b"y" * 100)
    assert store.best(np.arange(20), limit=20) is not None
    store.best(a, limit=5)  # a is used again: b is now the least recently used
    store.add(c, b"z" * 100)
    assert len(store) == 2 and store.size == 200
    kept = {len(cp.tokens) for cp in store._items}
    assert kept == {5, 10}
    store.add(np.arange(3), b"w" * 300)  # larger than the whole budget: not kept
    assert len(store) == 2


def test_state_store_best_is_the_longest_matching_prefix_within_the_limit() -> None:
    store = StateStore(budget_bytes=10_000)
    store.add(np.array([1, 2]), b"short")
    store.add(np.array([1, 2, 3, 4]), b"long")
    store.add(np.array([1, 9, 9, 9, 9]), b"other")
    query = np.array([1, 2, 3, 4, 5, 6])
    assert store.best(query, limit=6).data == b"long"
    assert store.best(query, limit=3).data == b"short"
    assert store.best(np.array([7, 7, 7]), limit=3) is None
    store.add(np.array([1, 2]), b"short again")  # same tokens replace the old entry
    assert len(store) == 3 and store.best(query, limit=2).data == b"short again"


def test_state_store_cuts_a_whole_transformer_state_back() -> None:
    """A transformer's whole state serves any prefix it shares with a prompt (it is cut
    back once restored); other states serve only prompts that they are a prefix of."""
    store = StateStore(budget_bytes=10_000)
    store.add(np.array([1, 2, 3, 4, 5]), b"whole", standalone=True, cuttable=True)
    store.add(np.array([1, 2]), b"recurrent", standalone=True)
    query = np.array([1, 2, 3, 9, 9])
    found = store.best(query, limit=4)
    assert found is not None and found.data == b"whole" and found.reach(query, 4) == 3
    assert store.best(query, limit=2).data in (b"whole", b"recurrent")
    assert store.best(np.array([1, 2, 3, 4, 5, 6]), limit=5).reach(np.arange(1, 7), 5) == 5
    store.add(np.array([1, 2, 3]), b"partial")
    assert store.best(query, limit=4, standalone_only=True).data == b"whole"
    assert store.best(np.array([7, 8]), limit=2) is None
