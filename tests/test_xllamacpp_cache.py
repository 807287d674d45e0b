"""No history read twice on the xllamacpp engine (issue 43, item 2).

The server's prompt cache does the work here: each request goes to the slot whose cache
shares most with it, a hybrid model's recurrent state is checkpointed a few tokens before
the end of every prompt, and a slot given to another conversation keeps the one it held
in host memory. These tests play the app's own sessions (``Session`` and ``run_turn``)
on a transformer (qwen2) and on the miniature of the real model's architecture
(qwen35moe), and read what each turn cost from the server's own counters.

A fork's first turn is not among them: the server keeps no state at the point where a
branch leaves its history, so the first turn of a new branch reads its prompt again
(the in-process llama-cpp-python engine keeps one; tests/test_conversation_states.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from ggufgen import write_qwen35moe_model, write_scripted_model
from test_conversation_states import history_text, ratio, ratio_since_branch_prompt
from test_engine_llama import DOMAIN, OBSERVATION, SCENARIO, SCRIPT
from test_hybrid_checkpoints import Player

from agentworld_tui.engines.prefix import common_prefix

TARGET = 1.1
TURNS = 10
KINDS = ["qwen2", "qwen35moe"]


@pytest.fixture(params=KINDS)
def model_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"{request.param}.gguf"
    if request.param == "qwen2":
        return write_scripted_model(path, SCRIPT)
    return write_qwen35moe_model(path, SCRIPT)


def test_each_turn_reads_only_what_is_new(model_path, xllama_engine) -> None:
    engine = xllama_engine(model_path, n_ctx=8192)
    player = Player(engine)
    ratios = []
    for n in range(TURNS):
        done = player.action(f"cat notes-{n}.txt")
        assert done.observation == OBSERVATION
        if n == 0:
            assert done.stats.evaluated_prompt_tokens == done.stats.prompt_tokens
            continue
        ratios.append(ratio(player))
        assert len(player.prompts[-1]) / player.new_tokens() > 1.5 or n == 1
    print(f"\n{model_path.stem}: evaluated/new per turn 2..{TURNS}", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= TARGET, ratios


@pytest.mark.parametrize("slots", [1, 2])
def test_a_turn_after_a_switch_reads_only_what_is_new(model_path, xllama_engine, slots) -> None:
    """Two conversations in turn: with a slot each, or both on one slot (the server then
    keeps the one it leaves in host memory and restores it when it comes back)."""
    engine = xllama_engine(model_path, n_ctx=8192, slots=slots)
    first, second = Player(engine), Player(engine)
    ratios = []
    for n in range(4):
        for player, action in ((first, f"cat notes-{n}.txt"), (second, f"ls -la folder-{n}")):
            done = player.action(action)
            assert done.observation == OBSERVATION
            if n:
                ratios.append(ratio(player))
    print(f"\n{model_path.stem}, {slots} slots: evaluated/new after each switch", ratios)
    assert max(ratios) <= TARGET, ratios


def test_a_retry_reads_at_most_the_generation_prompt(model_path, xllama_engine) -> None:
    engine = xllama_engine(model_path, n_ctx=8192)
    player = Player(engine)
    for n in range(3):
        player.action(f"cat notes-{n}.txt")
    done = player.play(player.session.regenerate())
    assert done.observation == OBSERVATION
    evaluated = done.stats.evaluated_prompt_tokens
    print(f"\n{model_path.stem}: retry evaluated {evaluated}, gen {player.generation_prompt()}")
    assert 1 <= evaluated <= player.generation_prompt()


@pytest.mark.parametrize("slots", [1, 2])
def test_a_fork_reads_only_its_own_tokens(model_path, xllama_engine, slots) -> None:
    """The first turn of a new branch reads only what follows the fork point, and the
    two branches stepping in turn read only what is new since their own last prompt."""
    engine = xllama_engine(model_path, n_ctx=8192, slots=slots)
    player = Player(engine)
    for n in range(3):
        player.action(f"cat notes-{n}.txt")
    session = player.session
    base = session.branch_id
    player.action("ls -la")
    turn = session.fork(len(session.turns), DOMAIN.parse_action("pwd", SCENARIO))
    done = player.play(turn)
    assert done.observation == OBSERVATION
    fork_branch = session.branch_id
    prompt = np.asarray(player.prompts[-1])
    history = np.asarray(player.tokenize(history_text(player.texts[-1])))
    new = len(prompt) - common_prefix(prompt, history)
    evaluated = done.stats.evaluated_prompt_tokens
    print(f"\n{model_path.stem}, {slots} slots: fork's first turn evaluated {evaluated}, new {new}")
    assert evaluated <= TARGET * new

    ratios = []
    for n in range(3):
        for branch in (base, fork_branch):
            session.switch_branch(branch)
            assert player.action(f"echo {branch}-{n}").observation == OBSERVATION
            ratios.append(ratio_since_branch_prompt(player, branch))
    print(f"{model_path.stem}: evaluated/new per branch turn", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= TARGET, ratios


def test_the_slot_table_copies_forks_only() -> None:
    """A next turn goes to its slot; a fork (sharing its first turn and half of itself)
    gets a copy of its conversation's slot, several forks at once from one slot; a new
    conversation of the same domain (sharing the system prompt and the way actions are
    written) is left to the server, and so is a fork when no other slot is idle."""
    from agentworld_tui.engines.xllamacpp import _SlotTable

    system = "<system>" + "rules " * 50
    first = f"{system}<user>### Action: ls<assistant>a b c"
    history = f"{first}<user>### Action: cat a"
    fork = f"{first}<user>### Action: rm b<gen>"
    table = _SlotTable(4, can_copy=True)
    one = table.take(f"{history}<gen>", history, first=len(first))
    assert one.slot == -1 and one.source == -1
    table.give_back(one.chosen)
    turn = table.take(f"{history}<assistant>x<user>### Action: pwd<gen>", history, first=len(first))
    assert turn.slot == turn.chosen == one.chosen and turn.source == -1
    table.give_back(turn.chosen)
    forks = [table.take(fork, "f", first=len(first)) for _ in range(2)]
    assert [f.source for f in forks] == [one.chosen, one.chosen]
    assert len({f.chosen for f in forks} | {one.chosen}) == 3
    assert all(f.slot == f.chosen for f in forks)
    fresh = table.take(f"{system}<user>### Action: ls -la<gen>", "n", first=sys.maxsize)
    assert fresh.source == -1 and fresh.slot == -1
    lone = _SlotTable(1, can_copy=True)
    lone.give_back(lone.take(f"{history}<gen>", history, first=len(first)).chosen)
    alone = lone.take(fork, "f", first=len(first))
    assert alone.source == -1 and alone.slot == -1
