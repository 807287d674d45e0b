"""``agentworld serve``: textual-serve on 127.0.0.1, started as a real process; the page is
loaded over HTTP and the app itself is started through the page's websocket."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ggufgen import write_scripted_model

from agentworld_tui.cli import build_parser
from agentworld_tui.commands.serve import app_command, is_loopback

pytest.importorskip("textual_serve")
aiohttp = pytest.importorskip("aiohttp")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode("utf-8"))
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    model = write_scripted_model(
        tmp_path / "served.gguf", "x</think><predicted_observation>$</predicted_observation>"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "agentworld_tui", "serve", "--port", str(port)),
            *("--model", str(model), "--threads", "1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        yield port, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def wait_for_page(port: int, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        page = get(f"http://127.0.0.1:{port}/")
        if page is not None:
            return page
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"serve exited with {process.returncode}: {output}")
        time.sleep(0.2)
    raise AssertionError("the page never came up")


async def app_output(port: int, wanted: str) -> str:
    """Connect as the page does and read the app's screen until ``wanted`` shows."""
    seen = ""
    url = f"ws://127.0.0.1:{port}/ws?width=120&height=36"
    async with aiohttp.ClientSession() as client, client.ws_connect(url) as ws:
        await ws.send_json(["resize", {"width": 120, "height": 36}])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
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
                break
    return seen


def test_serve_gives_the_page_and_starts_the_app_over_the_websocket(
    server: tuple[int, subprocess.Popen[str]],
) -> None:
    port, process = server
    page = wait_for_page(port, process)
    assert "<html" in page.lower() and "textual.js" in page
    assert f"ws://127.0.0.1:{port}/ws" in page  # the page talks back to this server
    shown = asyncio.run(app_output(port, "served.gguf"))
    assert "Terminal" in shown and "served.gguf" in shown  # the app, with the model given
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0


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
            *("--temperature", "0.3", "--session", "s.json"),
        ]
    )
    argv = shlex.split(app_command(args, args.engine_parser))
    assert argv[:3] == [sys.executable, "-m", "agentworld_tui"]
    rest = argv[3:]
    assert rest[rest.index("--model") + 1] == "/m/x y.gguf"
    assert rest[rest.index("--temperature") + 1] == "0.3"
    assert "--no-thinking" in rest and rest[rest.index("--session") + 1] == "s.json"
    assert "--port" not in rest and "serve" not in rest and "--host" not in rest
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--port", "70000"])


def test_loopback_hosts() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
