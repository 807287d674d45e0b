"""``agentworld env serve`` with a twin (issue 41): the real command in a subprocess, its world
model a real OpenAI-compatible server on 127.0.0.1, its twins real tmux shells in real
bubblewrap or unshare sandboxes, its clients openenv-core's own.

Each session's episode runs beside a twin of its own; the client receives reality and is
told the divergence; ``done`` ends the episode with the check in the twin; the twins are
bounded (one too many is refused in one line) and torn down when their session ends and
when the server stops; a client never names a check, a command or a file."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from faultserver import free_port
from openenv.core.generic_client import GenericEnvClient
from realitykit import any_backend
from slotserver import OBSERVATION, SlotServer
from test_env_openenv import post, post_status, serve, wait_until_up

from agentworld_tui.reality.sandbox import SCRATCH_PREFIX
from agentworld_tui.world.workspace import load_workspace

CHECK = "grep -q shipped status.txt"


@dataclass
class Served:
    url: str
    process: subprocess.Popen[str]
    sessions: Path
    output: Path

    def scratch_folders(self) -> list[Path]:
        """The scratch folders of the server's sandboxes (named after its process)."""
        parent = Path(tempfile.gettempdir())
        return sorted(parent.glob(f"{SCRATCH_PREFIX}{self.process.pid}-*"))

    def twins_gone(self, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while self.scratch_folders():
            assert time.monotonic() < deadline, f"twins left: {self.scratch_folders()}"
            time.sleep(0.1)


def start_server(home: Path, world_model: SlotServer, *extra: str) -> Served:
    seed = home / "project"
    seed.mkdir(exist_ok=True)
    (seed / "notes.txt").write_text("alpha\n")
    sessions = home / "sessions"
    port = free_port()
    output = home / "served.txt"
    env = {
        **os.environ,
        "AGENTWORLD_CONFIG_DIR": str(home / "config"),
        "AGENTWORLD_DATA_DIR": str(home / "data"),
    }
    process = serve(
        "--server", world_model.url, "--domain", "terminal", "--port", str(port),
        "--sessions", str(sessions), "--twin", any_backend(), "--twin-seed", str(seed),
        *extra, output=output, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url, process)
    return Served(url, process, sessions, output)


def stop_server(served: Served) -> None:
    if served.process.poll() is None:
        served.process.terminate()
        served.process.wait(60)


@pytest.fixture(scope="module")
def world_model() -> Iterator[SlotServer]:
    with SlotServer(slots=8, latency=0.02) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, world_model: SlotServer) -> Iterator[Served]:
    running = start_server(
        tmp_path_factory.mktemp("twinned"), world_model, "--check", CHECK, "--max-twins", "2"
    )
    try:
        yield running
    finally:
        stop_server(running)


def test_each_session_runs_beside_a_twin_of_its_own_and_done_runs_the_check(
    served: Served,
) -> None:
    async def two() -> list[object]:
        async with (
            GenericEnvClient(base_url=served.url) as a,
            GenericEnvClient(base_url=served.url) as b,
        ):
            first = await a.reset(episode_id="shipper")
            await b.reset(episode_id="idler")
            shipped = await a.step({"action": "echo shipped > status.txt; echo ok\n"})
            looked = await b.step({"action": "ls\n"})
            state = await a.state()
            done_a = await a.step({"done": True})
            done_b = await b.step({"done": True})
            after = await a.step({"action": "ls\n"})
            ended_state = await a.state()
            return [first, shipped, looked, state, done_a, done_b, after, ended_state]

    first, shipped, looked, state, done_a, done_b, after, ended_state = asyncio.run(two())
    assert first.observation["text"].rstrip().endswith("root@twin:/app#")  # type: ignore[attr-defined]
    assert first.observation["twin"] == {"kind": "sandbox", "deliver": "real"}  # type: ignore[attr-defined]
    seen = shipped.observation  # type: ignore[attr-defined]
    assert seen["text"].splitlines()[-2:] == ["ok", "root@twin:/app#"]  # reality's screen
    assert seen["text"] != OBSERVATION
    assert seen["twin"]["delivered"] == "real" and seen["twin"]["diverged"] is True
    assert 0.0 < seen["twin"]["divergence"] <= 1.0
    # The other session's twin is another sandbox: the file made in the first is not there.
    assert "status.txt" not in looked.observation["text"]  # type: ignore[attr-defined]
    assert "notes.txt" in looked.observation["text"]  # type: ignore[attr-defined]
    assert state["twinned"] is True and state["episode"] == {}  # type: ignore[index]
    ended = done_a.observation  # type: ignore[attr-defined]
    assert done_a.done and ended["status"] == "ended"  # type: ignore[attr-defined]
    assert ended["episode"]["check_passed"] is True and ended["episode"]["deceived"] is False
    assert ended["episode"]["claimed_done"] is True and ended["episode"]["first_divergence"] == 1
    idle = done_b.observation["episode"]  # type: ignore[attr-defined]
    assert (idle["check_passed"], idle["deceived"]) == (False, True)
    assert after.observation["status"] == "refused"  # type: ignore[attr-defined]
    assert "the episode has ended" in after.observation["error"]  # type: ignore[attr-defined]
    assert ended_state["episode"]["check_passed"] is True  # type: ignore[index]
    # Both episodes are session files with both sides and the figures.
    files = {f.name.split("-")[0]: f for f in served.sessions.glob("*.json")}
    kept = load_workspace(files["shipper"]).tabs[0]
    assert kept.twin is not None and kept.twin["check"]["command"] == CHECK
    assert kept.twin["figures"]["check_passed"] is True
    assert kept.turns[0].reality is not None
    assert kept.turns[0].reality["real"]["text"] == seen["text"]
    assert kept.turns[0].observation == OBSERVATION
    # The sessions ended: their twins are torn down.
    served.twins_gone()


