"""What a server's failure means: its kind, one line that says what to do, and, for a prompt
too long for the server's context, the sizes the server gave.

The remote engine hands every exception of a request here (``describe``) and gets back an
``EngineError`` whose ``kind`` (``ErrorKind``) is what callers decide on. Servers word a
context refusal in their own ways (llama-server's typed error with ``n_ctx``, vLLM's and
llama-cpp-python's "maximum context length is N tokens", SGLang's "context length (N
tokens)"); ``context_refusal`` reads the sizes from any of them, and ``context_advice`` names
the setting of the server at hand that would make room.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentworld_tui.engines.base import EngineError, ErrorKind
from agentworld_tui.engines.remote.transport import (
    ErrorEvent,
    ReplyRefused,
    StatusError,
    TimedOut,
    Unreachable,
)
from agentworld_tui.world.sanitize import one_line

STREAMING = "streaming the answer"

SERVER_CONTEXT_FLAGS = {
    "llama_cpp.server": "--n_ctx",
    "llama-server": "-c",
    "vLLM": "--max-model-len",
    "SGLang": "--context-length",
}
"""The flag that sets the context of each server the engine can tell apart."""
_OWNERS = {"me": "llama_cpp.server", "llamacpp": "llama-server", "vllm": "vLLM", "sglang": "SGLang"}
"""``owned_by`` in ``/v1/models``, as each server fills it."""

_CONTEXT_SIZE = (
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"maximum context length (?:is|of) (\d+)", re.IGNORECASE),
    re.compile(r"context (?:size|length) \((\d+) tokens?\)", re.IGNORECASE),
)
_PROMPT_SIZE = (
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),
    re.compile(r"(\d+) (?:tokens )?in the messages", re.IGNORECASE),
    re.compile(r"(\d+) tokens from the input", re.IGNORECASE),
    re.compile(r"has (\d+) input tokens", re.IGNORECASE),
    re.compile(r"(?:request|input) \((\d+) tokens?\)", re.IGNORECASE),
)
_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error"}


def safe_line(text: object, limit: int = 240) -> str:
    """Text a server sent, made fit to show: one line, no escapes or controls, bounded.

    Error bodies, error events and model ids reach the screen, stderr and the log; a
    hostile server could otherwise set the window title or write the clipboard there.
    """
    raw = str(text)[: 4 * limit + 8192]  # sanitize bounds an unterminated sequence
    return one_line(raw, limit)


def shown_model(name: str) -> str:
    return safe_line(name, 80)


def causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def server_message(exc: StatusError | ErrorEvent) -> str:
    body = exc.body
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return safe_line(value)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return safe_line(value["message"])
            if isinstance(value, list) and value and isinstance(value[0], dict):
                # FastAPI's validation errors: [{"loc": ["body", "top_k"], "msg": ...}]
                first = value[0]
                where = ".".join(str(part) for part in first.get("loc") or [] if part != "body")
                return safe_line(f"{where}: {first.get('msg', '')}" if where else first.get("msg"))
    if isinstance(body, str) and body:
        return safe_line(body)
    return safe_line(exc.message)


def server_kind(owned_by: object) -> str:
    """The server software a model list names ("" when it cannot be told)."""
    return _OWNERS.get(owned_by, "") if isinstance(owned_by, str) else ""


# -- a prompt too long for the context --------------------------------------------------------
@dataclass(frozen=True)
class ContextRefusal:
    """A server's refusal of a request too long for its context, with the sizes it gave
    (0 where it gave none)."""

    n_ctx: int
    prompt_tokens: int
    server: str = ""
    """The server software, when its reply says (llama-server's error type)."""
    estimated: bool = False
    """``prompt_tokens`` is the engine's estimate, not the server's count."""

    @property
    def prompt_fits(self) -> bool:
        """The prompt alone fits: only the room asked for the answer was too much."""
        return 0 < self.prompt_tokens < self.n_ctx


def context_refusal(exc: BaseException) -> ContextRefusal | None:
    """The sizes in a server's refusal of a prompt too long for its context; None when
    ``exc`` is not such a refusal."""
    if not isinstance(exc, StatusError) or exc.status not in (400, 413, 422):
        return None
    body = exc.body
    fields: dict[str, Any] = body if isinstance(body, dict) else {}
    text = " ".join(str(part) for part in (exc.message, fields.get("message", ""), body))
    code = {str(fields.get(key, "")) for key in ("code", "type")}
    n_ctx = _number(fields.get("n_ctx")) or _first(_CONTEXT_SIZE, text)
    if not n_ctx and not code & _CONTEXT_CODES:
        return None
    prompt = _number(fields.get("n_prompt_tokens")) or _first(_PROMPT_SIZE, text)
    server = "llama-server" if "exceed_context_size_error" in code else ""
    return ContextRefusal(n_ctx, prompt, server)


def context_advice(
    refusal: ContextRefusal, server: str, where: str, *, learnt: bool = False
) -> str:
    """One line: the sizes, and the setting that makes room on the server at hand.

    ``learnt``: the context size is new to the engine, which fits later prompts to it.
    """
    server = refusal.server or server
    if refusal.prompt_tokens and refusal.n_ctx:
        about = "about " if refusal.estimated else ""
        sizes = (
            f"the prompt is {about}{refusal.prompt_tokens} tokens and the context holds "
            f"{refusal.n_ctx} on {where}"
        )
    elif refusal.n_ctx:
        sizes = f"the prompt does not fit the context of {refusal.n_ctx} tokens on {where}"
    else:
        sizes = f"the prompt does not fit the context on {where}"
    wanted = _room_for(refusal.prompt_tokens)
    flag = SERVER_CONTEXT_FLAGS.get(server)
    if flag:
        change = f"restart {server} with a larger context ({flag} {wanted})"
    else:
        flags = ", ".join(f"{f} for {name}" for name, f in SERVER_CONTEXT_FLAGS.items())
        change = f"restart the server with a larger context ({wanted} or more: {flags})"
    fitted = f"; meanwhile older turns are left out to fit {refusal.n_ctx}" if learnt else ""
    return f"{sizes}: {change}, or start a new session or shorten the state{fitted}"


def _room_for(prompt_tokens: int) -> int:
    """A context size that holds the prompt and a long answer: a power of two."""
    wanted = max(prompt_tokens, 1) + 4096
    return 1 << (wanted - 1).bit_length()


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return 0


# -- every other failure ------------------------------------------------------------------------
@dataclass(frozen=True)
class Asked:
    """What the failed request was, for its message."""

    where: str
    """The server's address as shown."""
    doing: str
    """What the engine was doing: "listing the models", ``STREAMING``..."""
    timeout: float
    api_key_env: str = ""
    model: str = ""
    server: str = ""
    """The server software, when the model list told it."""
    learnt: bool = False
    """A context refusal's size is new to the engine (see ``context_advice``)."""


def describe(exc: BaseException, asked: Asked) -> EngineError:
    """The failure of a request as an ``EngineError``: its kind, and one line that says
    what went wrong and what to try."""
    if isinstance(exc, EngineError):  # already one line that says what to do
        return exc
    where, doing = asked.where, asked.doing
    kept = "; the partial output is kept" if doing == STREAMING else ""
    refused = next((c for c in causes(exc) if isinstance(c, ReplyRefused)), None)
    if refused is not None:
        return EngineError(
            f"{where} {refused} while {doing}{kept}; the server may be broken or hostile",
            ErrorKind.BAD_REPLY,
        )
    if isinstance(exc, TimedOut):
        return EngineError(
            f"{where} sent nothing for {asked.timeout:g} s while {doing} (timeout){kept}; "
            "the server may be busy or stuck, try again",
            ErrorKind.TIMEOUT,
        )
    if isinstance(exc, Unreachable):
        return EngineError(_unreachable(exc, asked, kept), ErrorKind.TRANSIENT)
    if isinstance(exc, StatusError):
        return _refusal(exc, asked)
    if isinstance(exc, ErrorEvent):
        return EngineError(
            f"{where} reported an error while {doing}: {server_message(exc)}{kept}",
            ErrorKind.FAILED,
        )
    return EngineError(
        f"unexpected reply from {where} while {doing}: {type(exc).__name__}: {safe_line(exc, 160)}",
        ErrorKind.BAD_REPLY,
    )


def _refusal(exc: StatusError, asked: Asked) -> EngineError:
    """A reply of status 300 or more: what the status means here."""
    where, doing, status = asked.where, asked.doing, exc.status
    if status == 401:
        if asked.api_key_env:
            text = (
                f"{where} rejected the API key in ${asked.api_key_env} (401 unauthorized): "
                f"{server_message(exc)}"
            )
        else:
            text = (
                f"{where} needs an API key (401 unauthorized): put it in an environment "
                "variable and pass --api-key-env VAR"
            )
        return EngineError(text, ErrorKind.AUTH)
    if status == 403:
        return EngineError(
            f"{where} refused access (403 forbidden): {server_message(exc)}", ErrorKind.AUTH
        )
    if status == 404:
        if doing == "listing the models":
            text = (
                f"no OpenAI-compatible API at {where} (404 on /models); the URL usually ends in /v1"
            )
        else:
            model = shown_model(asked.model)
            text = f"{where} answered 404 (model '{model}'?): {server_message(exc)}"
        return EngineError(text, ErrorKind.NOT_FOUND)
    if status < 400:
        to = f" to {safe_line(exc.location, 160)}" if exc.location else ""
        return EngineError(
            f"{where} redirects{to} (HTTP {status}) while {doing}: give the address it "
            "redirects to (requests are not redirected, so the key goes nowhere else)",
            ErrorKind.REFUSED,
        )
    refusal = context_refusal(exc)
    if refusal is not None:
        text = context_advice(refusal, asked.server, where, learnt=asked.learnt)
        return EngineError(text, ErrorKind.CONTEXT_TOO_LONG)
    text = f"{where} answered HTTP {status} while {doing}: {server_message(exc)}"
    if status >= 500 or status == 429:
        return EngineError(text + "; try again", ErrorKind.TRANSIENT)
    return EngineError(text, ErrorKind.REFUSED)


def _unreachable(exc: BaseException, asked: Asked, kept: str) -> str:
    where = asked.where
    for cause in causes(exc):
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return (
                f"cannot connect to {where}: connection refused (is the server running, and "
                "are the host and port right?)"
            )
        if isinstance(cause, socket.gaierror) or "name resolution" in str(cause).lower():
            return f"cannot connect to {where}: unknown host (check the server's name)"
    cause_text = next((str(c) for c in list(causes(exc))[1:] if str(c)), type(exc).__name__)
    if asked.doing == STREAMING:
        return (
            f"the connection to {where} broke during the answer "
            f"({safe_line(cause_text, 120)}){kept}; try again"
        )
    return f"cannot reach {where} while {asked.doing}: {safe_line(cause_text, 160)}"


def silent(where: str, seconds: float, *, streaming: bool) -> EngineError:
    """A server that sent nothing for ``seconds``."""
    if not streaming:
        return EngineError(
            f"{where} sent nothing for {seconds:g} s while starting the answer (timeout); "
            "the server may be busy or stuck, try again",
            ErrorKind.TIMEOUT,
        )
    return EngineError(
        f"{where} sent nothing for {seconds:g} s while streaming the answer (idle timeout); "
        "the partial output is kept; the server may be busy or stuck, try again ([server] "
        "idle_timeout sets how long to wait)",
        ErrorKind.TIMEOUT,
    )
