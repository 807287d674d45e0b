"""``agentworld env serve`` (issue 30 item 3): OpenEnv's own clients complete episodes.

The server is the real command in a subprocess, its world model a real OpenAI-compatible
server on 127.0.0.1 (``slotserver.SlotServer``); the clients are openenv-core's
``GenericEnvClient`` (WebSockets, dictionaries), the typed ``AgentWorldClient``, and plain
HTTP requests to the stateless endpoints.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from faultserver import free_port
from openenv.core.generic_client import GenericEnvClient
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env.openenv_server import (
    AgentWorldAction,
    AgentWorldClient,
)
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import load_workspace

START_LIMIT_S = 90.0
WEB_SERVER_STATE = next(s for s in load_scenarios("terminal")[0] if s.name == "web-server").state


@dataclass
class Served:
    url: str
    world_model: SlotServer
    sessions: Path


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_up(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the server ended: {process.stderr.read() if process.stderr else ''}"
            )
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.1)
    raise AssertionError("the OpenEnv server did not start")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    sessions = tmp_path_factory.mktemp("sessions")
    schedule = sessions.parent / "schedule.toml"
    schedule.write_text('[[rule]]\ncalls = [2]\npreset = "disk-full"\n', encoding="utf-8")
    with SlotServer(slots=8, latency=0.02) as world_model:
        port = free_port()
        process = serve(
            "--server", world_model.url, "--domain", "terminal", "--scenario", "web-server",
            "--port", str(port), "--max-steps", "3", "--sessions", str(sessions),
            "--schedule", str(schedule), "--schedule-seed", "4",
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url, process)
            yield Served(url, world_model, sessions)
        finally:
            process.terminate()
            process.wait(30)


def post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())


def test_an_openenv_client_completes_an_episode(served: Served) -> None:
    async def episode() -> list[object]:
        async with GenericEnvClient(base_url=served.url) as env:
            first = await env.reset(episode_id="ep/../one")
            ran = await env.step({"action": "ls\n"})
            refused = await env.step({"action": ""})
            tool = await env.step({"tool": "send_keystrokes", "arguments": {"keystrokes": "pwd\n"}})
            state = await env.state()
            last = await env.step({"action": {"keystrokes": "whoami\n"}})
            return [first, ran, refused, tool, state, last]

    first, ran, refused, tool, state, last = asyncio.run(episode())
    assert first.observation["text"] == WEB_SERVER_STATE and not first.done
    assert first.observation["tools"][0]["function"]["name"] == "send_keystrokes"
    assert ran.observation["text"] == OBSERVATION and ran.observation["status"] == "complete"
    assert ran.observation["turn"] == 1 and ran.observation["cost"]["generated_tokens"] == 64
    assert ran.observation["reasoning"] == "The command lists the folder."
    assert refused.observation["status"] == "refused"
    assert refused.observation["error"].startswith("empty action")
    assert refused.observation["text"] == OBSERVATION  # the episode goes on where it was
    assert tool.observation["turn"] == 2 and not tool.done
    # The schedule's rule is for the episode's second turn only, and says it fired.
    assert ran.observation["schedule"] == [] and ran.observation["preset"] == ""
    assert tool.observation["preset"] == "disk-full"
    assert [(d["rule"], d["fired"]) for d in tool.observation["schedule"]] == [(1, True)]
    assert state["step_count"] == 2 and state["domain"] == "terminal" and state["turns"] == 2
    assert last.done and last.observation["turn"] == 3
    # The episode is a session file the app opens, named safely from the episode id.
    saved = served.sessions / "ep-..-one.json"
    assert [len(t.turns) for t in load_workspace(saved).tabs] == [3]


def test_the_typed_client_and_its_sync_wrapper(served: Served) -> None:
    with AgentWorldClient(base_url=served.url).sync() as env:
        env.reset()
        step = env.step(AgentWorldAction(action="cat /etc/hostname\n"))
    assert step.observation.text == OBSERVATION and step.observation.turn == 1
    assert step.observation.cost["prompt_tokens"] == 1000


def test_sessions_are_independent_and_step_at_once(served: Served) -> None:
    async def two() -> list[dict[str, object]]:
        async with (
            GenericEnvClient(base_url=served.url) as a,
            GenericEnvClient(base_url=served.url) as b,
        ):
            await asyncio.gather(a.reset(), b.reset())
            for n in range(2):
                await asyncio.gather(a.step({"action": f"echo a{n}\n"}), b.step({"action": "ls\n"}))
            await a.step({"action": "echo a2\n"})
            return [await a.state(), await b.state()]

    a, b = asyncio.run(two())
    assert (a["turns"], b["turns"]) == (3, 2)
    assert a["session_id"] != b["session_id"]


def test_http_reset_and_step_are_stateless(served: Served) -> None:
    reset = post(f"{served.url}/reset", {})
    assert reset["observation"]["text"] == WEB_SERVER_STATE
    step = post(f"{served.url}/step", {"action": {"action": "ls\n"}})
    assert step["observation"]["turn"] == 1 and step["observation"]["text"] == OBSERVATION
    again = post(f"{served.url}/step", {"action": {"action": "ls\n"}})
    assert again["observation"]["turn"] == 1  # a fresh environment for each call
    with urllib.request.urlopen(f"{served.url}/schema", timeout=10) as reply:
        schema = json.loads(reply.read())
    assert {"action", "tool", "arguments"} <= set(schema["action"]["properties"])


def test_a_bad_domain_or_schedule_is_one_line_before_serving(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", "--domain", "tty",
         "--server", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "agentworld: unknown domain 'tty'; choose from terminal, mcp, web, android, search, swe, os"
    ]
    schedule = tmp_path / "schedule.toml"
    schedule.write_text('[[rule]]\ncalls = [2]\npreset = "meteor"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", "--schedule", str(schedule),
         "--server", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{schedule}: rule 1: no terminal perturbation named 'meteor'" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", "--schedule-seed", "3",
         "--server", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["agentworld: --schedule-seed goes with --schedule"]
