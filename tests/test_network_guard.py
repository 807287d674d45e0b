"""One guard in front of every network front-end (issue 38): ``mcp serve --transport http``,
the app's Ctrl+B, ``env serve`` and ``serve`` get the same hostile requests from real
clients (httpx for HTTP, aiohttp for WebSockets) and must answer them alike.

A web page the user visits can send requests and open WebSockets to any address, and a
page whose name was rebound to 127.0.0.1 sends its own name as the Host: so every server
answers only a loopback Host at its port (however the loopback is spelled), no Origin but
its own, and the token (any case of ``Bearer``) when it was started with one. The servers
are the real commands on 127.0.0.1; the app's is the app's, started with Ctrl+B under
Pilot.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
import pytest
from faultserver import FaultServer, free_port
from ggufgen import write_scripted_model
from test_app import _isolated, ls_model, make_app, wait_for

from agentworld_tui.agents.guard import Guard, GuardError, authority, is_loopback, token_of
from agentworld_tui.ui.app import AgentWorldApp
from agentworld_tui.ui.screens.sessions import ConfirmScreen

__all__ = ["_isolated", "ls_model"]  # fixtures from test_app: config and data in tmp_path

TOKEN = "guard-token-0123456789abcdef"
START_LIMIT_S = 90.0


# -- the hostile requests ----------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """One request. ``host`` and ``origin`` are headers ({port}: the server's port; None:
    the client's own Host, no Origin); ``credential`` an Authorization header ({token}:
    the server's token; None: none). ``refused``: the status the guard answers (0: it lets
    the request through)."""

    id: str
    host: str | None = None
    origin: str | None = None
    websocket: bool = False
    credential: str | None = "Bearer {token}"
    refused: int = 0
    tokens_only: bool = False
    """Only for a server started with a token."""


def _basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"agent:{token}".encode()).decode()


PROBES = [
    Probe("plain"),
    *(
        Probe(f"host {host}", host=host)
        for host in (
            "127.0.0.1:{port}",
            "127.0.0.2:{port}",
            "127.255.0.9:{port}",
            "localhost:{port}",
            "LocalHost:{port}",
            "localhost.:{port}",
            "[::1]:{port}",
            "[0:0:0:0:0:0:0:1]:{port}",
            "[::ffff:127.0.0.1]:{port}",
        )
    ),
    *(
        Probe(f"foreign host {host}", host=host, refused=403)
        for host in (
            "evil.example:{port}",
            "evil.example",
            "127.0.0.1.evil.example:{port}",
            "localhost.evil.example:{port}",
            "127.0.0.1:1",
            "[::1]:1",
            "10.0.0.1:{port}",
            "",
        )
    ),
    *(
        Probe(f"origin {origin}", origin=origin)
        for origin in ("http://127.0.0.1:{port}", "http://localhost:{port}", "http://[::1]:{port}")
    ),
    *(
        Probe(f"foreign origin {origin}", origin=origin, refused=403)
        for origin in (
            "http://evil.example",
            "null",
            "http://127.0.0.1:1",
            "http://localhost:{port}.evil.example",
            "https://127.0.0.1:{port}",
            "file://",
        )
    ),
    Probe("websocket", websocket=True, origin="http://127.0.0.1:{port}"),
    Probe("websocket foreign origin", websocket=True, origin="http://evil.example", refused=403),
    Probe("websocket null origin", websocket=True, origin="null", refused=403),
    Probe(
        "websocket foreign host",
        websocket=True,
        host="evil.example:{port}",
        origin="http://evil.example:{port}",
        refused=403,
    ),
    Probe("no token", credential=None, refused=401, tokens_only=True),
    Probe("wrong token", credential="Bearer not-the-token-at-all", refused=401, tokens_only=True),
    Probe("token cut short", credential="Bearer {token_cut}", refused=401, tokens_only=True),
    Probe("scheme only", credential="Bearer", refused=401, tokens_only=True),
    Probe("lowercase bearer", credential="bearer {token}", tokens_only=True),
    Probe("uppercase bearer", credential="BEARER {token}", tokens_only=True),
    Probe("basic, the token as password", credential="{basic}", tokens_only=True),
    Probe(
        "websocket without token",
        websocket=True,
        credential=None,
        origin="http://127.0.0.1:{port}",
        refused=401,
        tokens_only=True,
    ),
]


@dataclass
class FrontEnd:
    name: str
    port: int
    path: str
    """A request the server answers ``ok`` once the guard lets it through."""
    ok: int
    ws_path: str
    ws_ok: int
    token: str = ""


def fill(text: str, front: FrontEnd) -> str:
    return text.format(
        port=front.port,
        token=front.token,
        token_cut=front.token[:-1],
        basic=_basic(front.token),
    )


async def send(front: FrontEnd, probe: Probe) -> tuple[int, str]:
    """The status and body the server answers ``probe`` with (101: a WebSocket opened)."""
    headers: dict[str, str] = {}
    if probe.host is not None:
        headers["Host"] = fill(probe.host, front)
    if probe.origin is not None:
        headers["Origin"] = fill(probe.origin, front)
    if probe.credential is not None and front.token:
        headers["Authorization"] = fill(probe.credential, front)
    base = f"127.0.0.1:{front.port}"
    if not probe.websocket:
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.get(f"http://{base}{front.path}", headers=headers)
            return reply.status_code, reply.text
    async with aiohttp.ClientSession() as client:
        try:
            async with client.ws_connect(f"ws://{base}{front.ws_path}", headers=headers):
                return 101, ""
        except aiohttp.WSServerHandshakeError as error:
            return error.status, error.message


async def check(front: FrontEnd, probe: Probe) -> None:
    status, body = await send(front, probe)
    said = f"{front.name}, {probe.id}: {status} {body[:200]!r}"
    if probe.refused:
        assert status == probe.refused, said
        if not probe.websocket:
            assert ("token" if probe.refused == 401 else "refused") in body, said
    else:
        assert status == (front.ws_ok if probe.websocket else front.ok), said


def probes_for(front: FrontEnd) -> list[Probe]:
    return [p for p in PROBES if front.token or not p.tokens_only]


# -- the front-ends, started as a user starts them ------------------------------------------------
def command_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("AGENTWORLD_MCP_TOKEN", "AGENTWORLD_ENV_TOKEN", "AGENTWORLD_SERVE_TOKEN"):
        env.pop(name, None)
    env["AGENTWORLD_CONFIG_DIR"] = str(tmp / "config")
    env["AGENTWORLD_DATA_DIR"] = str(tmp / "data")
    env.update(extra)
    return env


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def wait_listening(process: subprocess.Popen[str], host: str, port: int) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"the server ended ({process.returncode}): {output}")
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the server never listened")


def end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def world_model() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


def mcp_args(url: str, port: int, host: str = "127.0.0.1") -> list[str]:
    return [
        *("mcp", "serve", "--domain", "terminal", "--transport", "http"),
        *("--host", host, "--port", str(port), "--server", url),
    ]


def env_args(url: str, port: int, host: str = "127.0.0.1") -> list[str]:
    return ["env", "serve", "--host", host, "--port", str(port), "--server", url]


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scripted_model(
        tmp_path_factory.mktemp("serve") / "served.gguf",
        "x</think><predicted_observation>$</predicted_observation>",
    )


FRONTS = ["mcp", "mcp with a token", "env", "env with a token", "serve"]


@pytest.fixture(scope="module", params=FRONTS)
def front(
    request: pytest.FixtureRequest,
    world_model: FaultServer,
    served_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FrontEnd]:
    name = str(request.param)
    tmp = tmp_path_factory.mktemp("front")
    port = free_port()
    token = TOKEN if "token" in name or name == "serve" else ""
    if name.startswith("mcp"):
        env = command_env(tmp, **({"AGENTWORLD_MCP_TOKEN": token} if token else {}))
        process = start(mcp_args(world_model.url, port), env)
        made = FrontEnd(name, port, "/mcp", 400, "/mcp", 400, token)
    elif name.startswith("env"):
        env = command_env(tmp, **({"AGENTWORLD_ENV_TOKEN": token} if token else {}))
        process = start(env_args(world_model.url, port), env)
        made = FrontEnd(name, port, "/health", 200, "/ws", 101, token)
    else:
        env = command_env(tmp, AGENTWORLD_SERVE_TOKEN=token)
        args = ["serve", "--port", str(port), "--model", str(served_model), "--threads", "1"]
        process = start(args, env)
        made = FrontEnd(name, port, "/", 200, "/ws", 101, token)
    try:
        wait_listening(process, "127.0.0.1", port)
        yield made
    finally:
        end(process)


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
async def test_every_front_end_answers_the_same_hostile_requests_alike(
    front: FrontEnd, probe: Probe
) -> None:
    if probe.tokens_only and not front.token:
        pytest.skip("the server was started without a token")
    await check(front, probe)


async def test_ctrl_b_answers_the_same_hostile_requests_alike(ls_model: Path) -> None:
    app: AgentWorldApp = make_app(ls_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 60)
        await pilot.press("ctrl+b")  # it asks first; Y serves the tab
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(app.serving))
        [serving] = app.serving.values()
        port = int(serving.url.rsplit(":", 1)[1].split("/")[0])
        front = FrontEnd("Ctrl+B", port, "/mcp", 400, "/mcp", 400)
        for probe in probes_for(front):
            await check(front, probe)


@pytest.mark.parametrize("front", ["env with a token"], indirect=True)
async def test_openenv_s_own_client_carries_the_token_in_the_url(front: FrontEnd) -> None:
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=f"http://agent:{TOKEN}@127.0.0.1:{front.port}") as env:
        result = await env.reset()
    assert result.observation["text"]
    with pytest.raises(ConnectionError, match="401"):
        async with GenericEnvClient(base_url=f"http://127.0.0.1:{front.port}") as env:
            await env.reset()


# -- where a server may listen ---------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mcp", "env"])
@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]", "::1", "0:0:0:0:0:0:0:1", "localhost"])
def test_every_spelling_of_the_loopback_is_guarded(
    kind: str, host: str, world_model: FaultServer, tmp_path: Path
) -> None:
    port = free_port()
    make = mcp_args if kind == "mcp" else env_args
    process = start(make(world_model.url, port, host), command_env(tmp_path))
    path = "/mcp" if kind == "mcp" else "/health"
    address = "127.0.0.1" if host == "localhost" else host
    bracketed = f"[{address.strip('[]')}]" if ":" in address else address
    try:
        wait_listening(process, address, port)
        url = f"http://{bracketed}:{port}{path}"
        with httpx.Client(timeout=30) as client:
            own = client.get(url)
            rebound = client.get(url, headers={"Host": f"evil.example:{port}"})
            foreign = client.get(url, headers={"Origin": "http://evil.example"})
    finally:
        end(process)
    assert own.status_code not in (401, 403, 421), own.text
    assert rebound.status_code == 403 and "refused" in rebound.text
    assert foreign.status_code == 403 and "refused" in foreign.text


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (["mcp", "serve", "--domain", "terminal", "--transport", "http"], "AGENTWORLD_MCP_TOKEN"),
        (["env", "serve"], "AGENTWORLD_ENV_TOKEN"),
    ],
)
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7"])
def test_another_address_without_a_token_is_one_line_and_starts_nothing(
    args: list[str], variable: str, host: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "agentworld_tui", *args),
            *("--host", host, "--port", str(free_port()), "--server", "http://127.0.0.1:9/v1"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=command_env(tmp_path),
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"agentworld: listening on {host} needs a token"), line
    assert f"${variable}" in line


@pytest.mark.parametrize(
    ("kind", "variable"), [("mcp", "AGENTWORLD_MCP_TOKEN"), ("env", "AGENTWORLD_ENV_TOKEN")]
)
def test_a_server_on_every_address_says_where_it_listens(
    kind: str, variable: str, world_model: FaultServer, tmp_path: Path
) -> None:
    port = free_port()
    make = mcp_args if kind == "mcp" else env_args
    process = start(
        make(world_model.url, port, "0.0.0.0"), command_env(tmp_path, **{variable: TOKEN})
    )
    try:
        wait_listening(process, "127.0.0.1", port)
        assert process.stdout is not None
        line = ""
        while f":{port}" not in line:
            line = process.stdout.readline()
            assert line, "the server said nothing"
    finally:
        end(process)
    assert f"http://0.0.0.0:{port}" in line and f"http://127.0.0.1:{port}" in line, line
    assert "localhost" not in line


# -- the guard itself ----------------------------------------------------------------------------
def test_loopback_spellings() -> None:
    for host in (
        *("127.0.0.1", "127.0.0.2", "127.1.2.3", "localhost", "LOCALHOST", "localhost."),
        *("::1", "[::1]", "0:0:0:0:0:0:0:1", "[0:0:0:0:0:0:0:1]", "::ffff:127.0.0.1"),
    ):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "10.0.0.1", "localhost.evil.example", "127.0.0.1.nip.io"):
        assert not is_loopback(host), host


def test_a_guard_for_another_address_needs_a_token() -> None:
    with pytest.raises(GuardError, match="needs a token"):
        Guard("0.0.0.0", 8765)
    Guard("0.0.0.0", 8765, token=TOKEN)
    Guard("[::1]", 8765)


def test_tokens_and_hosts_are_read_strictly() -> None:
    assert token_of(f"bEaReR {TOKEN}") == TOKEN and token_of(f"Bearer   {TOKEN} ") == TOKEN
    assert token_of(_basic(TOKEN)) == TOKEN
    for header in ("Bearer", "Bearer ", f"Token {TOKEN}", "Basic !!!", "Basic " + "eA==", TOKEN):
        assert token_of(header) is None, header
    assert authority("[::1]:8765") == ("::1", 8765) and authority("LocalHost") == (
        "localhost",
        None,
    )
    for host in ("", " localhost", "a b:1", "[::1", "::1:80", "host:0", "host:65536", "h:+1",
                 "user@host:1", 'x"y:1', "h\u0131:1", "[nothex]:1"):  # fmt: skip
        assert authority(host) is None, host
