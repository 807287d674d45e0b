"""Several conversations on one engine: each keeps its model state (issue 27 item 12, 30).

The app runs one engine for every tab, and a session's branches and forks share a
history. One context holds one conversation; when a prompt leaves it, the engine keeps
that conversation's state whole (attention cache included) in its byte-bounded store, and
restores it when the conversation, or a fork of it, comes back. These tests alternate
conversations on generated models of the three kinds: a transformer (qwen2), a purely
recurrent model (mamba), a hybrid (jamba: Mamba and attention layers) and a miniature of
the real model (qwen35moe: Gated DeltaNet and gated attention, like the real
model), through the app's own ``Session`` and ``run_turn``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ggufgen import write_qwen35moe_model, write_recurrent_model, write_scripted_model
from test_engine_llama import DOMAIN, GREEDY, OBSERVATION, SCENARIO, SCRIPT, collect
from test_hybrid_cache import conversation, last_logits
from test_hybrid_checkpoints import Player, state_size, with_random_attention

from agentworld_tui.engines.base import GenerationControl, GenerationParams
from agentworld_tui.engines.prefix import common_prefix

TARGET = 1.1
ONE_TOKEN = GenerationParams(temperature=0.0, max_tokens=1)
KINDS = ["qwen2", "mamba", "jamba", "qwen35moe"]


def write_model(path: Path, kind: str, *, mixing: float = 0.0) -> Path:
    if kind == "qwen2":
        return write_scripted_model(path, SCRIPT)
    if kind == "qwen35moe":
        return write_qwen35moe_model(path, SCRIPT, mixing=mixing)
    hybrid = kind == "jamba"
    n_layer = 4 if hybrid else 2
    return write_recurrent_model(path, SCRIPT, hybrid=hybrid, n_layer=n_layer, mixing=mixing)


@pytest.fixture(params=KINDS)
def model_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_model(tmp_path / f"{request.param}.gguf", request.param)


def ratio(player: Player) -> float:
    """Evaluated ÷ new prompt tokens of the player's last turn (new: since its last prompt)."""
    return player.finished[-1].stats.evaluated_prompt_tokens / player.new_tokens()


def test_a_turn_after_a_switch_reads_only_what_is_new(model_path, llama_engine) -> None:
    engine = llama_engine(model_path, n_ctx=8192)
    first, second = Player(engine), Player(engine)
    ratios = []
    for n in range(4):
        done = first.action(f"cat notes-{n}.txt")
        assert done.observation == OBSERVATION
        if n:
            ratios.append(ratio(first))
        done = second.action(f"ls -la folder-{n}")
        assert done.observation == OBSERVATION
        if n:
            ratios.append(ratio(second))
    print(f"\n{model_path.stem}: evaluated/new after each switch", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= TARGET, ratios
    assert engine.states.size <= engine.states.budget
    # One whole state per conversation: a newer one replaces the older ones it covers.
    whole = [c for c in engine.states._items if c.standalone and c.flags == 0]
    assert len(whole) == (0 if model_path.stem == "mamba" else 2)


def test_a_fork_reads_only_its_own_tokens(model_path, llama_engine) -> None:
    """Two branches of one history stepping in turn: each branch's first turn reads only
    what follows the fork point, and every later turn only what is new since its own last
    prompt, although the other branch ran in between."""
    engine = llama_engine(model_path, n_ctx=8192)
    player = Player(engine)
    for n in range(3):
        player.action(f"cat notes-{n}.txt")
    session = player.session
    base = session.branch_id
    player.action("ls -la")  # the first branch's first turn after the fork point
    fork_at = len(session.turns)
    turn = session.fork(fork_at, DOMAIN.parse_action("pwd", SCENARIO))
    done = player.play(turn)
    fork_branch = session.branch_id
    assert fork_branch != base and len(session.branches) == 2
    # New since the fork point: the prompt less the history the branches share.
    prompt = np.asarray(player.prompts[-1])
    history = np.asarray(player.tokenize(history_text(player.texts[-1])))
    fork_point = common_prefix(prompt, history)
    new = len(prompt) - fork_point
    evaluated = done.stats.evaluated_prompt_tokens
    print(f"\n{model_path.stem}: fork's first turn evaluated {evaluated}, new {new}")
    assert evaluated <= TARGET * new

    ratios = []
    for n in range(3):
        for branch in (base, fork_branch):
            session.switch_branch(branch)
            player.action(f"echo {branch}-{n}")
            ratios.append(ratio_since_branch_prompt(player, branch))
    print(f"{model_path.stem}: evaluated/new per branch turn", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= TARGET, ratios


def history_text(prompt_text: str) -> str:
    """The rendered prompt up to where its last user message begins: the history."""
    return prompt_text[: prompt_text.rindex("<|im_start|>user\n")]


def ratio_since_branch_prompt(player: Player, branch: int) -> float:
    """Evaluated ÷ new of the last turn, new counted against the last prompt of the same
    branch (not against the other branch's, played just before)."""
    prompts = player.prompts
    now = np.asarray(prompts[-1])
    before = max(
        (np.asarray(p) for p in prompts[:-1]),
        key=lambda p: common_prefix(now, p),
    )
    new = len(now) - common_prefix(now, before)
    return player.finished[-1].stats.evaluated_prompt_tokens / new


@pytest.mark.parametrize("kind", ["qwen2", "jamba", "qwen35moe"])
def test_a_restored_conversation_gives_the_same_logits_as_reading_everything(
    tmp_path: Path, llama_engine, kind: str
) -> None:
    # Random attention (and, for jamba, Mamba mixing): the logits depend on the history.
    path = with_random_attention(write_model(tmp_path / f"{kind}.gguf", kind, mixing=0.002), 0.01)
    restored = llama_engine(path)
    collect(restored.stream(conversation(3), GREEDY, GenerationControl()))
    collect(restored.stream(conversation(3, "pwd"), GREEDY, GenerationControl()))
    done = collect(restored.stream(conversation(4), ONE_TOKEN, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens < done.stats.prompt_tokens // 3
    via_saved_state = last_logits(restored)

    fresh = llama_engine(path)
    done = collect(fresh.stream(conversation(4), ONE_TOKEN, GenerationControl())).finished
    assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
    np.testing.assert_allclose(via_saved_state, last_logits(fresh), rtol=0, atol=1e-4)

    # The comparison has teeth: the other conversation's first action shows.
    collect(fresh.stream(conversation(4, "pwd"), ONE_TOKEN, GenerationControl()))
    assert np.abs(last_logits(fresh) - via_saved_state).max() > 1e-3


def test_whole_states_stay_within_the_budget(tmp_path: Path, llama_engine) -> None:
    """A budget too small for a whole state: the conversation is read again, correctly,
    and the store never holds more than its budget."""
    path = write_model(tmp_path / "jamba.gguf", "jamba")
    budget = int(state_size(path) * 2.5)  # two recurrent checkpoints, no whole state
    engine = llama_engine(path, n_ctx=8192, state_budget_bytes=budget)
    first, second = Player(engine), Player(engine)
    for n in range(3):
        assert first.action(f"cat notes-{n}.txt").observation == OBSERVATION
        assert second.action(f"ls folder-{n}").observation == OBSERVATION
        assert engine.states.size <= budget
    assert all(not c.standalone for c in engine.states._items)
    last = first.finished[-1].stats
    assert last.evaluated_prompt_tokens == last.prompt_tokens
