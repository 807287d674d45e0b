"""The Gymnasium adapter (issue 30 item 3): text spaces, Gymnasium's own checks, and an
episode against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_reset_seed_determinism
from gymnasium.utils.passive_env_checker import (
    check_action_space,
    check_observation_space,
    env_render_passive_checker,
    env_reset_passive_checker,
    env_step_passive_checker,
)
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env.gym import SimulatedEnv, register_environments
from agentworld_tui.world.prompts import load_scenarios


@pytest.fixture
def server() -> SlotServer:
    with SlotServer(slots=4, latency=0.01) as running:
        yield running


def test_gymnasium_s_checks_accept_the_environment(server) -> None:
    """Gymnasium's API checks (a world model samples, so steps are not promised to repeat
    under one seed: ``check_env``'s step-determinism check does not apply; resets do)."""
    env = SimulatedEnv("terminal", engine=server.url, max_steps=50, render_mode="ansi")
    try:
        check_observation_space(env.observation_space)
        check_action_space(env.action_space)
        check_reset_seed_determinism(env)
        env_reset_passive_checker(env, seed=3)
        env.action_space.seed(3)
        for _ in range(3):  # samples up to 200,000 characters long: some outgrow the context
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
