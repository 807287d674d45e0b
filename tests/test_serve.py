"""``agentworld serve``: textual-serve on 127.0.0.1, started as a real process; the page is
loaded over HTTP and the app itself is started through the page's websocket. Every request
needs the run's token, the served Host and no foreign Origin; one app runs at a time."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
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
from ggufgen import write_scripted_model

from agentworld_tui.cli import build_parser
from agentworld_tui.cli.serve import app_command

TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    port: int
    process: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return self.base


def start_serve(tmp: Path, *flags: str, token: str | None = TOKEN) -> Served:
    model = tmp / "served.gguf"
    if not model.exists():
        write_scripted_model(model, "x</think><predicted_observation>$</predicted_observation>")
    port = free_port()
    env = dict(os.environ)
    env.pop("AGENTWORLD_SERVE_TOKEN", None)
    if token is not None:
        env["AGENTWORLD_SERVE_TOKEN"] = token
    env["AGENTWORLD_CONFIG_DIR"] = str(tmp / "config")
    env["AGENTWORLD_DATA_DIR"] = str(tmp / "data")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "agentworld_tui", "serve", "--port", str(port)),
            *("--model", str(model), "--threads", "1", *flags),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    return Served(port, process)


def stop(served: Served) -> None:
    process = served.process
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Served]:
    served = start_serve(tmp_path)
    try:
        yield served
    finally:
        stop(served)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the checks that start no app."""
    served = start_serve(tmp_path_factory.mktemp("guarded"))
    wait_until_listening(served)
    try:
        yield served
    finally:
        stop(served)


def wait_until_listening(served: Served) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", served.port), timeout=1):
                return
        except OSError:
            pass
        if served.process.poll() is not None:
            output = served.process.stdout.read() if served.process.stdout else ""
            raise AssertionError(f"serve exited with {served.process.returncode}: {output}")
        time.sleep(0.2)
    raise AssertionError("serve never listened")


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8"), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8"), dict(error.headers)


async def ws_messages(
    url: str, headers: dict[str, str], wanted: str, seconds: float = 90
) -> tuple[str, int | None]:
    """Connect as the page does; read what comes until ``wanted`` shows or the server
    closes. Returns the text seen and the close code (None while still open)."""
    seen = ""
    async with aiohttp.ClientSession() as client, client.ws_connect(url, headers=headers) as ws:
        await ws.send_json(["resize", {"width": 120, "height": 36}])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while wanted not in seen:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                message = await ws.receive(timeout=remaining)
            except TimeoutError:
                break
            if message.type == aiohttp.WSMsgType.BINARY:
                seen += message.data.decode("utf-8", "replace")
            elif message.type == aiohttp.WSMsgType.TEXT:
                seen += message.data
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                return seen, ws.close_code
        return seen, ws.close_code


async def ws_status(url: str, headers: dict[str, str]) -> int:
    """The HTTP status of a refused WebSocket handshake (101 when it was accepted)."""
    async with aiohttp.ClientSession() as client:
        try:
            async with client.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as error:
            return error.status


def test_serve_gives_the_page_and_starts_the_app_as_a_browser_does(server: Served) -> None:
    wait_until_listening(server)
    status, page, headers = http_get(f"{server.base}/?token={TOKEN}")
    assert status == 200 and "<html" in page.lower() and "textual.js" in page
    assert f"ws://127.0.0.1:{server.port}/ws" in page  # the page talks back to this server
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # The page's script adds ?width=...&height=... to the URL: the token comes as the cookie.
    shown, _code = asyncio.run(
        ws_messages(
            f"ws://127.0.0.1:{server.port}/ws?width=120&height=36",
            {"Cookie": cookie.split(";")[0], "Origin": server.origin},
            "served.gguf",
        )
    )
    assert "Terminal" in shown and "served.gguf" in shown  # the app, with the model given
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(timeout=30) == 0


@pytest.mark.parametrize(
    "path",
    ["/", "/?token=wrong", f"/?token={TOKEN[:-1]}x", "/static/js/textual.js", "/download/x"],
)
def test_requests_without_the_token_are_refused(guarded: Served, path: str) -> None:
    status, body, _ = http_get(guarded.base + path)
    assert status == 401
    assert body.startswith("agentworld serve: no valid token")


def test_the_token_works_in_the_url_and_as_the_cookie(guarded: Served) -> None:
    status, _, headers = http_get(f"{guarded.base}/static/js/textual.js?token={TOKEN}")
    assert status == 200
    cookie = headers["Set-Cookie"].split(";")[0]
    status, page, _ = http_get(f"{guarded.base}/", {"Cookie": cookie})
    assert status == 200 and "textual.js" in page


