"""Many environments over one engine (issue 30 item 2): requests in flight together and
bounded, transient failures asked again with backoff, cancellation that stops the requests,
and a local model's steps queued in order on its one thread.

The servers are real HTTP servers on 127.0.0.1: ``slotserver.SlotServer`` answers a fixed
number of requests at once after a fixed latency and sees a client go away;
``faultserver.FaultServer`` answers with chosen failures.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest
from faultserver import FaultServer, Reply, free_port
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env import (
    ActionError,
    EnvError,
    EnvironmentPool,
    RetryingEngine,
    RetryPolicy,
    StepResult,
)

QUICK = RetryPolicy(attempts=3, first_pause=0.01, max_pause=0.05)
WAIT_LIMIT_S = 30.0


def wait_for(condition, what: str) -> None:
    """Poll ``condition`` until it holds (a bound against a hung test, not a timing)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def results(outcomes: list[object]) -> list[StepResult]:
    assert all(isinstance(o, StepResult) for o in outcomes), outcomes
    return outcomes  # type: ignore[return-value]


def test_every_environment_s_step_is_in_flight_at_once() -> None:
    with (
        SlotServer(slots=12, latency=0.3) as server,
        EnvironmentPool("terminal", 12, engine=server.url) as pool,
    ):
        pool.reset()
        steps = results(pool.step([f"echo {i}\n" for i in range(12)]))
    assert [s.observation.text for s in steps] == [OBSERVATION] * 12
    assert all(s.status == "complete" and s.cost.generated_tokens == 64 for s in steps)
    assert server.max_in_flight == 12 and server.served == 12
    sent = sorted(int(re.search(r"echo (\d+)", p).group(1)) for p in server.prompts)
    assert sent == list(range(12))


def test_requests_in_flight_are_bounded_by_the_concurrency() -> None:
    with (
        SlotServer(slots=12, latency=0.1) as server,
        EnvironmentPool("terminal", 12, engine=server.url, concurrency=4) as pool,
    ):
        pool.reset()
        for _ in range(2):
            results(pool.step(["ls\n"] * 12))
    assert server.max_in_flight == 4 and server.served == 24


def test_async_batches_and_a_refused_action_in_the_middle() -> None:
    with (
        SlotServer(slots=8, latency=0.1) as server,
        EnvironmentPool("terminal", 4, engine=server.url) as pool,
    ):

        async def run() -> list[object]:
            await pool.areset()
            first = await pool.astep(["ls\n", "", None, "pwd\n"])
            second = await pool.astep(["ls\n"] * 4)
            return [*first, *second]

        outcomes = asyncio.run(run())
    assert isinstance(outcomes[1], ActionError) and "empty action" in str(outcomes[1])
    assert outcomes[2] is None
    assert [o.turn for o in outcomes if isinstance(o, StepResult)] == [1, 1, 2, 1, 1, 2]
    assert server.served == 6


def test_cancelling_a_batch_stops_the_requests_in_flight() -> None:
    with (
        SlotServer(slots=6, latency=120.0) as server,
        EnvironmentPool("terminal", 6, engine=server.url) as pool,
    ):
        pool.reset()

        async def run() -> None:
            task = asyncio.create_task(pool.astep(["sleep 1\n"] * 6))
            while server.in_flight < 6:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(run())
        wait_for(lambda: server.abandoned == 6, "the server to see every client go away")
        assert server.served == 0
        assert [env.turns[0].status for env in pool] == ["interrupted"] * 6


def test_cancel_stops_a_sync_batch_from_another_thread() -> None:
    with (
        SlotServer(slots=3, latency=120.0) as server,
        EnvironmentPool("terminal", 3, engine=server.url) as pool,
    ):
        pool.reset()
        done: list[object] = []
        stepping = threading.Thread(target=lambda: done.extend(pool.step(["sleep 9\n"] * 3)))
        stepping.start()
        wait_for(lambda: server.in_flight == 3, "three requests in flight")
        assert pool.cancel() == 3
        stepping.join(WAIT_LIMIT_S)
        assert [s.status for s in results(done)] == ["interrupted"] * 3
        wait_for(lambda: server.abandoned == 3, "the server to see the clients go away")


