"""The simulator service every front-end drives, on real engines: a scripted GGUF model in
llama.cpp, and a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply

from agentworld_tui.domains import get_domain
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.simulator import BUSY, Simulator, SimulatorError
from agentworld_tui.simulator.turn import NOT_STARTED_NOTE
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import Workspace, load_workspace

ANSWER = (
    "Listing.</think><predicted_observation>a.txt  b.txt\nroot@box:/app# </predicted_observation>"
)
PARAMS = GenerationParams(temperature=0.0, max_tokens=256)
TERMINAL = get_domain("terminal")


def a_session() -> Session:
    session, _ = new_session(TERMINAL, Scenario("t", "Test", state="root@box:/app# "))
    return session


def ls(session: Session) -> Any:
    return TERMINAL.parse_action("ls", session.scenario)


@pytest.fixture
def local(scripted_model: Callable[..., Path]) -> Any:
    from agentworld_tui.engines.llama import LlamaEngine

    engine = LlamaEngine(scripted_model(ANSWER, n_ctx_train=8192), n_ctx=4096, threads=1)
    simulator = Simulator(engine, PARAMS)
    assert simulator.load_and_wait() is None
    yield simulator
    simulator.close()


def test_the_engine_thread_never_writes_the_session(
    local: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """World state has one owner thread: the turn is recorded, and saved, on the thread
    that takes its events, never on the engine's."""
    writers: list[str] = []
    finish = Session.finish_turn

    def recorded(self: Session, *args: Any, **kwargs: Any) -> None:
        writers.append(threading.current_thread().name)
        finish(self, *args, **kwargs)

    monkeypatch.setattr(Session, "finish_turn", recorded)
    saved: list[str] = []
    session = a_session()
    run = local.send(
        session, ls(session), save=lambda s: saved.append(threading.current_thread().name)
    )
    done = run.wait()
    me = threading.current_thread().name
    assert writers == [me] and saved == [me]
    assert run.turn.status == "complete" and run.turn.observation.startswith("a.txt")
    assert done.raw.startswith("Listing.</think>")  # the output as generated is kept
    assert not local.busy(session)


def test_a_turn_is_saved_before_its_end_is_handed_out(local: Simulator) -> None:
    """What a front-end shows is on disk by then (a kill as the answer appears loses
    nothing)."""
    order: list[str] = []
    session = a_session()
    run = local.send(session, ls(session), save=lambda s: order.append("saved") or None)
    for event in run.events():
        order.append(type(event).__name__)
    assert order[-2:] == ["saved", "Finished"]


async def test_an_asyncio_caller_awaits_the_recorded_turn(local: Simulator) -> None:
    session = a_session()
    run = local.send(session, ls(session))
    finished = await run.result()
    assert finished.observation.startswith("a.txt")
    assert session.turns[-1].status == "complete"


def test_a_busy_session_cannot_start_another_turn(local: Simulator) -> None:
    session = a_session()
    run = local.send(session, ls(session))
    with pytest.raises(SimulatorError, match=BUSY):
        local.send(session, ls(session))
    run.wait()
    local.send(session, ls(session)).wait()  # free again
    assert [t.status for t in session.turns] == ["complete", "complete"]


def test_no_engine_says_why_and_begins_nothing() -> None:
    simulator = Simulator(None, PARAMS, engine_error="no model configured")
    session = a_session()
    with pytest.raises(SimulatorError, match="no model configured"):
        simulator.send(session, ls(session))
    assert session.turns == []
    simulator.close()


def test_a_turn_stopped_in_the_queue_is_kept_and_says_so(tmp_path: Path) -> None:
    """A server turn that never answers holds the queue (concurrency 1); the turn behind
    it, stopped while it waits, is recorded as stopped before it started, and saved."""
    with FaultServer() as server:
        server.queue(Reply(hang=True))
        simulator = Simulator(RemoteEngine(server.url), PARAMS, concurrency=1)
        assert simulator.load_and_wait() is None
        first, second = a_session(), a_session()
        path = tmp_path / "second.json"
        workspace = Workspace([second], path=path)
        holding = simulator.send(first, ls(first))
        waiting = simulator.send(second, ls(second), save=lambda _s: _saved(workspace))
        waiting.stop()
        holding.stop()
        waiting.wait()
        holding.wait()
        simulator.close()
    assert (second.turns[0].status, second.turns[0].note) == ("interrupted", NOT_STARTED_NOTE)
    assert first.turns[0].status == "interrupted"
    saved = load_workspace(path).tabs[0].turns[0]
    assert (saved.status, saved.note) == ("interrupted", NOT_STARTED_NOTE)


def _saved(workspace: Workspace) -> str | None:
    workspace.save()
    workspace.close()
    return None


def test_turns_on_a_server_are_in_flight_at_once() -> None:
    """With a server, turns of different sessions run concurrently (the server batches):
    every one of them reaches it before any has ended."""
    with FaultServer() as server:
        server.queue(*(Reply(content=["a"], hang_after=1) for _ in range(3)))
        simulator = Simulator(RemoteEngine(server.url), PARAMS, concurrency=3)
        assert simulator.load_and_wait() is None
        sessions = [a_session() for _ in range(3)]
        runs = [simulator.send(s, ls(s)) for s in sessions]
        deadline = time.monotonic() + 20
        while len(server.chat_requests()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(server.chat_requests()) == 3
        assert simulator.queue.in_flight() == 3
        for run in runs:
            run.stop()
        for run in runs:
            run.wait()
        simulator.close()
    assert [s.turns[0].status for s in sessions] == ["interrupted"] * 3


def test_a_local_model_runs_the_sessions_turns_one_at_a_time_in_order(
    local: Simulator,
) -> None:
    sessions = [a_session() for _ in range(3)]
    runs = [local.send(s, ls(s), owner=f"tab {i}") for i, s in enumerate(sessions)]
    assert local.waiting()[-2:] == ["tab 1", "tab 2"] or local.waiting()[-1:] == ["tab 2"]
    starts = []
    for run in runs:
        run.wait()
        starts.append(run.started_at)
    assert starts == sorted(starts)
    assert all(s.turns[0].status == "complete" for s in sessions)


async def test_a_turn_retried_keeps_its_earlier_answer(local: Simulator) -> None:
    session = a_session()
    await local.send(session, ls(session)).result()
    await local.retry(session).result()
    turn = session.turns[0]
    assert turn.status == "complete" and len(turn.attempts) == 1
    assert turn.attempts[0]["raw"].startswith("Listing.")


def test_loading_a_missing_model_is_the_simulators_problem(tmp_path: Path) -> None:
    from agentworld_tui.engines.llama import LlamaEngine

    simulator = Simulator(LlamaEngine(tmp_path / "none.gguf"), PARAMS)
    error = simulator.load_and_wait()
    assert error is not None and "model file not found" in error
    assert simulator.problem() == error
    simulator.close()


def test_asyncio_runs_many_sessions_over_one_server() -> None:
    """An asyncio front-end (an agent server) awaits many turns at once."""
    with FaultServer() as server:
        simulator = Simulator(RemoteEngine(server.url), PARAMS, concurrency=4)
        assert simulator.load_and_wait() is None

        async def many() -> list[str]:
            sessions = [a_session() for _ in range(6)]
            runs = [simulator.send(s, ls(s)) for s in sessions]
            done = await asyncio.gather(*(run.result() for run in runs))
            return [d.stats.stop_reason for d in done]

        assert asyncio.run(many()) == ["eos"] * 6
        simulator.close()
