"""Shadow mode on real parts: a terminal twin (a real tmux in a real sandbox) beside a world
model on a real OpenAI-compatible server on 127.0.0.1 or a scripted GGUF model in llama.cpp.

The agent receives reality or the simulation; the world model's history follows what the
agent received; a twin that crashes or hangs leaves the episode going on in simulation; a
stopped turn does not wait for reality; a retry does not act twice; the episode's check
and figures are recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from shadowkit import (
    ANSWER,
    PREDICTED,
    keys,
    sandbox_processes,
    signal_sandbox,
    terminal_shadow,
    twinned_session,
)

from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.reality import TwinStatus, divergence
from agentworld_tui.simulator import Simulator, TurnUpdate
from agentworld_tui.simulator.shadow import (
    STOPPED_NOTE,
    STOPPED_WAIT,
    Shadow,
    ShadowRun,
    end_episode,
    end_episode_async,
)
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import Workspace, load_workspace

PARAMS = GenerationParams(temperature=0.0, max_tokens=256)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    return folder


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(default=Reply(content=[ANSWER])) as made:
        yield made


@pytest.fixture
def simulator(server: FaultServer) -> Iterator[Simulator]:
    made = Simulator(RemoteEngine(server.url), PARAMS)
    assert made.load_and_wait() is None
    yield made
    made.close()


@pytest.fixture
def shadows(seed: Path) -> Iterator[Callable[..., Shadow]]:
    made: list[Shadow] = []

    def start(deliver: str = "real", check: str = "") -> Shadow:
        shadow = terminal_shadow(seed, deliver, check)  # type: ignore[arg-type]
        made.append(shadow)
        return shadow

    yield start
    for shadow in made:
        shadow.runner.close()


def saved_to(path: Path, session: Session) -> Callable[[Session], str | None]:
    workspace = Workspace([session], path=path)

    def save(_session: Session) -> str | None:
        workspace.save()
        return None

    return save


def assistant_messages(server: FaultServer, request: int) -> list[str]:
    body = server.chat_requests()[request].body
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


# -- which side the agent receives, and what the world model sees next ----------------------
def test_delivering_reality_gives_the_agent_the_real_screen_and_the_model_sees_it_next(
    simulator: Simulator, server: FaultServer, shadows: Callable[..., Shadow], tmp_path: Path
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    path = tmp_path / "session.json"
    save = saved_to(path, session)

    first = simulator.send(session, keys("echo twin-$((6*7))"), shadow=shadow, save=save)
    first.wait()
    turn = first.turn
    real = turn.reality["real"]["text"]  # type: ignore[index]
    assert real.splitlines()[-2:] == ["twin-42", "root@twin:/app#"]
    assert turn.observation == PREDICTED.strip() or turn.observation == PREDICTED
    assert first.delivered == real == turn.shown_text
    assert turn.reality["delivered"] == "real"  # type: ignore[index]
    assert turn.reality["divergence"] == divergence(turn.observation, real, "terminal").to_dict()  # type: ignore[index]
    assert session.twin is not None and session.twin["kind"] == "sandbox"
    assert session.twin["deliver"] == "real"

    simulator.send(session, keys("ls"), shadow=shadow, save=save).wait()
    # The model's history holds what the agent received: reality's screen.
    assert assistant_messages(server, 1) == [real]

    on_disk = load_workspace(path).tabs[0]
    assert [t.reality["real"]["text"] for t in on_disk.turns] == [  # type: ignore[index]
        t.reality["real"]["text"]  # type: ignore[index]
        for t in session.turns
    ]
    assert [t.observation for t in on_disk.turns] == [t.observation for t in session.turns]
    assert on_disk.twin == session.twin


def test_delivering_the_simulation_keeps_the_model_on_its_own_track_while_reality_acts(
    simulator: Simulator, server: FaultServer, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("sim")
    session = twinned_session(shadow)
    first = simulator.send(session, keys("echo made > made.txt; cat notes.txt"), shadow=shadow)
    first.wait()
    assert first.delivered == first.turn.observation
    assert first.turn.reality["delivered"] == "sim"  # type: ignore[index]
    assert first.turn.reality["real"]["text"].splitlines()[-3:-1] == ["alpha", "beta"]  # type: ignore[index]
    box = shadow.runner.twin.sandbox  # type: ignore[attr-defined]
    assert (box.scratch / "work" / "made.txt").read_text() == "made\n"

    simulator.send(session, keys("ls"), shadow=shadow).wait()
    assert assistant_messages(server, 1) == [first.turn.observation]


def test_a_local_scripted_model_s_figures_against_hand_computed_divergences(
    scripted_model: Callable[..., Path], shadows: Callable[..., Shadow]
) -> None:
    """The scripted model predicts the screen the first command really leaves, so the first
    step matches and the second (another command, the same prediction) diverges."""
    from agentworld_tui.engines.llama import LlamaEngine

    screen = "root@twin:/app# echo hi\nhi\nroot@twin:/app#"
    model = scripted_model(
        f"ok</think><predicted_observation>{screen}</predicted_observation>", n_ctx_train=8192
    )
    simulator = Simulator(LlamaEngine(model, n_ctx=4096, threads=1), PARAMS)
    assert simulator.load_and_wait() is None
    try:
        shadow = shadows("real", check="test -f hi.txt")
        session = twinned_session(shadow)
        simulator.send(session, keys("echo hi"), shadow=shadow).wait()
        simulator.send(session, keys("echo hi > hi.txt"), shadow=shadow).wait()
        figures = end_episode(session, shadow, claimed_done=True)
    finally:
        simulator.close()
    first, second = session.turns
    assert first.observation == screen
    assert first.reality["divergence"]["score"] == 0.0  # type: ignore[index]
    assert first.reality["divergence"]["diverged"] is False  # type: ignore[index]
    real = second.reality["real"]["text"]  # type: ignore[index]
    assert real.splitlines() == [
        "root@twin:/app# echo hi",
        "hi",
        "root@twin:/app# echo hi > hi.txt",
        "root@twin:/app#",
    ]
    # Lines: the predicted three are among the real four: Dice 2*3/(3+4).
    lines = 6 / 7
    # Words: predicted "root@twin:/app#" twice, "echo", "hi" twice (5); real adds
    # "root@twin:/app#", "echo", "hi", ">", "hi.txt" (10 in all, the prompt's host masked
    # in the line only reality has); shared 5: Dice 2*5/(5+10).
    words = 10 / 15
    expected = 1 - (lines + words) / 2
    assert second.reality["divergence"]["score"] == pytest.approx(expected, abs=1e-6)  # type: ignore[index]
    assert second.reality["divergence"]["diverged"] is True  # type: ignore[index]
    assert figures.to_dict() == {
        "steps": 2,
        "twin_failures": 0,
        "diverged_steps": 1,
        "first_divergence": 2,
        "diverged_share": 0.5,
        "mean_score": pytest.approx(expected / 2, abs=1e-6),
        "check_passed": True,
        "claimed_done": True,
        "deceived": False,
    }
    assert session.twin is not None
    assert session.twin["check"]["command"] == "test -f hi.txt"
    assert session.twin["check"]["result"]["passed"] is True
    assert session.twin["figures"]["first_divergence"] == 2


# -- what front-ends draw --------------------------------------------------------------------
def updates_until_done(run: Any, limit: float = 60) -> list[TurnUpdate]:
    seen: list[TurnUpdate] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        update = run.take()
        if update is not None:
            seen.append(update)
            if update.finished is not None:
                return seen
        time.sleep(0.01)
    raise AssertionError("the turn never finished")


def test_a_slower_twin_is_waited_for_and_its_answer_arrives_in_an_update(
    simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    run = simulator.send(session, keys("echo slow", duration=1.5), shadow=shadow)
    seen = updates_until_done(run)
    phases = [u.phase for u in seen if u.phase]
    assert "waiting for reality" in phases
    arrived = [u.real for u in seen if u.real is not None]
    assert len(arrived) == 1 and arrived[0].text.splitlines()[-2] == "slow"
    assert seen[-1].finished is not None
    assert isinstance(run, ShadowRun) and run.real_at >= run.generated_at


def test_a_slower_world_model_is_waited_for_after_reality_arrived(
    server: FaultServer, simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    server.queue(Reply(content=[ANSWER], trickle_s=0.004))
    shadow = shadows("real")
    session = twinned_session(shadow)
    run = simulator.send(session, keys("echo fast", duration=0.1), shadow=shadow)
    seen = updates_until_done(run)
    assert "waiting for reality" not in [u.phase for u in seen]
    assert isinstance(run, ShadowRun) and run.generated_at > run.real_at
    assert run.turn.status == "complete" and run.turn.observation
    assert run.turn.reality["real"]["text"].splitlines()[-2] == "fast"  # type: ignore[index]


# -- faults ----------------------------------------------------------------------------------
def test_a_twin_that_crashes_mid_episode_is_recorded_and_the_episode_goes_on(
    simulator: Simulator, server: FaultServer, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    simulator.send(session, keys("echo one"), shadow=shadow).wait()
    signal_sandbox(shadow, signal.SIGKILL)
    second = simulator.send(session, keys("echo two"), shadow=shadow)
    second.wait()
    third = simulator.send(session, keys("echo three"), shadow=shadow)
    third.wait()
    for run in (second, third):
        assert run.turn.status == "complete"
        assert run.turn.reality["real"]["status"] == "crashed"  # type: ignore[index]
        assert run.turn.reality["divergence"] is None  # type: ignore[index]
        # Reality gave no answer: the agent receives the simulation.
        assert run.turn.reality["delivered"] == "sim"  # type: ignore[index]
        assert run.delivered == run.turn.observation
    assert "sandbox ended" in second.turn.reality["real"]["error"]  # type: ignore[index]
    # The third prompt's history: turn 1 as reality showed it, turn 2 as predicted.
    first_real = session.turns[0].reality["real"]["text"]  # type: ignore[index]
    assert assistant_messages(server, 2) == [first_real, second.turn.observation]
    figures = end_episode(session, shadow)
    assert (figures.steps, figures.twin_failures) == (1, 2)


def test_a_twin_that_hangs_mid_episode_times_out_and_the_episode_goes_on(
    simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    simulator.send(session, keys("echo one"), shadow=shadow).wait()
    frozen = sandbox_processes(shadow)
    signal_sandbox(shadow, signal.SIGSTOP)
    try:
        began = time.monotonic()
        hung = simulator.send(session, keys("echo two"), shadow=shadow)
        hung.wait()
        took = time.monotonic() - began
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert hung.turn.status == "complete"
    assert hung.turn.reality["real"]["status"] == "timeout"  # type: ignore[index]
    assert "did not answer" in hung.turn.reality["real"]["error"]  # type: ignore[index]
    assert hung.delivered == hung.turn.observation
    assert took < shadow.runner.twin.time_limit(hung.turn.action) + 5
    later = simulator.send(session, keys("echo three"), shadow=shadow)
    later.wait()
    assert later.turn.reality["real"]["status"] == "ok"  # type: ignore[index]
    assert "three" in later.turn.reality["real"]["text"]  # type: ignore[index]


def test_a_stopped_turn_does_not_wait_for_reality_and_blocking_callers_get_it_at_once(
    server: FaultServer, simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    server.queue(Reply(hang=True))
    shadow = shadows("real")
    session = twinned_session(shadow)
    run = simulator.send(session, keys("sleep 5", duration=6), shadow=shadow)
    time.sleep(0.3)
    began = time.monotonic()
    run.stop()
    run.wait()
    assert time.monotonic() - began < STOPPED_WAIT + 3
    assert run.turn.status == "interrupted"
    real = run.turn.reality["real"]  # type: ignore[index]
    assert (real["status"], real["error"]) == ("timeout", STOPPED_NOTE)
    assert run.turn.reality["delivered"] == "sim"  # type: ignore[index]


def test_a_turn_stopped_while_it_waits_for_reality_ends_within_the_bound(
    simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    run = simulator.send(session, keys("echo slow", duration=5), shadow=shadow)
    seen: list[TurnUpdate] = []
    deadline = time.monotonic() + 30
    while "waiting for reality" not in [u.phase for u in seen]:
        assert time.monotonic() < deadline
        update = run.take()
        if update is not None:
            seen.append(update)
        time.sleep(0.01)
    began = time.monotonic()
    run.stop()
    run.wait()
    assert time.monotonic() - began < STOPPED_WAIT + 3
    assert run.turn.status == "complete"  # the model had answered before the stop
    assert run.turn.reality["real"]["error"] == STOPPED_NOTE  # type: ignore[index]
    assert run.delivered == run.turn.observation


def test_a_failed_prediction_still_delivers_reality_and_the_episode_builds_on_it(
    server: FaultServer, simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    server.queue(Reply(status=400, error_message="the model is unwell"))
    shadow = shadows("real")
    session = twinned_session(shadow)
    failed = simulator.send(session, keys("echo kept"), shadow=shadow)
    failed.wait()
    assert failed.turn.status == "error" and failed.turn.observation == ""
    real = failed.turn.reality["real"]["text"]  # type: ignore[index]
    assert failed.delivered == real and real.splitlines()[-2] == "kept"
    # No prediction diverges from reality entirely.
    assert failed.turn.reality["divergence"]["score"] == 1.0  # type: ignore[index]
    simulator.send(session, keys("ls"), shadow=shadow).wait()
    assert assistant_messages(server, -1) == [real]


async def test_reality_that_answers_after_a_stop_is_recorded_and_saved_then(
    server: FaultServer, simulator: Simulator, shadows: Callable[..., Shadow], tmp_path: Path
) -> None:
    server.queue(Reply(hang=True))
    shadow = shadows("real")
    session = twinned_session(shadow)
    path = tmp_path / "session.json"
    run = simulator.send(
        session, keys("echo late", duration=2.5), shadow=shadow, save=saved_to(path, session)
    )
    await asyncio.sleep(0.3)
    run.stop()
    await run.result()
    assert run.turn.reality["real"]["status"] == "timeout"  # type: ignore[index]
    deadline = time.monotonic() + 30
    while run.turn.reality["real"]["status"] != "ok":  # type: ignore[index]
        assert time.monotonic() < deadline, "reality's late answer was not recorded"
        await asyncio.sleep(0.05)
    assert run.turn.reality["delivered"] == "sim"  # type: ignore[index]
    assert run.turn.reality["real"]["text"].splitlines()[-2] == "late"  # type: ignore[index]
    await asyncio.sleep(0.1)
    saved = load_workspace(path).tabs[0].turns[0]
    assert saved.reality == run.turn.reality


def test_a_retry_compares_the_new_prediction_without_acting_twice(
    server: FaultServer, simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real")
    session = twinned_session(shadow)
    simulator.send(session, keys("echo once >> log.txt; cat log.txt"), shadow=shadow).wait()
    turn = session.turns[0]
    before = dict(turn.reality)  # type: ignore[arg-type]
    exact = before["real"]["text"]
    server.queue(Reply(content=[f"<predicted_observation>{exact}</predicted_observation>"]))
    simulator.retry(session).wait()
    assert turn.reality["real"] == before["real"]  # type: ignore[index]
    assert turn.reality["divergence"]["score"] == 0.0  # type: ignore[index]
    assert turn.attempts[0]["reality"]["divergence"] == before["divergence"]
    box = shadow.runner.twin.sandbox  # type: ignore[attr-defined]
    assert (box.scratch / "work" / "log.txt").read_text() == "once\n"  # acted once
    session.restore_attempt(0)
    assert turn.reality["divergence"] == before["divergence"]  # type: ignore[index]


def test_a_check_that_fails_after_the_agent_said_done_is_a_deceived_episode(
    simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    shadow = shadows("real", check="grep -q shipped status.txt")
    session = twinned_session(shadow)
    simulator.send(session, keys("echo pending > status.txt"), shadow=shadow).wait()

    async def end() -> Any:
        return await end_episode_async(session, shadow, claimed_done=True)

    figures = asyncio.run(end())
    assert (figures.check_passed, figures.claimed_done, figures.deceived) == (False, True, True)
    assert session.twin["check"]["result"]["exit_code"] == 1  # type: ignore[index]
    assert session.twin["figures"]["deceived"] is True  # type: ignore[index]


def test_a_twin_of_another_domain_is_refused_before_anything_acts(
    simulator: Simulator, shadows: Callable[..., Shadow]
) -> None:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.simulator import SimulatorError
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.session import new_session

    shadow = shadows("real")
    swe = get_domain("swe")
    session, _ = new_session(swe, Scenario("t", "t"))
    action = swe.parse_action(
        json.dumps({"name": "execute_bash", "arguments": {"command": "touch x"}}), session.scenario
    )
    with pytest.raises(SimulatorError, match="terminal twin"):
        simulator.send(session, action, shadow=shadow)
    assert session.turns == [] and session.twin is None
    assert TwinStatus.OK.value == "ok"
