"""The Engine protocol over a server that speaks the OpenAI chat-completions API.

vLLM and SGLang serve the full model across GPUs; llama.cpp's servers serve GGUF files.
What the engine learns of each is in ``discovery``; how chunks become events, in
``reading``; what a request carries, in ``requests``; every request goes through one HTTP
client (``transport``, the answer's stream in ``events``), and every failure is described,
with its kind, in ``errors``.

The server is not trusted to keep to the request: the engine stops reading once the
stream holds more than ``max_tokens`` tokens (counted from below: ``reading.Counts``), and
gives up on a server that sends no chunk for ``idle_timeout`` seconds once the answer has
begun (``timeout`` before: a long prompt delays the first); the watch (``watch``) ends
such a stream, or one that was stopped.

A refused request is sent again where that can help: without the parameters a refusal
blames (``requests``), or with less room for the answer when the prompt alone fits the
context the refusal names. A remote server cannot be made to stop reasoning and answer
mid-stream (that needs tokens injected into its sequence), so ``supports_answer_now`` is
False and answer-now requests and reasoning budgets are ignored.

The engine makes its connections at first use and closes them on ``unload``. The API key
is read at each request and kept nowhere (``requests.auth_headers``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from agentworld_tui.engines.base import (
    EngineError,
    EngineEvent,
    EngineInfo,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    Message,
    ProgressCallback,
    StopReason,
)
from agentworld_tui.engines.remote.discovery import (
    Served,
    base_url,
    llama_server_ctx,
    shown_where,
)
from agentworld_tui.engines.remote.errors import (
    STREAMING,
    Asked,
    ContextRefusal,
    context_advice,
    context_refusal,
    describe,
    silent,
)
from agentworld_tui.engines.remote.events import EventStream
from agentworld_tui.engines.remote.reading import (
    STOP_REASONS,
    AnswerReader,
    count,
    field,
    read_chunk,
)
from agentworld_tui.engines.remote.requests import (
    answer_request,
    auth_headers,
    blamed_params,
    check_key,
    dropped_notice,
)
from agentworld_tui.engines.remote.transport import Connections, StatusError, fetch_json
from agentworld_tui.engines.remote.watch import WATCH, Watched

log = logging.getLogger("agentworld.remote")

PROMPT_MARGIN = 1.15
"""Head-room on an estimated prompt size when capping max_tokens to the context."""
CONNECT_TIMEOUT_S = 10.0


class RemoteEngine:
    """The Engine protocol over an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        url: str,
        *,
        model: str = "",
        api_key_env: str = "",
        n_ctx: int = 0,
        timeout: float = 300.0,
        idle_timeout: float = 120.0,
    ) -> None:
        self.url = url
        self.base_url = base_url(url)
        self.where = shown_where(self.base_url)
        self.requested_model = model
        self.api_key_env = api_key_env
        """The name of the variable holding the key; the key itself is never stored."""
        self.requested_ctx = n_ctx
        self.timeout = timeout
        """Seconds to wait for a reply, and for the answer's first chunk (a long prompt
        delays it)."""
        self.idle_timeout = idle_timeout
        """Seconds to wait for the next chunk once the answer has begun."""
        self._served = Served(self.where, model, n_ctx, model=model)
        self._loaded = False
        self._dropped: set[str] = set()
        self._connections: Connections | None = None
        """The server's kept connections, from first use to ``unload``; they hold no key."""
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """The settings and what was learnt of the server; a copy makes its own connections."""
        state = self.__dict__.copy()
        state["_connections"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- the protocol ------------------------------------------------------------------
    @property
    def info(self) -> EngineInfo:
        return EngineInfo(
            self._served.shown(), self.where, self._served.context_size(), remote=True
        )

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def supports_answer_now(self) -> bool:
        """A server cannot be told to close its reasoning mid-stream."""
        return False

    @property
    def dropped_params(self) -> tuple[str, ...]:
        """Parameters the server refused, left out of every request since (for display)."""
        return tuple(sorted(self._dropped))

    @property
    def context_reported(self) -> bool:
        """Whether the context size came from the server rather than a setting or default."""
        return self._served.ctx_from_server

    def load(self, progress: ProgressCallback | None = None) -> None:
        """Check that the server answers and serves the model; learn its context size."""
        say = progress or (lambda _msg: None)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EngineError(f"invalid server URL {self.url!r}: give one like http://host:8000/v1")
        check_key(self.api_key_env)
        say(f"connecting to {self.where}")
        try:
            reported = self._connect()
        except BaseException:
            self._close_client()  # no unload comes for an engine that did not load
            raise
        served = self._served
        served.ctx_from_server = bool(reported)
        served.n_ctx = reported
        self._loaded = True
        log.info(
            "connected to %s: model=%s n_ctx=%d (%s)",
            self.where,
            served.shown(),
            served.context_size(),
            "reported by the server" if reported else "from the setting or default",
        )
        say("ready")

    def _connect(self) -> int:
        """Choose the model; the context size the server reports (0 if none)."""
        served = self._served
        try:
            listing = self._fetch("GET", "/models", timeout=self.timeout)
        except Exception as exc:
            if isinstance(exc, StatusError) and exc.status == 404 and self.requested_model:
                log.warning("%s does not list its models; using %s", self.where, served.shown())
                listing = None
            else:
                raise self._failure(exc, "listing the models") from None
        reported = served.take_listing(listing)
        return reported or self._llama_server_ctx()

    def unload(self) -> None:
        """Forget the connection and close the client (a later ``load`` makes another)."""
        self._loaded = False
        self._close_client()

    def count_tokens(self, text: str) -> int:
        """An estimate: characters over a ratio recalibrated from the server's counts."""
        return self._served.count_tokens(text)

    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        served = self._served
        reader = AnswerReader(
            thinking=params.enable_thinking, chars_per_token=served.chars_per_token
        )
        prompt_chars = sum(len(m.get("content", "")) for m in messages)
        estimate = served.estimate(messages)

        def ended(failure: EngineError) -> Finished:
            return reader.finished(
                estimate=estimate,
                usage=None,
                stop="error",
                failure=failure,
                n_ctx=served.known_context(),
            )

        if not self._loaded:
            yield ended(EngineError(f"not connected to {self.where}: the engine was not loaded"))
            return
        try:
            check_key(self.api_key_env)
        except EngineError as exc:
            yield ended(exc)
            return
        max_tokens = params.max_tokens
        if served.ctx_from_server:
            estimate = self._server_prompt_tokens(messages) or estimate
            room = served.context_size() - math.ceil(estimate * PROMPT_MARGIN)
            if room < 1:
                yield ended(self._too_long(estimate))
                return
            max_tokens = min(max_tokens, room)
        request = answer_request(served.model, messages, params, max_tokens, self._dropped)
        finish: str | None = None
        usage: Any = None
        failure: EngineError | None = None
        stop: StopReason | None = None
        tried_without: set[str] = set()
        chunks = 0
        shortened = False
        counts = reader.counts
        while not control.cancelled:  # once, or again as a refusal allows (see below)
            stream = self._event_stream(request)
            watched = Watched(stream, control, self.timeout)
            WATCH.watch(watched)
            try:
                stream.open()
                for item in stream:
                    chunks += 1
                    watched.last_at = time.monotonic()
                    delta, finished, reported = read_chunk(item)
                    if reported is not None:
                        usage = reported
                        counts.report(reported)
                    yield from reader.feed(delta)
                    if finished:
                        finish = finished
                    if counts.started:
                        watched.wait = self.idle_timeout
                    if control.take_answer_request():
                        log.info("answer-now is not available on a remote server; ignored")
                    if control.cancelled:
                        break
                    if counts.at_least > max_tokens:
                        log.warning(
                            "%s kept sending past max_tokens (%d); the stream was closed",
                            self.where,
                            max_tokens,
                        )
                        stop = "max_tokens"
                        break
            except Exception as exc:
                if watched.why == "silent":
                    failure = silent(self.where, watched.wait, streaming=counts.started)
                elif not (watched.why or control.cancelled):
                    refusal = None if counts.started else context_refusal(exc)
                    learnt = refusal is not None and served.learn_context(refusal, prompt_chars)
                    if refusal is not None and refusal.prompt_fits and not shortened:
                        shortened = True
                        max_tokens = min(max_tokens, refusal.n_ctx - refusal.prompt_tokens)
                        request = answer_request(
                            served.model, messages, params, max_tokens, self._dropped
                        )
                        continue
                    blamed = (
                        set() if counts.started or refusal else blamed_params(exc, self._dropped)
                    )
                    if blamed:
                        self._dropped |= blamed
                        tried_without |= blamed
                        request = answer_request(
                            served.model, messages, params, max_tokens, self._dropped
                        )
                        continue
                    self._dropped -= tried_without  # leaving them out did not help
                    tried_without = set()
                    doing = STREAMING if counts.started else "starting the answer"
                    failure = self._failure(exc, doing, learnt=learnt)
            finally:
                WATCH.forget(watched)
                stream.close()
            break
        if stop is None and failure is None and control.cancelled:
            stop = "cancelled"
        notice = ""
        if tried_without:
            notice = dropped_notice(tried_without)
            log.warning("%s: %s", self.where, notice)
        if stop is None:
            if failure is not None:
                stop = "error"
            elif finish is None:
                stop = "error"
                failure = (self._why_empty(request) if not chunks else None) or EngineError(
                    f"the stream from {self.where} ended before the answer was finished "
                    "(the connection was cut); the partial output is kept, try again",
                    ErrorKind.TRANSIENT,
                )
            elif finish == "abort":
                stop = "error"
                failure = EngineError(
                    f"{self.where} aborted the request; try again", ErrorKind.TRANSIENT
                )
            else:
                stop = STOP_REASONS.get(finish, "eos")
        if failure is not None:
            log.warning("remote turn failed (%s): %s", failure.kind, failure)
        if count(field(usage, "prompt_tokens")):
            served.calibrate(prompt_chars, count(field(usage, "prompt_tokens")))
        yield from reader.flush()
        yield reader.finished(
            estimate=estimate,
            usage=usage,
            stop=stop,
            failure=failure,
            n_ctx=served.known_context(),
            notice=notice,
        )

    def _why_empty(self, request: dict[str, Any]) -> EngineError | None:
        """Why a server answered with an empty stream, if it says so when asked without one.

        llama-cpp-python's server starts a streamed reply before it reads the prompt, and
        when the prompt does not fit its context it ends the stream without a word (the
        reason goes to its own log). The same request, not streamed and for one token,
        gets the refusal with its sizes, at once; a request that is being answered, or
        that goes through, leaves the empty stream unexplained (None), and is not waited
        for longer than a connection.
        """
        probe = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        probe["max_tokens"] = 1
        try:
            self._fetch("POST", "/chat/completions", probe, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:
            refusal = context_refusal(exc)
            if refusal is None:
                return None
            chars = sum(len(str(m.get("content", ""))) for m in request["messages"])
            learnt = self._served.learn_context(refusal, chars)
            return self._failure(exc, "starting the answer", learnt=learnt)
        return None

    def _too_long(self, prompt: int) -> EngineError:
        """A prompt of about ``prompt`` tokens that leaves no room in the known context."""
        served = self._served
        n_ctx = served.context_size()
        if self.requested_ctx and served.n_ctx > self.requested_ctx:
            return EngineError(
                f"the prompt is about {prompt} tokens and the context holds {n_ctx} (--ctx): "
                f"raise --ctx (the server offers {served.n_ctx}), or start a new session or "
                "shorten the state",
                ErrorKind.CONTEXT_TOO_LONG,
            )
        refusal = ContextRefusal(n_ctx, prompt, estimated=True)
        text = context_advice(refusal, served.server, self.where)
        return EngineError(text, ErrorKind.CONTEXT_TOO_LONG)

    # -- the server's other endpoints ------------------------------------------------------
    def _server_prompt_tokens(self, messages: list[Message]) -> int:
        """The exact prompt size from vLLM's ``/tokenize``; 0 where it is not served."""
        served = self._served
        if not served.tokenizes:
            return 0
        body = {"model": served.model, "messages": messages, "add_generation_prompt": True}
        try:
            reply = self._fetch("POST", "/tokenize", body, timeout=CONNECT_TIMEOUT_S, root=True)
        except Exception as exc:
            log.info(
                "%s has no usable /tokenize (%s); estimating prompt sizes",
                self.where,
                self._failure(exc, "counting the prompt"),
            )
            served.tokenizes = False
            return 0
        return served.take_token_count(reply, messages)

    def _llama_server_ctx(self) -> int:
        """llama.cpp's ``llama-server`` reports its context in ``/props``."""
        try:
            props = self._fetch("GET", "/props", timeout=self.timeout, root=True)
        except Exception:
            return 0
        n_ctx, is_llama_server = llama_server_ctx(props)
        if is_llama_server and not self._served.server:
            self._served.server = "llama-server"
        return n_ctx

    # -- the connections -------------------------------------------------------------------
    def _fetch(
        self, method: str, path: str, body: Any = None, *, timeout: float, root: bool = False
    ) -> Any:
        """One request other than the answer's, its reply read whole (within its bounds):
        ``path`` under the API's base URL, or under the server's root."""
        base = self.base_url.removesuffix("/v1") if root else self.base_url.rstrip("/")
        return fetch_json(
            self._client(),
            method,
            base + path,
            body=body,
            headers=auth_headers(self.api_key_env),
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=timeout,
        )

    def _event_stream(self, request: dict[str, Any]) -> EventStream:
        """The answer's request, not sent yet. The stream's pauses are timed by the watch;
        the socket's own timeout is only a backstop."""
        return EventStream(
            self._client(),
            f"{self.base_url.rstrip('/')}/chat/completions",
            request,
            headers=auth_headers(self.api_key_env),
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=max(self.timeout, self.idle_timeout) + CONNECT_TIMEOUT_S,
        )

    def _client(self) -> Connections:
        """The engine's connections: made at first use, shared by every request and
        thread, closed by ``unload``. They hold no key: each request sends its own."""
        with self._lock:
            if self._connections is None:
                self._connections = Connections(self.base_url)
            return self._connections

    def _close_client(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, None
        if connections is not None:
            connections.close()

    def _failure(self, exc: BaseException, doing: str, *, learnt: bool = False) -> EngineError:
        """What went wrong talking to the server: its kind and what to try."""
        served = self._served
        asked = Asked(
            self.where,
            doing,
            self.timeout,
            api_key_env=self.api_key_env,
            model=served.model,
            server=served.server,
            learnt=learnt,
        )
        return describe(exc, asked)
