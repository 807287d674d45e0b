"""Benchmark 7's environments with the answer streamed through each HTTP client (issue 40).

The remote engine sends every request through one HTTP client, the standard library's
(``engines/remote/transport.py``). This measures what choosing another would cost: the
answer's stream through each candidate in turn, in the engine as it is otherwise, with N
environments stepping against a server of S slots x L seconds (``bench/env.py``'s
throughput: steps a second ÷ the server's limit), the order of the candidates reversed
every round, and the control (``bench/env.py``'s bare asyncio client) in each round.

- ``http.client``: the engine's own client;
- ``httpx``: httpx2 (the openai SDK's HTTP client) on the generation's thread, its
  event-stream parser;
- ``sdk``: the openai SDK's streaming POST, JSON values as they come (no models built);
- ``aiohttp``: one event loop thread for every stream, each event handed to the
  generation's thread through a queue (the engine's stream is read on its own thread).

    python bench/http_clients.py            # ~5 min
    python bench/http_clients.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import socket
import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
import httpx2
import openai
from env import THROUGHPUT_TARGET, bare_client, throughput
from figures import machine, verdict

from agentworld_tui.engines.remote.engine import CONNECT_TIMEOUT_S, RemoteEngine
from agentworld_tui.engines.remote.requests import auth_headers
from agentworld_tui.engines.remote.transport import (
    MAX_LINE_BYTES,
    ErrorEvent,
    StatusError,
    TimedOut,
    Unreachable,
)

CLIENTS = ("http.client", "httpx", "sdk", "aiohttp")


def _socket_of(response: httpx2.Response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    return stream.get_extra_info("socket") if stream is not None else None


class HttpxStream:
    """The answer through an httpx2 client shared by the engine's streams."""

    def __init__(self, http: httpx2.Client, url: str, body: dict[str, Any], headers: Any) -> None:
        self._http = http
        self._request = http.build_request(
            "POST",
            url,
            content=json.dumps(body, ensure_ascii=False).encode(),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream", **headers},
        )
        self._response: httpx2.Response | None = None
        self._socket: socket.socket | None = None

    def interrupt(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def open(self) -> None:
        try:
            self._response = self._http.send(self._request, stream=True)
        except httpx2.TimeoutException as exc:
            raise TimedOut() from exc
        except httpx2.TransportError as exc:
            raise Unreachable() from exc
        self._socket = _socket_of(self._response)
        if self._response.status_code >= 300:
            raise StatusError(self._response.status_code, self._response.read().decode())

    def __iter__(self) -> Iterator[Any]:
        assert self._response is not None
        try:
            for event in httpx2.EventSource(self._response, max_event_size=MAX_LINE_BYTES):
                if event.data.startswith("[DONE]"):
                    return
                value = json.loads(event.data)
                if isinstance(value, dict) and value.get("error"):
                    raise ErrorEvent(value["error"])
                yield value
        except httpx2.TimeoutException as exc:
            raise TimedOut() from exc
        except httpx2.TransportError as exc:
            raise Unreachable() from exc

    def close(self) -> None:
        if self._response is not None:
            self._response.close()


class SdkStream:
    """The answer through the openai SDK's streaming POST, JSON values as they come."""

    def __init__(self, client: openai.OpenAI, body: dict[str, Any], headers: Any) -> None:
        self._client, self._body, self._headers = client, body, headers
        self._stream: openai.Stream[object] | None = None
        self._socket: socket.socket | None = None

    def interrupt(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def open(self) -> None:
        try:
            self._stream = self._client.post(
                "/chat/completions",
                cast_to=object,
                body=self._body,
                stream=True,
                stream_cls=openai.Stream[object],
                options={"headers": self._headers},
            )
        except openai.APIStatusError as exc:
            raise StatusError(exc.status_code, exc.response.text) from exc
        except openai.APITimeoutError as exc:
            raise TimedOut() from exc
        except openai.APIConnectionError as exc:
            raise Unreachable() from exc
        self._socket = _socket_of(self._stream.response)

    def __iter__(self) -> Iterator[Any]:
        assert self._stream is not None
        try:
            yield from self._stream
        except openai.APITimeoutError as exc:
            raise TimedOut() from exc
        except openai.APIConnectionError as exc:
            raise Unreachable() from exc
        except openai.APIError as exc:
            raise ErrorEvent(exc.body) from exc

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()


class AiohttpStream:
    """The answer read on one event loop thread; its events handed over through a queue."""

    _END = object()

    def __init__(self, loop: Loop, url: str, body: dict[str, Any], headers: Any) -> None:
        self._loop, self._url = loop, url
        self._body = json.dumps(body, ensure_ascii=False).encode()
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **headers,
        }
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._task: Any = None

    async def _run(self) -> None:
        put = self._queue.put
        try:
            session = await self._loop.session()
            async with session.post(self._url, data=self._body, headers=self._headers) as reply:
                if reply.status >= 300:
                    put(StatusError(reply.status, (await reply.content.read(65536)).decode()))
                    return
                put(None)  # the headers came
                data: list[bytes] = []
                async for raw in reply.content:
                    line = raw.rstrip(b"\r\n")
                    if not line and data:
                        put(b"\n".join(data))
                        data = []
                    elif line.startswith(b"data:"):
                        data.append(line[6:] if line.startswith(b"data: ") else line[5:])
                put(self._END)
        except TimeoutError:
            put(TimedOut())
        except BaseException:
            put(Unreachable())
            raise

    def interrupt(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def open(self) -> None:
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self._loop.loop)
        first = self._queue.get()
        if isinstance(first, Exception):
            raise first

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if isinstance(item, Exception):
                raise item
            if item is self._END or item.startswith(b"[DONE]"):
                return
            value = json.loads(item)
            if isinstance(value, dict) and value.get("error"):
                raise ErrorEvent(value["error"])
            yield value

    def close(self) -> None:
        self.interrupt()


class Loop:
    """One event loop thread and one aiohttp session for every aiohttp stream."""

    def __init__(self, read_timeout: float) -> None:
        self.loop = asyncio.new_event_loop()
        self._timeout = aiohttp.ClientTimeout(sock_read=read_timeout, connect=CONNECT_TIMEOUT_S)
        self._session: aiohttp.ClientSession | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0)
            self._session = aiohttp.ClientSession(
                trust_env=True, connector=connector, timeout=self._timeout
            )
        return self._session

    def close(self) -> None:
        if self._session is not None:
            asyncio.run_coroutine_threadsafe(self._session.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def streams(name: str) -> tuple[Callable[[RemoteEngine, dict[str, Any]], Any], Callable[[], None]]:
    """The engine's ``_event_stream`` for client ``name``, and what closes what it made."""
    made: dict[str, Any] = {}
    lock = threading.Lock()

    def shared(key: str, make: Callable[[], Any]) -> Any:
        with lock:
            if key not in made:
                made[key] = make()
            return made[key]

    def stream(engine: RemoteEngine, request: dict[str, Any]) -> Any:
        headers = auth_headers(engine.api_key_env)
        url = f"{engine.base_url.rstrip('/')}/chat/completions"
        read = max(engine.timeout, engine.idle_timeout) + CONNECT_TIMEOUT_S
        timeout = httpx2.Timeout(read, connect=CONNECT_TIMEOUT_S)
        unlimited = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
        if name == "httpx":
            http = shared("httpx", lambda: httpx2.Client(timeout=timeout, limits=unlimited))
            return HttpxStream(http, url, request, headers)
        if name == "sdk":
            client = shared(
                "sdk",
                lambda: openai.OpenAI(
                    base_url=engine.base_url,
                    api_key="no-key",
                    timeout=timeout,
                    max_retries=0,
                    http_client=openai.DefaultHttpxClient(timeout=timeout, limits=unlimited),
                ),
            )
            return SdkStream(client, request, headers)
        return AiohttpStream(shared("aiohttp", lambda: Loop(read)), url, request, headers)

    def close() -> None:
        for thing in made.values():
            thing.close()

    return stream, close


def measure(name: str, envs: int, slots: int, latency: float, steps: int) -> float:
    """Steps a second ÷ the server's limit, the answer streamed through client ``name``."""
    if name == "http.client":
        rate, limit, _kib, _in_flight = throughput(envs, slots, latency, steps)
        return rate / limit
    original = RemoteEngine._event_stream
    stream, close = streams(name)
    RemoteEngine._event_stream = stream  # type: ignore[assignment,method-assign]
    try:
        rate, limit, _kib, _in_flight = throughput(envs, slots, latency, steps)
    finally:
        RemoteEngine._event_stream = original  # type: ignore[method-assign]
        close()
    return rate / limit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--slots", type=int, default=256)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--steps", type=int, default=5, help="steps per environment")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.envs, args.slots, args.latency, args.steps, args.rounds = 16, 16, 0.2, 2, 1
    print(f"machine: {machine()}")
    measure("http.client", 16, 16, 0.2, 2)  # the first process's set-up, outside the figures
    kinds = [*CLIENTS, "control"]
    figures: dict[str, list[float]] = {kind: [] for kind in kinds}
    for n in range(args.rounds):
        for kind in kinds if n % 2 == 0 else kinds[::-1]:
            load = os.getloadavg()[0]
            if kind == "control":
                fraction = bare_client(args.envs, args.slots, args.latency, args.steps)
            else:
                fraction = measure(kind, args.envs, args.slots, args.latency, args.steps)
            figures[kind].append(fraction)
            print(f"round {n + 1} {kind:<12} fraction {fraction:.3f}  load {load:.1f}", flush=True)
    print(
        f"{args.envs} environments, server of {args.slots} slots x {args.latency:g} s, "
        f"{args.rounds} rounds:"
    )
    for kind in kinds:
        values = figures[kind]
        median = statistics.median(values)
        shown = ", ".join(f"{v:.3f}" for v in values)
        target = "" if kind == "control" else f"  ({verdict(median >= THROUGHPUT_TARGET)} 0.95)"
        print(f"  {kind:<12} median {median:.3f}  [{shown}]{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