def test_transient_failures_are_asked_again_with_backoff() -> None:
    ok = Reply(
        reasoning=["fine"], content=["<predicted_observation>\n$ ok\n</predicted_observation>"]
    )
    with (
        FaultServer(default=ok) as server,
        EnvironmentPool("terminal", 1, engine=server.url, retry=QUICK) as pool,
    ):
        pool.reset()
        server.queue(Reply(status=503), Reply(status=429))
        (step,) = results(pool.step(["ls\n"]))
    assert step.status == "complete" and step.observation.text == "$ ok"
    assert step.cost.retries == 2 and len(server.chat_requests()) == 3
    assert len(pool[0].turns) == 1 and pool[0].turns[0].attempts == []


def test_a_server_that_keeps_failing_is_given_up_and_the_step_marked_failed() -> None:
    with (
        FaultServer(default=Reply(status=502)) as server,
        EnvironmentPool("terminal", 1, engine=server.url, retry=QUICK) as pool,
    ):
        pool.reset()
        (step,) = results(pool.step(["ls\n"]))
        assert step.status == "error" and step.failed
        assert "HTTP 502" in step.note and "(given up after 3 tries)" in step.note
        assert len(server.chat_requests()) == 3
        server.default = Reply(content=["<predicted_observation>\n$\n</predicted_observation>"])
        (later,) = results(pool.step(["ls\n"]))  # the episode goes on
    assert later.status == "complete" and later.turn == 2


def test_a_stream_cut_after_tokens_is_not_asked_again() -> None:
    cut = Reply(reasoning=["part of it"], content=["<predicted_obs"], cut_after=1)
    with (
        FaultServer(default=cut) as server,
        EnvironmentPool("terminal", 1, engine=server.url, retry=QUICK) as pool,
    ):
        pool.reset()
        (step,) = results(pool.step(["ls\n"]))
    assert step.status == "error" and step.cost.retries == 0
    assert len(server.chat_requests()) == 1
    assert pool[0].turns[0].reasoning == "part of it"  # the partial output is kept


def test_a_server_that_goes_away_and_comes_back_loses_no_step() -> None:
    port = free_port()
    first = SlotServer(slots=2, latency=0.05, port_wanted=port).start()
    patient = RetryPolicy(attempts=50, first_pause=0.02, max_pause=0.1)
    with EnvironmentPool("terminal", 2, engine=first.url, retry=patient) as pool:
        pool.reset()
        results(pool.step(["ls\n", "ls\n"]))
        first.stop()
        done: list[object] = []
        stepping = threading.Thread(target=lambda: done.extend(pool.step(["pwd\n", "pwd\n"])))
        stepping.start()
        engine = pool.simulator.engine
        assert isinstance(engine, RetryingEngine)
        wait_for(lambda: engine.total_retries >= 2, "both steps to meet the refusal")
        with SlotServer(slots=2, latency=0.05, port_wanted=port) as second:
            stepping.join(WAIT_LIMIT_S)
            steps = results(done)
        assert [s.status for s in steps] == ["complete", "complete"]
        assert all(s.cost.retries >= 1 for s in steps) and second.served == 2
        assert [len(env.turns) for env in pool] == [2, 2]


