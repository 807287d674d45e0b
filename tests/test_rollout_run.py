"""Rollouts (issue 30 item 4), in-process: a scripted policy server issuing tool calls, a
real OpenAI-compatible server as the world model, episodes written as the policy saw them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply
from policyserver import Call, Fail, PolicyServer, Say
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env import RetryPolicy, open_simulator
from agentworld_tui.agents.env.rollout import NOT_RUN, PolicySpec, RolloutSettings, run_rollout
from agentworld_tui.agents.env.tasks import Task
from agentworld_tui.domains import get_domain
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.perturbation import load_perturbations
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import load_workspace

LS = Call("send_keystrokes", {"keystrokes": "ls\n"})
PWD = Call("send_keystrokes", {"keystrokes": "pwd\n"})
TASK = Task("list-files", "List the files in /app.", "terminal", scenario="web-server")


@pytest.fixture
def world_model() -> SlotServer:
    with SlotServer(slots=8, latency=0.01) as server:
        yield server


def play(
    tasks: list[Task],
    world_url: str,
    policy: PolicyServer,
    out: Path,
    *,
    retry: RetryPolicy | None = None,
    retries: int = 3,
    **settings: object,
):
    simulator = open_simulator(world_url, retry=retry, concurrency=8)
    try:
        return run_rollout(
            tasks,
            simulator,
            PolicySpec(policy.url, retries=retries),
            RolloutSettings(out=out, **settings),  # type: ignore[arg-type]
        )
    finally:
        simulator.close()


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_episodes_are_written_as_the_policy_saw_them(world_model, tmp_path: Path) -> None:
    disk_full = next(p for p in load_perturbations("terminal")[0] if p.name == "disk-full")
    task = Task(
        "list-files",
        "List the files in /app.",
        "terminal",
        scenario="web-server",
        schedule={"rule": [{"calls": [2], "preset": "disk-full"}]},
    )
    with PolicyServer([LS, PWD, Say("Listed them.")]) as policy:
        summary = play([task], world_model.url, policy, tmp_path, episodes=2, seed=40)
    state = next(s for s in load_scenarios("terminal")[0] if s.name == "web-server").state
    found = sorted(records(tmp_path), key=lambda r: r["key"])
    assert [r["key"] for r in found] == ["list-files#1", "list-files#2"]
    first = found[0]
    assert first["finished"] and first["ended"] == "no_tool_call"
    assert first["detail"] == "Listed them."
    roles = [m["role"] for m in first["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert "List the files in /app." in first["messages"][1]["content"]
    assert state.strip() in first["messages"][1]["content"]
    call = first["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "send_keystrokes", "arguments": '{"keystrokes": "ls\\n"}'}
    assert first["messages"][3] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": OBSERVATION,
    }
    steps = first["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    assert steps[0]["reasoning"] == "The command lists the folder."
    assert steps[0]["cost"]["generated_tokens"] == 64 and steps[0]["status"] == "complete"
    assert steps[0]["perturbation"] == "" and steps[1]["preset"] == "disk-full"
    assert steps[1]["perturbation"] == disk_full.instruction
    assert first["tools"][0]["function"]["name"] == "send_keystrokes"
    assert [r["seed"] for r in found] == [41, 42]
    # What the policy was sent: the tools, and the history as recorded.
    sent = policy.requests[-1]
    assert sent["tools"][0]["function"]["name"] == "send_keystrokes"
    # Each episode is a session file the app opens.
    session = load_workspace(tmp_path / first["session_file"]).tabs[0]
    assert session.id == first["session_id"] and len(session.turns) == 2
    assert session.turns[1].control == disk_full.instruction
    # The summary: 4 steps at 64 generated tokens; 3 policy requests of 7 tokens an episode.
    assert (summary.finished, summary.episodes, summary.steps, summary.played) == (2, 2, 4, 2)
    data = summary.to_dict()
    assert data["simulator_tokens_per_step"]["generated"] == 64
    assert data["simulator_generated_per_policy_token"] == round(4 * 64 / (6 * 7), 2)
    assert json.loads((tmp_path / "summary.json").read_text())["finished"] == 2
    assert summary.lines()[0].startswith("episodes: 2 of 2 finished, 0 failed")


def test_refused_calls_go_back_to_the_policy_and_the_episode_goes_on(
    world_model, tmp_path: Path
) -> None:
    empty = Call("send_keystrokes", {"keystrokes": ""})
    script = [empty, Call("rm_rf", {}), Call("send_keystrokes", "{not json"), LS, Say("ok")]
    domain = get_domain("terminal")
    scenario = load_scenarios("terminal")[0][0]
    with pytest.raises(ActionError) as app:
        domain.action_for_tool("send_keystrokes", {"keystrokes": ""}, scenario)
    with PolicyServer(script) as policy:
        summary = play([TASK], world_model.url, policy, tmp_path)
    (record,) = records(tmp_path)
    results = [m["content"] for m in record["messages"] if m["role"] == "tool"]
    assert results[0] == f"error: {app.value}"
    assert results[1].startswith("error: unknown tool 'rm_rf'; available tools: send_keystrokes")
    assert results[2].startswith("error: the arguments are not valid JSON")
    assert results[3] == OBSERVATION
    assert [bool(s["refused"]) for s in record["steps"]] == [True, True, True, False]
    assert record["finished"] and summary.steps == 1 and summary.refused == 3
    assert len(load_workspace(tmp_path / record["session_file"]).tabs[0].turns) == 1


def test_the_step_limit_ends_an_episode_and_answers_every_call(world_model, tmp_path: Path) -> None:
    with PolicyServer([[LS, PWD, LS], PWD, PWD]) as policy:
        play([TASK], world_model.url, policy, tmp_path, max_steps=2)
    (record,) = records(tmp_path)
    assert record["finished"] and record["ended"] == "step_limit"
    assert len(record["steps"]) == 2
    calls = record["messages"][2]["tool_calls"]
    results = [m for m in record["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert results[2]["content"] == NOT_RUN
    assert len(policy.requests) == 1


def test_a_policy_that_calls_no_tool_ends_the_episode_with_that_reason(
    world_model, tmp_path: Path
) -> None:
    with PolicyServer([Say("I will not act.")]) as policy:
        play([TASK], world_model.url, policy, tmp_path)
    (record,) = records(tmp_path)
    assert (record["ended"], record["detail"], record["steps"]) == (
        "no_tool_call",
        "I will not act.",
        [],
    )
    assert record["finished"] and world_model.served == 0


def test_failures_are_recorded_and_played_again_when_resumed(world_model, tmp_path: Path) -> None:
    tasks = [TASK, Task("second", "Print the directory.", "terminal")]
    broken = lambda body: Fail(500) if "Print the directory" in json.dumps(body) else LS  # noqa: E731
    with PolicyServer(broken) as policy:
        summary = play(tasks, world_model.url, policy, tmp_path, retries=0, max_steps=1)
    first = {r["key"]: r for r in records(tmp_path)}
    assert first["second#1"]["ended"] == "policy_error" and not first["second#1"]["finished"]
    assert "the policy failed" in first["second#1"]["detail"]
    assert first["list-files#1"]["finished"]
    assert (summary.finished, summary.failed) == (1, 1)
    with PolicyServer([PWD]) as policy:
        summary = play(tasks, world_model.url, policy, tmp_path, max_steps=1)
    assert (summary.finished, summary.failed, summary.played) == (2, 0, 1)
    lines = records(tmp_path)
    assert sorted(r["key"] for r in lines) == ["list-files#1", "second#1", "second#1"]
    kept = [r for r in lines if r["key"] == "list-files#1"]
    assert kept == [first["list-files#1"]]  # the finished episode was not played again
    assert lines[-1]["key"] == "second#1" and lines[-1]["finished"]


def test_a_world_model_that_goes_away_fails_the_episode_not_the_run(tmp_path: Path) -> None:
    quick = RetryPolicy(attempts=2, first_pause=0.01)
    with FaultServer(default=Reply(status=503)) as world, PolicyServer([LS, Say("ok")]) as policy:
        summary = play([TASK], world.url, policy, tmp_path, retry=quick)
    (record,) = records(tmp_path)
    assert record["ended"] == "simulator_error" and not record["finished"]
    assert "HTTP 503" in record["detail"] and "given up after 2 tries" in record["detail"]
    assert record["steps"][0]["status"] == "error"
    assert summary.failed == 1


def test_each_step_can_be_judged(world_model, tmp_path: Path) -> None:
    verdict = (
        "The screen is plausible.\n<final_evaluation>\n```json\n"
        '{"strengths": ["format"], "weaknesses": [], "scores": {"format": 5, '
        '"factuality": 4, "consistency": 4, "realism": 3, "quality": 4}}\n```\n'
        "</final_evaluation>"
    )
    with (
        FaultServer(default=Reply(content=[verdict])) as judge,
        PolicyServer([LS, Say("ok")]) as policy,
    ):
        engine = RemoteEngine(judge.url)
        play([TASK], world_model.url, policy, tmp_path, judge=engine, judge_steps=True)
        asked = judge.chat_requests()[0].body["messages"]
    (record,) = records(tmp_path)
    score = record["steps"][0]["judge"]
    assert score["total"] == 4.0 and score["scores"]["realism"] == 3 and score["error"] == ""
    assert "No real observation exists" in asked[-1]["content"]
    turn = load_workspace(tmp_path / record["session_file"]).tabs[0].turns[0]
    assert turn.judgement is not None and turn.judgement["judgement"]["total"] == 4.0


def test_a_local_world_model_plays_and_judges_its_own_steps(
    scripted_model, llama_engine, tmp_path: Path
) -> None:
    """The world model in llama.cpp plays the episode and, asked to judge, runs the judge
    on its engine thread in turn with the steps: this scripted model writes no verdict,
    so the judgement says why there is none and the episode still finishes."""
    from test_engine_llama import OBSERVATION as SCRIPTED_SCREEN
    from test_engine_llama import SCRIPT

    from agentworld_tui.engines.base import GenerationParams

    engine = llama_engine(scripted_model(SCRIPT), n_ctx=8192)
    simulator = open_simulator(engine, params=GenerationParams(temperature=0.0, max_tokens=512))
    try:
        with PolicyServer([LS, PWD, Say("ok")]) as policy:
            summary = run_rollout(
                [TASK],
                simulator,
                PolicySpec(policy.url),
                RolloutSettings(out=tmp_path, judge_steps=True),
            )
    finally:
        simulator.close()
    (record,) = records(tmp_path)
    assert record["finished"] and summary.steps == 2
    assert [m["content"] for m in record["messages"] if m["role"] == "tool"] == [
        SCRIPTED_SCREEN
    ] * 2
    judged = record["steps"][0]["judge"]
    assert judged["total"] is None and judged["error"].startswith("unreadable judgement")
