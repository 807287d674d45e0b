"""The Gymnasium adapter (issue 30 item 3): text spaces, Gymnasium's own checks, and an
episode against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env, check_reset_seed_determinism
from gymnasium.utils.passive_env_checker import (
    check_action_space,
    check_observation_space,
    env_render_passive_checker,
    env_reset_passive_checker,
    env_step_passive_checker,
)
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env.gym import SimulatedEnv, register_environments
from agentworld_tui.domains import DOMAINS
from agentworld_tui.world.prompts import load_scenarios


@pytest.fixture
def server() -> SlotServer:
    with SlotServer(slots=4, latency=0.01) as running:
        yield running


def test_gymnasium_s_checks_accept_the_environment(server) -> None:
    """Gymnasium's passive checks, step by step (``check_env`` whole is below)."""
    env = SimulatedEnv("terminal", engine=server.url, max_steps=50, render_mode="ansi")
    try:
        check_observation_space(env.observation_space)
        check_action_space(env.action_space)
        check_reset_seed_determinism(env)
        env_reset_passive_checker(env, seed=3)
        env.action_space.seed(3)
        for _ in range(3):
            env_step_passive_checker(env, env.action_space.sample())
        env_step_passive_checker(env, "ls\n")
        assert env_render_passive_checker(env) == OBSERVATION
    finally:
        env.close()


def test_an_episode_with_text_spaces(server) -> None:
    state = next(s for s in load_scenarios("terminal")[0] if s.name == "data-pipeline").state
    env = SimulatedEnv("terminal", engine=server.url, max_steps=2, render_mode="ansi")
    try:
        first, info = env.reset(seed=5, options={"scenario": "data-pipeline"})
        assert first == state and info["tools"][0]["function"]["name"] == "send_keystrokes"
        assert env.observation_space.contains(first)
        obs, reward, terminated, truncated, info = env.step("make report\n")
        assert (obs, reward, terminated, truncated) == (OBSERVATION, 0.0, False, False)
        assert info["status"] == "complete" and info["cost"]["generated_tokens"] == 64
        refused = env.step("")
        assert refused[0] == OBSERVATION and refused[4]["status"] == "refused"
        assert refused[4]["error"].startswith("empty action")
        *_, truncated, info = env.step("ls\n")
        assert truncated and info["turn"] == 2
        assert env.render() == OBSERVATION
    finally:
        env.close()
    assert not env.observation_space.contains(7)


def test_info_carries_the_schedule_s_decisions(server) -> None:
    schedule = {"seed": 3, "rule": [{"calls": [2], "preset": "oom-killed"}]}
    env = SimulatedEnv("terminal", engine=server.url, schedule=schedule)
    try:
        env.reset()
        *_, first = env.step("ls\n")
        *_, second = env.step("make\n")
    finally:
        env.close()
    assert (first["schedule"], first["preset"]) == ([], "")
    assert second["preset"] == "oom-killed" and second["perturbation"]
    assert [(d["rule"], d["fired"]) for d in second["schedule"]] == [(1, True)]


def test_every_domain_is_registered(server) -> None:
    ids = register_environments()
    assert "AgentWorld/Terminal-v0" in ids and len(ids) == 7
    env = gymnasium.make("AgentWorld/Web-v0", engine=server.url)
    try:
        env.reset()
        obs, *_rest, info = env.step("click('12')")
        assert obs == OBSERVATION and info["turn"] == 1
    finally:
        env.close()


# -- honest spaces (issue 39 item 6) -----------------------------------------------------------
SCREEN = "root@box:/app# echo ~ @ é ─ 😀 \\\x00\tend\nroot@box:/app#"


@pytest.fixture
def screen_server() -> SlotServer:
    with SlotServer(slots=4, latency=0.0, observation=SCREEN) as running:
        yield running


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_gymnasium_s_checker_passes_with_actions_the_domain_takes(domain, screen_server) -> None:
    """``check_env`` whole (its step-determinism check included: a server that answers
    the same gives the same ``info``), and every sampled action is one the domain takes."""
    env = SimulatedEnv(domain, engine=screen_server.url, max_steps=1_000)
    try:
        check_env(env, skip_render_check=True)
        env.reset(seed=4)
        env.action_space.seed(4)
        for _ in range(12):
            action = env.action_space.sample()
            assert env.action_space.contains(action)
            env.env.action(action)  # raises ActionError for an action the domain refuses
        obs, _reward, _term, _trunc, info = env.step(env.action_space.sample())
        assert info["status"] == "complete" and env.observation_space.contains(obs)
        assert "seconds" not in json.dumps(info)
        assert env.last_step is not None and env.last_step.cost.seconds > 0
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_both_vector_modes_carry_any_screen(mode, screen_server) -> None:
    register_environments()
    envs = gymnasium.make_vec(
        "AgentWorld/Terminal-v0", num_envs=2, vectorization_mode=mode, engine=screen_server.url
    )
    try:
        first, _info = envs.reset(seed=1)
        state = load_scenarios("terminal")[0][0].state
        assert tuple(first) == (state, state)
        obs, *_rest, info = envs.step(("ls\n", envs.single_action_space.sample()))
        assert tuple(obs) == (SCREEN, SCREEN)
        assert list(info["status"]) == ["complete", "complete"]
    finally:
        envs.close()


def test_the_text_space_holds_every_character() -> None:
    from gymnasium.spaces.utils import flatten, unflatten

    space = SimulatedEnv.observation_space_for(64)
    text = SCREEN + "\udc80"  # a lone surrogate too: text Python can hold
    assert space.contains(text) and unflatten(space, flatten(space, text)) == text
    assert not space.contains("x" * 65) and not space.contains(b"bytes")