def test_cancel_ends_a_backoff_pause_at_once() -> None:
    slow = RetryPolicy(attempts=5, first_pause=600.0, max_pause=600.0)
    with (
        FaultServer(default=Reply(status=503)) as server,
        EnvironmentPool("terminal", 1, engine=server.url, retry=slow) as pool,
    ):
        pool.reset()
        done: list[object] = []
        stepping = threading.Thread(target=lambda: done.extend(pool.step(["ls\n"])))
        stepping.start()
        wait_for(lambda: len(server.chat_requests()) == 1, "the first request")
        wait_for(lambda: pool.cancel() == 1, "the step to be cancellable")
        stepping.join(WAIT_LIMIT_S)
        (step,) = results(done)
    assert step.status == "interrupted" and len(server.chat_requests()) == 1


def test_a_local_model_runs_the_pool_s_steps_in_order(scripted_model, llama_engine) -> None:
    from test_engine_llama import SCRIPT

    from agentworld_tui.engines.base import GenerationParams

    engine = llama_engine(scripted_model(SCRIPT), n_ctx=8192)
    with EnvironmentPool(
        "terminal", 3, engine=engine, params=GenerationParams(temperature=0.0)
    ) as pool:
        pool.reset()
        pending = [env.begin(f"echo {i}\n") for i, env in enumerate(pool)]
        owners = ["env 0", "env 1", "env 2"]
        waiting = pool.simulator.waiting()
        assert waiting == owners[len(owners) - len(waiting) :]
        steps = [p.wait() for p in pending]
        started = [p.run.started_at for p in pending]
    assert all(s.status == "complete" for s in steps)
    assert started == sorted(started) and len(set(started)) == 3


def test_a_pool_saves_each_environment_to_its_own_session_file(tmp_path: Path) -> None:
    from agentworld_tui.world.workspace import load_workspace

    with (
        SlotServer(slots=3, latency=0.01) as server,
        EnvironmentPool("terminal", 3, engine=server.url, session_dir=tmp_path) as pool,
    ):
        pool.reset()
        results(pool.step(["ls\n"] * 3))
    files = sorted(tmp_path.glob("env-*.json"))
    assert [f.name for f in files] == ["env-0000.json", "env-0001.json", "env-0002.json"]
    assert all(load_workspace(f).tabs[0].turns[0].observation == OBSERVATION for f in files)


def test_a_pool_needs_one_engine_and_one_environment_at_least() -> None:
    with pytest.raises(EnvError, match="at least one environment"):
        EnvironmentPool("terminal", 0, engine="http://127.0.0.1:9/v1")
    with pytest.raises(EnvError, match="unknown domain"):
        EnvironmentPool("nope", 2, engine="http://127.0.0.1:9/v1")


def test_a_pool_whose_engine_cannot_load_says_so_once_blocking_or_async() -> None:
    """``step`` and ``astep`` are one implementation: a model that cannot be loaded is
    one EnvError from either, not a refusal per environment from one of them."""
    with EnvironmentPool("terminal", 3, engine=f"http://127.0.0.1:{free_port()}/v1") as pool:
        with pytest.raises(EnvError, match="connection refused"):
            pool.step(["ls\n", "pwd\n", None])
        with pytest.raises(EnvError, match="connection refused"):
            asyncio.run(pool.astep(["ls\n", "pwd\n", None]))
        assert not any(env.busy for env in pool) and pool[0].steps == 0


def test_every_client_shares_one_tls_context() -> None:
    """A server's engine makes one HTTP client from its load to its unload; loading the
    certificate store for each one cost tens of milliseconds of CPU (when a client was
    made for every request, that capped a pool's steps a second far below a fast
    server's: bench/env.py)."""
    from agentworld_tui.engines.remote import RemoteEngine

    engine = RemoteEngine("http://127.0.0.1:9/v1")
    contexts = []
    for _ in range(3):
        client = engine._client()
        assert engine._client() is client  # every request of the engine goes through it
        contexts.append(client._client._transport._pool._ssl_context)
        engine.unload()  # closes it: the next request makes another
    contexts.append(
        RemoteEngine("https://127.0.0.1:9/v1")._client()._client._transport._pool._ssl_context
    )
    assert all(c is contexts[0] for c in contexts)
