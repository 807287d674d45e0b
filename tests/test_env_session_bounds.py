"""``env serve`` (issue 38): a hostile or careless OpenEnv client costs only its own session.

A session that sends nothing for ``--session-idle-timeout`` is closed and lets go of its
environment and its socket; past ``--max-sessions`` a new one is refused with a clear
message; sessions dropped without a close, or left open, leave descriptors and memory as
they were; a costly action is checked off the event loop, bounded in time, while the other
sessions step. The server is the real application (``make_app``) under uvicorn in the
test's loop, its world model a real OpenAI-compatible server (``slotserver.SlotServer``),
its clients aiohttp WebSockets speaking OpenEnv's messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn
from slotserver import SlotServer

from agentworld_tui.agents.env import load_simulator, open_simulator
from agentworld_tui.agents.env.openenv_server import (
    SESSION_IDLE_SECONDS,
    OpenEnvSimulation,
    ServeConfig,
    make_app,
)
from agentworld_tui.cli.env import SESSION_IDLE_SECONDS as CLI_DEFAULT

HOSTILE_TOOLS = [
    {
        "name": "lookup",
        "description": "Look a name up.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^(a|aa)+$"}},
        },
    },
    {"name": "read_note", "inputSchema": {"type": "object"}},
]
DROPPED = """
import asyncio, os, sys
import aiohttp

async def one(http, url, held):
    ws = await http.ws_connect(url)
    held.append(ws)
    await ws.send_json({"type": "reset", "data": {}})
    await ws.receive_json()
    await ws.send_json({"type": "step", "data": {"action": "ls\\n"}})
    return (await ws.receive_json())["type"] == "observation"

async def main(url, count):
    held = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        done = await asyncio.gather(*(one(http, url, held) for _ in range(count)))
        print(sum(done), flush=True)
        os._exit(0)  # no close message, no close frame: the sockets just go

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def env_serving(**config: Any) -> AsyncIterator[str]:
    """The OpenEnv application on 127.0.0.1 in this loop; yields its WebSocket URL."""
    with SlotServer(slots=64, latency=0.0) as world:
        simulator = open_simulator(world.url, concurrency=64)
        load_simulator(simulator)
        app = make_app(ServeConfig(simulator=simulator, **{"domain": "terminal", **config}))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = _Server(uvicorn.Config(app, log_config=None, access_log=False))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        try:
            while not server.started:
                assert not serving.done(), serving.exception()
                await asyncio.sleep(0.02)
            yield f"ws://127.0.0.1:{sock.getsockname()[1]}/ws"
        finally:
            server.should_exit = True
            await serving
            sock.close()
            simulator.close()


async def send(ws: aiohttp.ClientWebSocketResponse, kind: str, data: Any) -> dict[str, Any]:
    await ws.send_json({"type": kind, "data": data})
    answer: dict[str, Any] = await ws.receive_json(timeout=30)
    return answer


async def until(condition: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.05)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def live_sessions() -> int:
    """The simulations alive (by exact type: ``isinstance`` on a weak proxy whose object
    is gone, which ``gc.get_objects`` may hand out, raises ReferenceError)."""
    return sum(type(o) is OpenEnvSimulation for o in gc.get_objects())


def test_the_idle_time_is_one_setting_with_one_default() -> None:
    assert CLI_DEFAULT == SESSION_IDLE_SECONDS == 1800.0


async def test_a_silent_session_is_closed_and_its_place_given_to_another() -> None:
    async with (
        env_serving(max_sessions=1, session_idle_seconds=1.0) as url,
        aiohttp.ClientSession() as http,
    ):
        first = await http.ws_connect(url)
        await send(first, "reset", {})
        stepped = await send(first, "step", {"action": "ls\n"})
        async with http.ws_connect(url) as second:  # one session at most: refused
            refused = await send(second, "reset", {})
        closing = await first.receive(timeout=10)  # said nothing: closed after 1 s
        third = await http.ws_connect(url)
        again = await send(third, "reset", {})
        await third.close()
    assert stepped["data"]["observation"]["status"] == "complete"
    assert refused["type"] == "error"
    assert refused["data"]["message"].startswith("Server at capacity: 1/1 sessions active")
    assert closing.type == aiohttp.WSMsgType.CLOSE
    assert (closing.data, closing.extra) == (1001, "idle for 1 s")
    assert again["type"] == "observation"


async def test_sessions_dropped_or_left_open_leave_descriptors_and_memory_as_they_were() -> None:
    """1,000 sessions reset, stepped and dropped without a close (the client's process
    ends), then 100 left open and silent until their idle time ends them."""
    async with (
        env_serving(max_sessions=2000, session_idle_seconds=2.0) as url,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):

        def dropped(count: int) -> int:
            done = subprocess.run(
                [sys.executable, "-c", DROPPED, url, str(count)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return int(done.stdout)

        assert await asyncio.to_thread(dropped, 20) == 20  # a warm-up: imports, pools, caches
        await until(lambda: live_sessions() == 0)
        gc.collect()
        descriptors, objects = open_descriptors(), len(gc.get_objects())
        stepped = 0
        for _batch in range(5):
            stepped += await asyncio.to_thread(dropped, 200)
        await until(lambda: live_sessions() == 0)
        silent = await asyncio.gather(*(http.ws_connect(url) for _ in range(100)))
        await asyncio.gather(*(send(ws, "reset", {}) for ws in silent))
        held = open_descriptors()
        closes = await asyncio.gather(*(ws.receive(timeout=30) for ws in silent))
        said = {(m.type, m.data, m.extra) for m in closes}
        del silent, closes  # this side's objects are not the server's
        await until(lambda: live_sessions() == 0 and open_descriptors() <= descriptors + 5)
        await asyncio.sleep(0.2)
        gc.collect()
        left, kept = open_descriptors(), len(gc.get_objects()) - objects
    assert stepped == 1000
    assert held >= descriptors + 100
    assert said == {(aiohttp.WSMsgType.CLOSE, 1001, "idle for 2 s")}
    assert left <= descriptors + 5
    assert kept < 3000, f"{kept} objects kept"


async def test_a_costly_action_is_refused_in_bounded_time_while_the_others_step(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(HOSTILE_TOOLS), encoding="utf-8")
    from agentworld_tui.agents.env.scenarios import resolve_domain, resolve_scenario

    scenario = resolve_scenario(resolve_domain("mcp"), str(tools))
    async with (
        env_serving(domain="mcp", scenario=scenario) as url,
        aiohttp.ClientSession() as http,
        http.ws_connect(url) as hostile,
        http.ws_connect(url) as other,
    ):
        await send(hostile, "reset", {})
        await send(other, "reset", {})
        loop = asyncio.get_running_loop()
        began = loop.time()
        costly = {"name": "lookup", "arguments": {"name": "a" * 80 + "!"}}
        check = asyncio.ensure_future(send(hostile, "step", {"action": costly}))
        answered = 0
        while not check.done():
            plain = {"name": "read_note", "arguments": {}}
            step = await send(other, "step", {"action": plain})
            assert step["data"]["observation"]["status"] == "complete", step
            answered += 1
            await send(other, "reset", {})  # short prompts: each step costs the same
        took = loop.time() - began
        refused = check.result()["data"]["observation"]
    assert refused["status"] == "refused"
    assert refused["error"] == (
        "lookup: the arguments could not be checked within 2 s (a pattern or a uniqueness "
        "rule of its schema costs too much for them)"
    )
    assert 1.9 < took < 6, took  # a deadline, not a measurement: bench/env_hostile.py measures
    assert answered > 10, answered  # the other session stepped all along