@pytest.mark.parametrize(
    "origin", ["http://evil.example", f"http://127.0.0.1:{1}", "null", "https://127.0.0.1"]
)
def test_a_foreign_origin_is_refused_over_http_and_websocket(guarded: Served, origin: str) -> None:
    status, body, _ = http_get(f"{guarded.base}/?token={TOKEN}", {"Origin": origin})
    assert status == 403 and "other web pages" in body
    ws = f"ws://127.0.0.1:{guarded.port}/ws?token={TOKEN}"
    assert asyncio.run(ws_status(ws, {"Origin": origin})) == 403
    assert asyncio.run(ws_status(ws.split("?")[0], {"Origin": guarded.origin})) == 401


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1"])
def test_a_foreign_host_is_refused(guarded: Served, host: str) -> None:
    # DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
    header = host.format(port=guarded.port)
    status, body, _ = http_get(f"{guarded.base}/?token={TOKEN}", {"Host": header})
    assert status == 403 and "unknown Host" in body
    ws = f"ws://127.0.0.1:{guarded.port}/ws?token={TOKEN}"
    origin = f"http://{header}"
    assert asyncio.run(ws_status(ws, {"Host": header, "Origin": origin})) == 403


def test_loopback_names_are_served(guarded: Served) -> None:
    for host in (f"localhost:{guarded.port}", f"[::1]:{guarded.port}"):
        status, page, _ = http_get(f"{guarded.base}/?token={TOKEN}", {"Host": host})
        assert status == 200
        assert f"ws://{host}/ws" in page  # the page's links use the name the browser used


def test_a_second_session_is_refused_with_a_message(server: Served) -> None:
    wait_until_listening(server)
    url = f"ws://127.0.0.1:{server.port}/ws?token={TOKEN}"
    headers = {"Origin": server.origin}

    async def two_tabs() -> tuple[str, int | None]:
        async with aiohttp.ClientSession() as client, client.ws_connect(url, headers=headers):
            # The second tab's messages are read until the server closes it.
            return await ws_messages(url, headers, "(never shown)", seconds=30)

    second, code = asyncio.run(two_tabs())
    assert "1 session is already open" in second and "--max-sessions" in second
    assert code == 1013  # try again later

    async def later() -> str:
        # The first tab is closed: a new one is served (once the server has counted it).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while loop.time() < deadline:
            seen, _ = await ws_messages(url, headers, "served.gguf", seconds=60)
            if "already open" not in seen:
                return seen
        return seen

    assert "served.gguf" in asyncio.run(later())


def test_the_printed_address_carries_a_random_token(tmp_path: Path) -> None:
    served = start_serve(tmp_path, token=None)
    try:
        assert served.process.stdout is not None
        line = served.process.stdout.readline()
        found = re.search(r"open (http://127\.0\.0\.1:\d+/\?token=([\w-]+)) in a browser", line)
        assert found, line
        assert len(found.group(2)) >= 32
        wait_until_listening(served)
        assert http_get(found.group(1))[0] == 200
        assert http_get(f"{served.base}/?token={TOKEN}")[0] == 401
    finally:
        stop(served)


def test_a_weak_token_from_the_environment_is_refused(tmp_path: Path) -> None:
    served = start_serve(tmp_path, token="short")
    try:
        code = served.process.wait(timeout=60)
    finally:
        stop(served)
    assert code == 2
    output = served.process.stdout.read() if served.process.stdout else ""
    assert "AGENTWORLD_SERVE_TOKEN must be 16 to 256" in output and "Traceback" not in output


def test_serve_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "agentworld_tui", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_served_app_gets_the_model_flags_but_not_the_server_ones() -> None:
    args = build_parser().parse_args(
        [
            *("serve", "--port", "9000", "--model", "/m/x y.gguf", "--no-thinking"),
            *("--temperature", "0.3", "--session", "s.json", "--max-sessions", "2"),
        ]
    )
    argv = shlex.split(app_command(args, args.engine_parser))
    assert argv[:3] == [sys.executable, "-m", "agentworld_tui"]
    rest = argv[3:]
    assert rest[rest.index("--model") + 1] == "/m/x y.gguf"
    assert rest[rest.index("--temperature") + 1] == "0.3"
    assert "--no-thinking" in rest and rest[rest.index("--session") + 1] == "s.json"
    assert "--port" not in rest and "serve" not in rest and "--host" not in rest
    assert "--max-sessions" not in rest
    for bad in (["--port", "70000"], ["--max-sessions", "0"], ["--max-sessions", "many"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", *bad])


def test_a_missing_textual_serve_is_explained_with_the_pipx_command() -> None:
    code = (
        "import sys\n"
        "sys.modules['textual_serve'] = None  # as in an install that lacks it\n"
        "from agentworld_tui.cli import main\n"
        "sys.exit(main(['serve']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "pipx inject agentworld-tui textual-serve" in line