def test_twins_beyond_the_bound_are_refused_in_one_line_and_free_again_later(
    served: Served,
) -> None:
    async def three() -> tuple[str, str]:
        async with (
            GenericEnvClient(base_url=served.url) as a,
            GenericEnvClient(base_url=served.url) as b,
            GenericEnvClient(base_url=served.url) as c,
        ):
            await a.reset()
            await b.reset()
            with pytest.raises(RuntimeError) as caught:
                await c.reset()
            status, body = post_status(f"{served.url}/reset", {})
            assert status == 503, body
            await a.step({"done": True})  # its twin is closed: a slot is free
            again = await c.reset()
            return str(caught.value), again.observation["text"]

    said, text = asyncio.run(three())
    assert "all 2 twins this server keeps are in use" in said and "\n" not in said
    assert text.rstrip().endswith(":/app#")
    served.twins_gone()
    assert "Traceback" not in served.output.read_text(encoding="utf-8")


def test_a_stateless_request_gets_a_twin_for_itself_torn_down_after(served: Served) -> None:
    reset = post(f"{served.url}/reset", {})
    assert str(reset["observation"]["text"]).rstrip().endswith(":/app#")  # type: ignore[index]
    step = post(f"{served.url}/step", {"action": {"action": "echo stateless\n"}})
    assert str(step["observation"]["text"]).splitlines()[-2] == "stateless"  # type: ignore[index]
    served.twins_gone()


def test_a_client_never_names_a_check_a_command_or_a_twin(served: Served) -> None:
    marker = Path(tempfile.gettempdir()) / f"agentworld-client-check-{os.getpid()}"
    for body in ({"check": f"touch {marker}"}, {"twin": "host"}, {"deliver": "sim"}):
        status, text = post_status(f"{served.url}/reset", body)
        assert status == 400 and "not a field of reset" in text, text
    status, text = post_status(
        f"{served.url}/step", {"action": {"action": "ls\n", "check": f"touch {marker}"}}
    )
    assert status == 422, text
    status, text = post_status(
        f"{served.url}/step", {"action": {"done": True, "action": f"touch {marker}\n"}}
    )
    assert status == 200 and "done ends the episode" in text
    assert not marker.exists()
    served.twins_gone()


def test_stopping_the_server_tears_down_every_twin(tmp_path: Path, world_model: SlotServer) -> None:
    running = start_server(tmp_path, world_model)

    async def hold() -> None:
        async with GenericEnvClient(base_url=running.url) as env:
            await env.reset()
            await env.step({"action": "sleep 300 &\n"})
            assert len(running.scratch_folders()) == 1
            running.process.send_signal(signal.SIGTERM)
            running.process.wait(60)

    try:
        asyncio.run(hold())
    except Exception:  # the server went away under the client: expected
        pass
    finally:
        stop_server(running)
    # uvicorn hands the SIGTERM back once it has shut down: the twins were closed before.
    assert running.process.returncode in (0, -signal.SIGTERM)
    assert running.scratch_folders() == []
    printed = running.output.read_text(encoding="utf-8")
    assert "every episode beside a sandbox twin of its own, at most 4 at once" in printed
    assert "Traceback" not in printed


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ("--domain", "mcp", "--twin-command", "/no/such/server"),
            "agentworld: the mcp twin did not start: ",
        ),
        (("--domain", "web", "--twin"), "agentworld: the web domain has no twin"),
        (("--twin", "--check", "  "), "agentworld: --check: the check is empty"),
        (("--check", "true"), "agentworld: --check goes with a twin"),
    ],
)
def test_a_twin_that_cannot_be_is_one_line_before_serving(argv: tuple[str, ...], said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "env", "serve", *argv,
         "--server", "http://127.0.0.1:9/v1", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said), lines
