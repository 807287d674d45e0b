"""Forks (issue 30 items 1 and 2): a fork has the history up to the fork and its own after
it, and on a local model its first step reads only the tokens after the fork point,
recurrent and hybrid models included.

Scripted GGUF models of three kinds run in the real llama.cpp: a transformer (qwen2), a
purely recurrent model (mamba) and a hybrid of Mamba and attention layers (jamba, like the
real model). Each step's prompt is tokenized apart from the engine, so what is new in it
is counted independently of the engine's own bookkeeping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_conversation_states import KINDS, history_text, write_model
from test_engine_llama import GREEDY, OBSERVATION, SCENARIO, rendered, tokenizer

from agentworld_tui.agents.env import Environment, EnvironmentPool, StepResult
from agentworld_tui.engines.prefix import common_prefix

TARGET = 1.1


@pytest.fixture(params=KINDS)
def model_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_model(tmp_path / f"{request.param}.gguf", request.param)


def history(env: Environment) -> list[tuple[str, str, str]]:
    return [(t.user_message, t.observation, t.status) for t in env.turns]


def prompt_text(env: Environment) -> str:
    """The prompt the last turn was sent with, rebuilt from the session and rendered."""
    session = env.session
    return rendered(session.prompt(session.turns[-1]).messages)


def prompt_tokens(env: Environment, tokenize) -> list[int]:
    return tokenize(prompt_text(env))


def own_turn_tokens(env: Environment, tokenize) -> int:
    """The tokens of the last prompt after the history it shares with its fork: its own
    turn (a recurrent model keeps its state at message boundaries, not inside one)."""
    text = prompt_text(env)
    return len(tokenize(text)) - len(tokenize(history_text(text)))


def new_tokens(now: list[int], before: list[int]) -> int:
    return len(now) - common_prefix(np.asarray(now), np.asarray(before))


def test_a_fork_shares_the_history_then_goes_its_own_way(model_path, llama_engine) -> None:
    engine = llama_engine(model_path, n_ctx=8192)
    tokenize = tokenizer(model_path)
    env = Environment("terminal", engine=engine, scenario=SCENARIO, params=GREEDY)
    env.reset()
    for n in range(3):
        assert env.step(f"cat notes-{n}.txt\n").observation.text == OBSERVATION
    fork = env.fork()
    assert history(fork) == history(env) and fork.session.id != env.session.id
    assert fork.steps == env.steps == 3

    own = env.step("ls -la\n")
    own_prompt = prompt_tokens(env, tokenize)
    forked = fork.step("pwd\n")
    fork_prompt = prompt_tokens(fork, tokenize)

    assert history(env)[:3] == history(fork)[:3]
    assert env.turns[3].action != fork.turns[3].action
    assert [len(env.turns), len(fork.turns)] == [4, 4]
    # The fork's first step reads its own turn, not the history it shares.
    new = own_turn_tokens(fork, tokenize)
    evaluated = forked.cost.evaluated_prompt_tokens
    print(f"\n{model_path.stem}: fork's first step evaluated {evaluated}, new {new}")
    assert new < len(fork_prompt) // 4  # the comparison has teeth: most of it is history
    assert evaluated <= TARGET * new
    assert own.cost.evaluated_prompt_tokens <= TARGET * len(own_prompt)

    # Stepping in turn, each reads only what is new since its own last prompt.
    last = {id(env): own_prompt, id(fork): fork_prompt}
    ratios = []
    for n in range(2):
        for one in (env, fork):
            step = one.step(f"echo {n}\n")
            now = prompt_tokens(one, tokenize)
            ratios.append(step.cost.evaluated_prompt_tokens / new_tokens(now, last[id(one)]))
            last[id(one)] = now
    print(f"{model_path.stem}: evaluated/new per step after the fork", [f"{r:.3f}" for r in ratios])
    assert max(ratios) <= TARGET, ratios
    assert len(env.turns) == len(fork.turns) == 6
    fork.close()
    env.close()


def test_closing_the_parent_leaves_its_forks_working(scripted_model, llama_engine) -> None:
    from test_engine_llama import SCRIPT

    engine = llama_engine(scripted_model(SCRIPT), n_ctx=8192)
    env = Environment("terminal", engine=engine, scenario=SCENARIO, params=GREEDY)
    env.reset()
    env.step("ls\n")
    forks = [env.fork(seed=s) for s in (1, 2)]
    env.close()
    assert all(f.step("pwd\n").status == "complete" for f in forks)
    forks[0].close()
    assert forks[1].step("whoami\n").status == "complete"
    forks[1].close()


def test_a_group_of_forks_steps_together_in_a_pool_s_simulator(model_path, llama_engine) -> None:
    """A group sharing a prefix, stepped as one batch on the local model's thread: each
    fork's first step reads only what the model has not read yet (the root's last
    observation, which it generated but never read as history, and the fork's turn)."""
    engine = llama_engine(model_path, n_ctx=8192)
    tokenize = tokenizer(model_path)
    with EnvironmentPool("terminal", 1, engine=engine, scenario=SCENARIO, params=GREEDY) as pool:
        root = pool[0]
        root.reset()
        for n in range(2):
            root.step(f"cat notes-{n}.txt\n")
        base = prompt_tokens(root, tokenize)  # the last prompt the model read
        group = [root.fork() for _ in range(3)]
        pending = [g.begin(f"echo branch-{i}\n") for i, g in enumerate(group)]
        steps: list[StepResult] = [p.wait() for p in pending]
        for g, step in zip(group, steps, strict=True):
            now = prompt_tokens(g, tokenize)
            new = new_tokens(now, base)  # the root's last observation and the fork's turn
            assert new < len(now) // 4
            assert step.cost.evaluated_prompt_tokens <= TARGET * new
            g.close()
    assert len({s.action.label for s in steps}) == 3
