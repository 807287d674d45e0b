"""An OpenAI-compatible server with a fixed number of slots and a fixed latency per answer.

A serving engine (vLLM, SGLang, llama.cpp's server with ``--parallel``) answers a bounded
number of requests at once, each after some time; past that they wait for a slot. This
server does exactly that and nothing else, on 127.0.0.1, on its own event loop, so that the
throughput limit is known (``slots / latency`` answers a second) and what a client does
against it can be measured: requests in flight at most, answers given, requests whose
client went away before the answer (a cancelled step). Every answer streams a reasoning
field, an observation and the usage, like vLLM with a reasoning parser. Used by the pool
tests and by ``bench/env.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field

OBSERVATION = "root@box:/app# ls\nindex.html\nroot@box:/app#"
MAX_BODY = 16 << 20


@dataclass
class SlotServer:
    """Start with ``start()`` (or as a context manager); ``url`` ends in ``/v1``."""

    slots: int = 4
    latency: float = 0.2
    """Seconds each answer takes once it has a slot."""
    observation: str = OBSERVATION
    completion_tokens: int = 64
    port_wanted: int = 0
    served: int = 0
    """Answers sent in full."""
    abandoned: int = 0
    """Requests whose client closed the connection before the answer."""
    in_flight: int = 0
    max_in_flight: int = 0
    """Requests received and not yet answered or abandoned, at most (waiting ones included)."""
    max_busy: int = 0
    """Slots busy at once, at most."""
    prompts: list[str] = field(default_factory=list)
    """The last user message of every chat request, in the order they came."""

    def __post_init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._busy = 0
        self._slots: asyncio.Semaphore | None = None
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> SlotServer:
        self._thread = threading.Thread(target=self._run, name="slot-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SlotServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def limit(self) -> float:
        """Answers a second at most."""
        return self.slots / self.latency

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "served": self.served,
                "abandoned": self.abandoned,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "max_busy": self.max_busy,
            }

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._slots = asyncio.Semaphore(self.slots)

        async def open_server() -> None:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", self.port_wanted, backlog=4096
            )

        loop.run_until_complete(open_server())
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    # -- one connection -----------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _version = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (x.partition(":") for x in lines[1:] if x)
            }
            length = min(int(headers.get("content-length") or 0), MAX_BODY)
            body = await reader.readexactly(length) if length else b""
            if method == "GET" and path.rstrip("/") == "/stats":
                await self._send_json(writer, 200, self.stats())
            elif method == "GET" and path.rstrip("/").endswith("/models"):
                listing = {"object": "list", "data": [{"id": "slot-model", "object": "model"}]}
                await self._send_json(writer, 200, listing)
            elif method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                await self._chat(reader, writer, json.loads(body or b"{}"))
            else:
                await self._send_json(writer, 404, {"error": {"message": "no such route"}})
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception, asyncio.CancelledError):  # (the server stopping)
                writer.close()
                await writer.wait_closed()

    async def _chat(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: dict[str, object]
    ) -> None:
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
            self.prompts.append(str(messages[-1].get("content", "")))
        self._count(+1)
        # The headers go out at once, as a streaming server's do; the body waits for a slot.
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        gone = asyncio.ensure_future(reader.read(1))  # EOF: the client went away
        answered = False
        try:
            await writer.drain()
            assert self._slots is not None
            async with self._slots:
                self._busy += 1
                self.max_busy = max(self.max_busy, self._busy)
                try:
                    work = asyncio.ensure_future(asyncio.sleep(self.latency))
                    done, _ = await asyncio.wait({gone, work}, return_when=asyncio.FIRST_COMPLETED)
                    if gone in done:
                        work.cancel()
                        return
                finally:
                    self._busy -= 1
            await self._answer(writer, str(body.get("model", "")))
            answered = True
        finally:
            gone.cancel()
            self._count(-1)
            with self._lock:
                if answered:
                    self.served += 1
                else:
                    self.abandoned += 1

    def _count(self, change: int) -> None:
        with self._lock:
            self.in_flight += change
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    async def _answer(self, writer: asyncio.StreamWriter, model: str) -> None:
        def event(delta: dict[str, object], finish: str | None = None) -> bytes:
            chunk = {
                "id": "chatcmpl-slot",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(chunk)}\n\n".encode()

        usage = {
            "id": "chatcmpl-slot",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": {"prompt_tokens": 1000, "completion_tokens": self.completion_tokens},
        }
        answer = f"<predicted_observation>\n{self.observation}\n</predicted_observation>"
        payload = b"".join(
            [
                event({"role": "assistant", "content": ""}),
                event({"reasoning_content": "The command lists the folder."}),
                event({"content": answer}),
                event({}, "stop"),
                f"data: {json.dumps(usage)}\n\n".encode(),
                b"data: [DONE]\n\n",
            ]
        )
        writer.write(payload)
        await writer.drain()

    @staticmethod
    async def _send_json(writer: asyncio.StreamWriter, status: int, data: object) -> None:
        payload = json.dumps(data).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        await writer.drain()


def main() -> None:
    """Serve in a process of its own (a benchmark's server must not share the client's
    interpreter): prints the URL, serves until stdin closes; GET /stats gives the counts."""
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--completion-tokens", type=int, default=64)
    args = parser.parse_args()
    server = SlotServer(
        slots=args.slots, latency=args.latency, completion_tokens=args.completion_tokens
    ).start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
