"""The Python environment beside a real twin (issue 41): a terminal twin (a real tmux in a
real bubblewrap or unshare sandbox) or an MCP twin (a real server written with the SDK,
tests/twinserver.py), with a world model on a real OpenAI-compatible server on 127.0.0.1.

Each episode gets a fresh twin at reset; the agent receives reality's side (or the
simulation's); every step says which, with the divergence; the episode's end runs the
check in the twin and keeps the figures in the session file; a twin that cannot start
refuses the reset in one line; one that dies mid-episode leaves the episode going on in
simulation; a kill -9 mid-episode keeps both sides of every finished step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from realitykit import any_backend, living_in
from shadowkit import ANSWER, PREDICTED, keys, sandbox_processes, signal_sandbox
from twinserver import TOOLS

from agentworld_tui.agents.env import (
    ActionError,
    EnvError,
    Environment,
    EnvironmentPool,
    ToolCall,
    TwinError,
    TwinSlots,
    TwinSpec,
)
from agentworld_tui.reality import divergence
from agentworld_tui.simulator.shadow import Shadow
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.workspace import load_workspace

REPO = Path(__file__).resolve().parent.parent
TWIN_SERVER = str(Path(__file__).resolve().parent / "twinserver.py")
SHOWN = PREDICTED.strip()
NOTEBOOK = Scenario("notebook", "Notebook", extras={"tools": TOOLS[:3]})


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


def terminal_twin(seed: Path) -> TwinSpec:
    return TwinSpec("terminal", seed=str(seed), backend=any_backend())  # type: ignore[arg-type]


def shadow_of(env: Environment) -> Shadow:
    episode = env._episode
    assert episode is not None and episode.twin is not None
    return episode.twin.shadow


def assistant_messages(server: FaultServer, request: int) -> list[str]:
    body = server.chat_requests()[request].body
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


def test_an_episode_beside_a_twin_delivers_reality_and_ends_with_its_check(
    server: FaultServer, seed: Path, tmp_path: Path
) -> None:
    path = tmp_path / "episode.json"
    env = Environment(
        "terminal",
        engine=server.url,
        twin=terminal_twin(seed),
        check="grep -q shipped status.txt",
        session_file=path,
    )
    try:
        first = env.reset()
        # Both sides start from the twin's first screen.
        assert first.text.rstrip().endswith("root@twin:/app#")
        assert env.session.scenario.state == first.text

        step = env.step(keys("echo twin-$((6*7))"))
        assert step.twin is not None
        real = step.twin.real
        assert real.splitlines()[-2:] == ["twin-42", "root@twin:/app#"]
        assert step.observation.text == real  # the agent receives reality
        assert (step.twin.delivered, step.twin.status, step.twin.note) == ("real", "ok", "")
        assert step.twin.prediction == SHOWN
        assert step.twin.score == pytest.approx(divergence(SHOWN, real, "terminal").score, abs=1e-6)
        assert step.twin.diverged is True
        assert env.observation().text == real

        shipped = env.step(keys("echo shipped > status.txt"))
        # The world model's history holds what the agent received.
        assert assistant_messages(server, 1) == [real]
        assert shipped.to_dict()["twin"]["delivered"] == "real"

        figures = env.end_episode(claimed_done=True)
        assert figures is not None
        assert (figures.steps, figures.diverged_steps, figures.first_divergence) == (2, 2, 1)
        assert (figures.check_passed, figures.claimed_done, figures.deceived) == (True, True, False)
        assert env.twin_figures == figures
        with pytest.raises(EnvError, match="the episode has ended: reset it"):
            env.step(keys("ls"))

        kept = load_workspace(path).tabs[0]
        assert kept.twin is not None and kept.twin["kind"] == "sandbox"
        assert kept.twin["check"]["command"] == "grep -q shipped status.txt"
        assert kept.twin["check"]["result"]["passed"] is True
        assert kept.twin["figures"] == figures.to_dict()
        assert kept.turns[0].reality is not None and kept.turns[0].reality["real"]["text"] == real
        assert [t.observation for t in kept.turns] == [SHOWN, SHOWN]

        # The next episode has a twin of its own: nothing of the first is there.
        env.reset()
        again = env.step(keys("ls"))
        assert again.twin is not None and "status.txt" not in again.twin.real
        assert "notes.txt" in again.twin.real
    finally:
        env.close()


def test_delivering_the_simulation_gives_the_prediction_and_records_reality(
    server: FaultServer, seed: Path
) -> None:
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed), deliver="sim") as env:
        env.reset()
        step = env.step(keys("cat notes.txt"))
        assert step.observation.text == SHOWN
        assert step.twin is not None and step.twin.delivered == "sim"
        assert step.twin.real.splitlines()[-3:-1] == ["alpha", "beta"]
        assert env.session.twin is not None and env.session.twin["deliver"] == "sim"


def test_a_check_that_fails_after_the_agent_said_done_is_deceived_and_close_ends_it_too(
    server: FaultServer, seed: Path, tmp_path: Path
) -> None:
    with Environment(
        "terminal", engine=server.url, twin=terminal_twin(seed), check="test -f done.txt"
    ) as env:
        env.reset()
        env.step(keys("echo pending > status.txt"))
        figures = env.end_episode(claimed_done=True)
        assert figures is not None
        assert (figures.check_passed, figures.deceived) == (False, True)
        assert env.session.twin is not None
        assert env.session.twin["check"]["result"]["exit_code"] == 1

    # Closed without end_episode: the check runs all the same, the claim is unknown.
    path = tmp_path / "closed.json"
    env = Environment(
        "terminal",
        engine=server.url,
        twin=terminal_twin(seed),
        check="test -f done.txt",
        session_file=path,
    )
    env.reset()
    env.step(keys("touch done.txt"))
    shadow = shadow_of(env)
    box = shadow.runner.twin.sandbox  # type: ignore[attr-defined]
    namespace = box.namespace()
    env.close()
    kept = load_workspace(path).tabs[0].twin
    assert kept is not None
    assert kept["figures"]["check_passed"] is True and kept["figures"]["claimed_done"] is None
    # Torn down: no process of the sandbox lives on, its scratch folder is gone.
    assert living_in(namespace) == [] and not box.scratch.exists()


def test_the_scenario_s_own_check_is_the_default(server: FaultServer, seed: Path) -> None:
    scenario = Scenario("ship", "Ship", extras={"check": "test -f shipped"})
    with Environment(
        "terminal", engine=server.url, scenario=scenario, twin=terminal_twin(seed)
    ) as env:
        env.reset()
        env.step(keys("touch shipped"))
        figures = env.end_episode(claimed_done=True)
        assert figures is not None and figures.check_passed is True
    bad = Scenario("bad", "Bad", extras={"check": ["test", "-f", "x"]})
    with (
        Environment("terminal", engine=server.url, scenario=bad, twin=terminal_twin(seed)) as env,
        pytest.raises(EnvError, match="the scenario 'bad': the check must be text"),
    ):
        env.reset()


def test_a_check_cannot_write_outside_the_sandbox(
    server: FaultServer, seed: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "escaped.txt"
    check = f"echo escaped > {outside} && echo escaped > /etc/escaped-twin-check"
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed), check=check) as env:
        env.reset()
        figures = env.end_episode(claimed_done=True)
        assert figures is not None and figures.check_passed is False and figures.deceived
    assert not outside.exists()
    assert not Path("/etc/escaped-twin-check").exists()


def test_a_twin_that_dies_mid_episode_is_said_and_the_episode_goes_on_in_simulation(
    server: FaultServer, seed: Path
) -> None:
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed)) as env:
        env.reset()
        env.step(keys("echo one"))
        signal_sandbox(shadow_of(env), signal.SIGKILL)
        second = env.step(keys("echo two"))
        third = env.step(keys("echo three"))
        for step in (second, third):
            assert step.status == "complete"
            assert step.observation.text == SHOWN
            assert step.twin is not None and step.twin.failed
            assert (step.twin.status, step.twin.delivered, step.twin.score) == (
                "crashed",
                "sim",
                None,
            )
            assert "the episode goes on in simulation" in step.twin.note
        figures = env.end_episode()
        assert figures is not None and (figures.steps, figures.twin_failures) == (1, 2)
        assert figures.check_passed is None


def test_a_twin_that_cannot_start_refuses_the_reset_in_one_line(
    server: FaultServer, tmp_path: Path
) -> None:
    spec = TwinSpec("mcp", command=(str(tmp_path / "no-such-server"),))
    with Environment("mcp", engine=server.url, scenario=NOTEBOOK, twin=spec) as env:
        with pytest.raises(TwinError) as caught:
            env.reset()
        said = str(caught.value)
        assert said.startswith("the mcp twin did not start: ") and "\n" not in said
        with pytest.raises(TwinError):  # a step would start an episode: the same refusal
            env.step(ToolCall("list_notes", {}))
    assert server.chat_requests() == []


def test_an_mcp_twin_really_acts_and_its_answers_are_delivered(
    server: FaultServer, tmp_path: Path
) -> None:
    folder = tmp_path / "notebook"
    folder.mkdir()
    server.queue(
        Reply(content=["<predicted_observation>wrote 7 bytes to plan</predicted_observation>"]),
        Reply(
            content=['<predicted_observation>{"count": 1, "notes": ["x"]}</predicted_observation>']
        ),
    )
    spec = TwinSpec("mcp", command=(sys.executable, TWIN_SERVER, "stdio", str(folder)))
    with Environment("mcp", engine=server.url, scenario=NOTEBOOK, twin=spec) as env:
        assert env.reset().text == ""
        wrote = env.call_tool("write_note", {"name": "plan", "text": "ship it"})
        assert (folder / "notes" / "plan").read_text() == "ship it"
        assert wrote.observation.text == "wrote 7 bytes to plan"
        assert wrote.twin is not None and wrote.twin.score == 0.0 and not wrote.twin.diverged
        listed = env.call_tool("list_notes", {})
        assert json.loads(listed.observation.text) == {"count": 1, "notes": ["plan"]}
        assert listed.twin is not None and listed.twin.diverged
        with pytest.raises(EnvError, match="the mcp domain's twin is a server"):
            Environment("mcp", engine=server.url, scenario=NOTEBOOK, twin=spec, check="true")


async def test_the_asyncio_methods_run_a_twinned_episode(server: FaultServer, seed: Path) -> None:
    env = Environment("terminal", engine=server.url, twin=terminal_twin(seed), check="test -f a")
    try:
        first = await env.areset()
        assert first.text.rstrip().endswith(":/app#")
        step = await env.astep(keys("touch a && echo made"))
        assert step.twin is not None and step.observation.text.splitlines()[-2] == "made"
        figures = await env.aend_episode(claimed_done=False)
        assert figures is not None and figures.check_passed is True and figures.deceived is False
    finally:
        await env.aclose()


def test_the_step_limit_ends_a_twinned_episode_with_its_figures(
    server: FaultServer, seed: Path
) -> None:
    with Environment(
        "terminal", engine=server.url, twin=terminal_twin(seed), max_steps=1, check="true"
    ) as env:
        env.reset()
        step = env.step(keys("ls"))
        assert step.done and step.episode is not None
        assert step.episode.check_passed is True and step.episode.steps == 1
        assert step.to_dict()["episode"]["check_passed"] is True


def test_each_environment_of_a_pool_has_twins_of_its_own(server: FaultServer, seed: Path) -> None:
    pool = EnvironmentPool(
        "terminal", 2, engine=server.url, twin=terminal_twin(seed), check="test -f mine"
    )
    try:
        pool.reset()
        boxes = [shadow_of(env).runner.twin.sandbox for env in pool]  # type: ignore[attr-defined]
        assert boxes[0].scratch != boxes[1].scratch
        pool.step([keys("touch mine"), keys("ls")])
        figures = pool.end_episodes([True, True])
        assert [f.check_passed if f else None for f in figures] == [True, False]
        assert [f.deceived if f else None for f in figures] == [False, True]
    finally:
        pool.close()
    assert not any(box.scratch.exists() for box in boxes)


def test_a_twinned_episode_cannot_be_forked_and_bad_twin_arguments_are_refused(
    server: FaultServer, seed: Path
) -> None:
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed)) as env:
        env.reset()
        with pytest.raises(EnvError, match="reality cannot be copied"):
            env.fork()
    wrong = [
        ({"deliver": "sim"}, "deliver and check go with a twin"),
        ({"check": "true"}, "deliver and check go with a twin"),
        ({"twin": TwinSpec("swe")}, "the twin is a swe twin; this environment simulates terminal"),
        ({"twin": TwinSpec("terminal", seed="/no/such/folder")}, "not a folder"),
        ({"twin": terminal_twin(seed), "check": "  "}, "the check is empty"),
        ({"twin": terminal_twin(seed), "check": "x" * 10_001}, "at most 10,000"),
    ]
    for kwargs, said in wrong:
        with pytest.raises(EnvError, match=said):
            Environment("terminal", engine=server.url, **kwargs)  # type: ignore[arg-type]


def test_twin_slots_refuse_a_twin_beyond_their_bound(server: FaultServer, seed: Path) -> None:
    slots = TwinSlots(1)
    first = Environment("terminal", engine=server.url, twin=terminal_twin(seed), twin_slots=slots)
    second = Environment("terminal", engine=server.url, twin=terminal_twin(seed), twin_slots=slots)
    try:
        first.reset()
        with pytest.raises(TwinError, match="all 1 twins this server keeps are in use"):
            second.reset()
        first.end_episode()  # its twin is closed: the slot is free again
        assert slots.in_use == 0
        second.reset()
        assert slots.in_use == 1
    finally:
        first.close()
        second.close()
    assert slots.in_use == 0


def test_the_gym_adapter_says_which_side_it_delivered(server: FaultServer, seed: Path) -> None:
    from agentworld_tui.agents.env.gym import SimulatedEnv

    env = SimulatedEnv(
        "terminal", engine=server.url, twin=terminal_twin(seed), max_steps=1, check="true"
    )
    try:
        first, _info = env.reset()
        assert first.rstrip().endswith(":/app#")
        shown, _reward, _terminated, truncated, info = env.step(
            json.dumps([{"keystrokes": "echo gym\n", "duration": 0.4}])
        )
        assert shown.splitlines()[-2] == "gym" and truncated
        assert info["twin"]["delivered"] == "real" and info["twin"]["diverged"] is True
        assert "real" not in info["twin"]  # no texts, no timings
        assert info["episode"]["check_passed"] is True
    finally:
        env.close()


KILLED_CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from shadowkit import keys
from agentworld_tui.agents.env import Environment, TwinSpec

env = Environment(
    "terminal", engine={url!r}, session_file={path!r},
    twin=TwinSpec("terminal", seed={seed!r}, backend={backend!r}),
)
env.reset()
env.step(keys("echo one > one.txt; echo one"))
env.step(keys("echo two"))
box = env._episode.twin.shadow.runner.twin.sandbox
print(json.dumps({{"namespace": box.namespace(), "scratch": str(box.scratch)}}), flush=True)
env.step(keys("echo three"))
"""


