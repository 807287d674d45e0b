"""A scripted policy model: a real OpenAI-compatible server on 127.0.0.1 whose replies are
tool calls from a script.

Rollout tests need a policy that acts the same way every time. The server is stateless:
the reply to a request is the script's entry for the number of assistant messages the
request already holds (the first request gets entry 0, the request after one tool-call
round gets entry 1...), so any number of episodes can run against it at once. Past the
end of the script the policy says it is done (no tool call). Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETION_TOKENS = 7


@dataclass(frozen=True)
class Call:
    """A tool call; ``arguments`` as text is sent as it is (a broken JSON, say)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True)
class Say:
    """A message without a tool call."""

    text: str


@dataclass(frozen=True)
class Fail:
    """An HTTP error instead of an answer."""

    status: int = 500
    message: str = "the policy server broke"


Turn = Call | Say | Fail | list[Call]
Script = Sequence[Turn] | Callable[[dict[str, Any]], Turn]


class PolicyServer:
    """Start with ``start()`` (or as a context manager); ``url`` ends in ``/v1``."""

    def __init__(self, script: Script, *, delay: float = 0.0, model: str = "policy") -> None:
        self.script = script
        self.delay = delay
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._calls = 0

    def start(self) -> PolicyServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def turn_for(self, body: dict[str, Any]) -> Turn:
        if callable(self.script):
            return self.script(body)
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return self.script[done] if done < len(self.script) else Say("The task is done.")

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            self._calls += 1
            number = self._calls
        if self.delay:
            time.sleep(self.delay)
        turn = self.turn_for(body)
        if isinstance(turn, Fail):
            return turn.status, {"error": {"message": turn.message, "type": "server_error"}}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, Say):
            message["content"] = turn.text
            finish = "stop"
        else:
            calls = turn if isinstance(turn, list) else [turn]
            message["tool_calls"] = [
                {
                    "id": f"call_{number}_{i}",
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(c.arguments),
                    },
                }
                for i, c in enumerate(calls)
            ]
            finish = "tool_calls"
        prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4
        return 200, {
            "id": f"chatcmpl-policy-{number}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": prompt + COMPLETION_TOKENS,
            },
        }


class _Handler(BaseHTTPRequestHandler):
    server_owner: PolicyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            listing = {
                "object": "list",
                "data": [{"id": self.server_owner.model, "object": "model"}],
            }
            self._json(200, listing)
        else:
            self._json(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "no such route"}})
            return
        status, reply = self.server_owner.answer(body)
        self._json(status, reply)

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
