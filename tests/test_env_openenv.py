"""``agentworld env serve`` (issue 30 item 3): OpenEnv's own clients complete episodes.

The server is the real command in a subprocess, its world model a real OpenAI-compatible
server on 127.0.0.1 (``slotserver.SlotServer``); the clients are openenv-core's
``GenericEnvClient`` (WebSockets, dictionaries), the typed ``AgentWorldClient``, and plain
HTTP requests to the stateless endpoints.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from faultserver import free_port
from openenv.core.generic_client import GenericEnvClient
from slotserver import OBSERVATION, SlotServer

from agentworld_tui.agents.env.openenv_server import (
    AgentWorldAction,
    AgentWorldClient,
    episode_file_name,
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
    output: Path
    """What the server printed (stdout and stderr)."""
    log: Path


def serve(
    *args: str, output: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """The command; what it prints goes to ``output`` when given (read any time)."""
    sink = output.open("w", encoding="utf-8") if output is not None else subprocess.PIPE
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", "env", "serve", *args],
            stdout=sink,
            stderr=subprocess.STDOUT if output is not None else subprocess.PIPE,
            text=True,
            env=env,
        )
    finally:
        if output is not None:
            sink.close()  # type: ignore[union-attr]


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
        output = sessions.parent / "served.txt"
        home = sessions.parent
        env = {
            **os.environ,
            "AGENTWORLD_CONFIG_DIR": str(home / "config"),
            "AGENTWORLD_DATA_DIR": str(home / "data"),
        }
        process = serve(
            "--server", world_model.url, "--domain", "terminal", "--scenario", "web-server",
            "--port", str(port), "--max-steps", "3", "--sessions", str(sessions),
            "--schedule", str(schedule), "--schedule-seed", "4", output=output, env=env,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url, process)
            yield Served(url, world_model, sessions, output, home / "data" / "agentworld.log")
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
    saved = served.sessions / episode_file_name("ep/../one")
    assert saved.name.startswith("ep-..-one-") and saved.parent == served.sessions
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


# -- hostile clients (issue 38) ----------------------------------------------------------------
def post_status(url: str, body: object) -> tuple[int, str]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


SECRET = "s3cret-value-of-the-user"


@pytest.fixture
def secrets_on_disk(tmp_path: Path) -> list[Path]:
    files = [tmp_path / "creds.json", tmp_path / "notes.txt", tmp_path / "scenario.toml"]
    files[0].write_text(json.dumps({"key": SECRET}), encoding="utf-8")
    files[1].write_text(SECRET, encoding="utf-8")
    files[2].write_text(
        f'[[scenario]]\nname = "x"\ntitle = "x"\nstate = "{SECRET}"\n', encoding="utf-8"
    )
    return [*files, tmp_path / "missing.json", Path("../../etc/passwd")]


def test_a_client_names_scenarios_never_files(served: Served, secrets_on_disk: list[Path]) -> None:
    for path in secrets_on_disk:
        status, body = post_status(f"{served.url}/reset", {"scenario": str(path)})
        assert status == 400, body
        assert SECRET not in body and "terminal has no scenario" in body
        assert "web-server" in body  # the names a client may choose from

    async def over_the_websocket() -> tuple[list[str], str]:
        refused = []
        async with GenericEnvClient(base_url=served.url) as env:
            for path in secrets_on_disk:
                with pytest.raises(RuntimeError) as caught:
                    await env.reset(scenario=str(path))
                refused.append(str(caught.value))
            named = await env.reset(scenario="web-server")  # the session goes on
            return refused, named.observation["text"]

    refused, text = asyncio.run(over_the_websocket())
    assert all("terminal has no scenario" in r and SECRET not in r for r in refused), refused
    assert text == WEB_SERVER_STATE
    assert "Traceback" not in served.output.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1 << 40}, "seed"),
        ({"seed": "seven"}, "seed"),
        ({"episode_id": "x" * 300}, "episode_id"),
        ({"episode_id": {"nested": 1}}, "episode_id"),
        ({"episode_id": "run\ud8007"}, "episode_id"),  # a lone surrogate
        ({"scenario": ["web-server"]}, "scenario"),
        ({"path": "/etc/passwd"}, "path"),
        ({"world": "/etc/passwd"}, "world"),
    ],
)
def test_reset_is_validated_alike_over_http_and_websocket(
    served: Served, body: dict[str, object], said: str
) -> None:
    status, text = post_status(f"{served.url}/reset", body)
    assert status in (400, 422) and said in text, text

    async def over_the_websocket() -> str:
        async with GenericEnvClient(base_url=served.url) as env:
            with pytest.raises(RuntimeError) as caught:
                await env.reset(**body)
            await env.reset()  # the session goes on
            return str(caught.value)

    assert said in asyncio.run(over_the_websocket())
    assert "Traceback" not in served.output.read_text(encoding="utf-8")


def test_episode_ids_never_share_a_file(served: Served) -> None:
    ids = ["run/7", "run-7", "run\\7", "RUN-7", "run-7"]  # the last one again, at once

    async def episodes() -> list[dict[str, object]]:
        clients = [GenericEnvClient(base_url=served.url) for _ in ids]
        for client in clients:
            await client.connect()
        try:
            await asyncio.gather(
                *(c.reset(episode_id=i) for c, i in zip(clients, ids, strict=True))
            )
            steps = await asyncio.gather(
                *(c.step({"action": f"echo {n}\n"}) for n, c in enumerate(clients))
            )
            states = await asyncio.gather(*(c.state() for c in clients))
        finally:
            for client in clients:
                await client.close()
        assert all(not s.observation["save_error"] for s in steps)
        return list(states)

    states = asyncio.run(episodes())
    files = [str(s["session_file"]) for s in states]
    assert len(set(files)) == len(ids), files
    for n, name in enumerate(files):
        [tab] = load_workspace(served.sessions / name).tabs
        assert [t.action.payload[0]["keystrokes"] for t in tab.turns] == [f"echo {n}\n"]


def test_a_save_that_cannot_happen_is_told_to_the_client(served: Served) -> None:
    from agentworld_tui.world.workspace import lock_session_file

    held = lock_session_file(served.sessions / episode_file_name("held-by-another"))
    try:

        async def episode() -> tuple[dict[str, object], dict[str, object]]:
            async with GenericEnvClient(base_url=served.url) as env:
                await env.reset(episode_id="held-by-another")
                step = await env.step({"action": "ls\n"})
                return step.observation, await env.state()

        observation, state = asyncio.run(episode())
    finally:
        held.release()
    assert observation["text"] == OBSERVATION  # the step itself went through
    assert "not saved" in str(observation["save_error"])
    assert state["session_file"] == episode_file_name("held-by-another")
    assert "not saved" in served.log.read_text(encoding="utf-8")


def test_a_port_in_use_is_one_line_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "agentworld_tui", "env", "serve", "--port", str(port),
             "--server", "http://127.0.0.1:9/v1"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"agentworld: cannot listen on 127.0.0.1:{port}: the port is in use "
        "(pick another with --port)"
    ]


def test_the_default_port_is_none_of_the_model_servers_and_is_documented() -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.env import DEFAULT_PORT

    assert build_parser().parse_args(["env", "serve"]).port == DEFAULT_PORT
    assert DEFAULT_PORT not in (
        8000,
        8080,
        30000,
    )  # llama-cpp-python and vLLM, llama-server, SGLang
    docs = (Path(__file__).parent.parent / "docs" / "training.md").read_text(encoding="utf-8")
    assert f"127.0.0.1:{DEFAULT_PORT}" in docs


def test_a_client_that_leaves_mid_step_leaves_no_traceback(served: Served) -> None:
    async def leave() -> None:
        async with aiohttp.ClientSession() as client:
            ws = await client.ws_connect(served.url.replace("http", "ws") + "/ws")
            await ws.send_str(json.dumps({"type": "reset", "data": {}}))
            await ws.receive(timeout=30)
            await ws.send_str(json.dumps({"type": "step", "data": {"action": "ls\n"}}))
            await ws.send_str("not json")
            await ws.send_str(json.dumps({"type": "reset", "data": {"seed": -1}}))
            await ws.close()

    for _ in range(3):
        asyncio.run(leave())
    time.sleep(1.0)  # the server answers into closed sockets meanwhile
    with urllib.request.urlopen(f"{served.url}/health", timeout=10) as reply:
        assert reply.status == 200
    printed = served.output.read_text(encoding="utf-8")
    assert "Traceback" not in printed and "Exception in ASGI" not in printed, printed


def test_a_scenario_is_chosen_by_name_never_by_path(tmp_path: Path) -> None:
    from agentworld_tui.agents.env.results import EnvError
    from agentworld_tui.agents.env.scenarios import resolve_domain, scenario_named
    from agentworld_tui.world.domain import Scenario

    terminal = resolve_domain("terminal")
    own = Scenario("from-the-command-line", "Mine", "", "$ ")
    assert scenario_named(terminal, "from-the-command-line", [own]) is own
    assert scenario_named(terminal, "web-server").state == WEB_SERVER_STATE
    file = tmp_path / "web-server.toml"
    file.write_text('[[scenario]]\nname = "z"\ntitle = "z"\nstate = "secret"\n', encoding="utf-8")
    for name in (str(file), "z", "x" * 10_000):
        with pytest.raises(EnvError, match="terminal has no scenario") as caught:
            scenario_named(terminal, name, [own])
        assert "secret" not in str(caught.value) and len(str(caught.value)) < 2_000