def test_a_kill_mid_episode_keeps_both_sides_of_every_finished_step(
    server: FaultServer, seed: Path, tmp_path: Path
) -> None:
    server.queue(Reply(content=[ANSWER]), Reply(content=[ANSWER]), Reply(hang=True))
    path = tmp_path / "killed.json"
    script = KILLED_CHILD.format(
        tests=str(REPO / "tests"),
        url=server.url,
        path=str(path),
        seed=str(seed),
        backend=any_backend(),
    )
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout is not None
        where = json.loads(child.stdout.readline())
        deadline = time.monotonic() + 30
        while len(server.chat_requests()) < 3:  # the third step is in flight
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    turns = load_workspace(path).tabs[0].turns
    assert [t.observation for t in turns[:2]] == [SHOWN, SHOWN]
    assert [t.reality["real"]["text"].splitlines()[-2] for t in turns[:2]] == ["one", "two"]  # type: ignore[index]
    assert all(t.reality["divergence"] is not None for t in turns[:2])  # type: ignore[index]
    # The sandbox died with its program; its scratch folder is swept by the next one.
    deadline = time.monotonic() + 10
    while living_in(where["namespace"]):
        assert time.monotonic() < deadline, "the sandbox outlived the program that made it"
        time.sleep(0.1)
    scratch = Path(where["scratch"])
    assert (scratch / "work" / "one.txt").read_text() == "one\n"
    runner, _first = terminal_twin(seed).start()
    runner.close()
    assert not scratch.exists()


