"""The remote engine's one HTTP client (engines/remote/transport.py, events.py): kept
connections, a kept connection the server closed meanwhile, proxies from the environment.

The server here is the test's own: HTTP/1.1 with keep-alive and chunked answers (as
uvicorn serves vLLM and SGLang), counting the connections it accepted and recording each
request's target.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from agentworld_tui.engines.base import Finished, GenerationControl, GenerationParams
from agentworld_tui.engines.remote import RemoteEngine

OBSERVATION = "root@box:~# ls\nnotes.txt"


@dataclass
class KeepAliveServer:
    close_after_each: bool = False
    """Close each connection once its answer is sent, without saying so (it looks kept)."""
    connections: int = 0
    targets: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> KeepAliveServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        # The connections' handlers end here, on their own loop, before it closes.
        handlers = asyncio.all_tasks(self._loop)
        for handler in handlers:
            handler.cancel()
        self._loop.run_until_complete(asyncio.gather(*handlers, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, target, _version = line.decode().split(" ", 2)
                self.targets.append(f"{method} {target}")
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(self._reply(target))
                await writer.drain()
                if self.close_after_each:
                    return
        finally:
            writer.close()

    @staticmethod
    def _reply(target: str) -> bytes:
        if target.endswith("/models"):
            body = json.dumps({"data": [{"id": "kept-model"}]}).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        if not target.endswith("/chat/completions"):
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        answer = f"<predicted_observation>\n{OBSERVATION}\n</predicted_observation>"
        events = [
            {"choices": [{"index": 0, "delta": {"reasoning_content": "It lists."}}]},
            {"choices": [{"index": 0, "delta": {"content": answer}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        chunks = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
        body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + body


def turn(engine: RemoteEngine) -> Finished:
    messages = [{"role": "user", "content": "ls"}]
    events = list(engine.stream(messages, GenerationParams(), GenerationControl()))  # type: ignore[arg-type]
    finished = events[-1]
    assert isinstance(finished, Finished)
    return finished


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    yield


def test_answers_on_a_kept_connection_reuse_it(no_proxy: None) -> None:
    with KeepAliveServer() as server:
        engine = RemoteEngine(server.url)
        engine.load()
        results = [turn(engine) for _ in range(3)]
        engine.unload()
    assert [r.observation for r in results] == [OBSERVATION] * 3
    assert [r.error for r in results] == [""] * 3
    assert server.connections == 1  # the model list's, kept for every answer
    assert server.targets.count("POST /v1/chat/completions") == 3


def test_a_kept_connection_the_server_closed_is_replaced_without_a_failure(
    no_proxy: None,
) -> None:
    with KeepAliveServer(close_after_each=True) as server:
        engine = RemoteEngine(server.url)
        engine.load()
        before = server.connections
        results = [turn(engine) for _ in range(3)]
        engine.unload()
    assert [r.observation for r in results] == [OBSERVATION] * 3
    assert [r.error for r in results] == [""] * 3
    assert server.connections - before == 3


def test_the_proxy_the_environment_names_carries_the_answer(
    no_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's name resolves nowhere: only the proxy can have answered."""
    with KeepAliveServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        engine = RemoteEngine("http://world-model.invalid:8000/v1")
        engine.load()
        result = turn(engine)
        engine.unload()
    assert result.observation == OBSERVATION
    assert "POST http://world-model.invalid:8000/v1/chat/completions" in proxy.targets


def test_no_proxy_sends_the_answer_straight_to_the_server(
    no_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KeepAliveServer() as server:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        engine = RemoteEngine(server.url)
        engine.load()
        result = turn(engine)
        engine.unload()
    assert result.observation == OBSERVATION
    assert "POST /v1/chat/completions" in server.targets