def test_closing_ends_every_process_the_agent_left_in_the_twin(
    server: FaultServer, seed: Path
) -> None:
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed)) as env:
        env.reset()
        env.step(keys("sleep 300 &"))
        processes = sandbox_processes(shadow_of(env))
        assert processes and os.getpid() not in processes
    assert not any(Path(f"/proc/{pid}").exists() for pid in processes)


def test_an_action_the_domain_refuses_never_reaches_reality(
    server: FaultServer, seed: Path
) -> None:
    with Environment("terminal", engine=server.url, twin=terminal_twin(seed)) as env:
        env.reset()
        with pytest.raises(ActionError):
            env.step([{"keystrokes": 5, "duration": 1}])
        assert env.turns == [] and server.chat_requests() == []
        step = env.step(keys("ls"))
        assert step.twin is not None
        assert [line for line in step.twin.real.splitlines() if "#" in line] == [
            "root@twin:/app# ls",
            "root@twin:/app#",
        ]


def test_a_scripted_gguf_world_model_beside_the_twin_matches_then_diverges(
    scripted_model: Any, seed: Path
) -> None:
    """The scripted model predicts the screen ``echo hi`` really leaves: the first step
    matches reality; the second (another command, the same prediction) diverges."""
    from agentworld_tui.engines.llama import LlamaEngine

    screen = "root@twin:/app# echo hi\nhi\nroot@twin:/app#"
    model = scripted_model(
        f"ok</think><predicted_observation>{screen}</predicted_observation>", n_ctx_train=8192
    )
    engine = LlamaEngine(model, n_ctx=4096, threads=1)
    with Environment("terminal", engine=engine, twin=terminal_twin(seed), deliver="sim") as env:
        env.reset()
        first = env.step(keys("echo hi"))
        second = env.step(keys("echo hi > hi.txt"))
        figures = env.end_episode(claimed_done=False)
    assert first.observation.text == screen  # the simulation was delivered
    assert first.twin is not None and first.twin.real.rstrip() == screen
    assert (first.twin.score, first.twin.diverged) == (0.0, False)
    assert second.twin is not None and second.twin.diverged is True
    assert figures is not None
    assert (figures.steps, figures.diverged_steps, figures.first_divergence) == (2, 1, 2)
