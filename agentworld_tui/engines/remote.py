"""The world model on a server that speaks the OpenAI chat-completions API.

vLLM and SGLang serve the full model across GPUs; llama.cpp's servers serve GGUF files.
They differ in what they report, so this engine takes what each gives and falls back
where it is silent:

- thinking arrives in a separate ``reasoning_content`` (or ``reasoning``) field when the
  server runs a reasoning parser, otherwise inline, closed by ``</think>``; a parser may
  send the field empty (the model thought nothing), and the content is then the answer;
- the context size comes from ``max_model_len`` in ``/v1/models`` (vLLM, SGLang), or
  llama.cpp's ``/props``, or the first refusal of a prompt too long for it
  (llama-cpp-python's server says it nowhere else), else from the setting (``--ctx``),
  else 32768 is assumed for fitting the history (a turn's stats then say 0, unknown);
- token counts come from the usage the server reports (llama.cpp's server, vLLM and
  SGLang send it in the last chunk), else they are estimated from the streamed text with
  the same characters-per-token ratio as ``count_tokens``;
- ``count_tokens`` is an estimate (characters per token, recalibrated from the prompt
  sizes the server reports), because asking the server for every message of the history
  would cost a round trip each.

The server is not trusted to keep to the request: the engine stops reading once the
stream holds more than ``max_tokens`` tokens (counted from below: a chunk carries at
least one token, a token at most ``LONGEST_TOKEN_CHARS`` characters), and gives up on a
server that sends no chunk for ``idle_timeout`` seconds once the answer has begun
(``timeout`` before: a long prompt delays the first).

Besides the OpenAI API's own parameters the engine sends ``top_k`` and
``chat_template_kwargs`` (the thinking switch), which vLLM, SGLang and llama.cpp take and
some hosted APIs refuse. A request refused with 400 or 422 for them (or for ``seed``,
``top_p`` or ``stream_options`` when the refusal names one) is sent again without them,
and they stay left out for the engine's life: ``dropped_params`` says which.

Failures are described in ``server_errors``, each with its kind (``ErrorKind``), which
is what callers decide on.

A remote server cannot be made to stop reasoning and answer mid-stream (that needs
tokens injected into its sequence), so ``supports_answer_now`` is False and answer-now
requests and reasoning budgets are ignored.

The engine makes its clients at first use and closes them on ``unload``: the SDK's, for
the model list and the server's other endpoints, and the answer's own (``event_stream``:
the standard library's HTTP client, the request sent as plain JSON and the stream read as
plain JSON, its connections kept alive for the next answer, so no TCP or TLS handshake per
turn). One thread watches every stream's cancel request and silence, and ends the
connection of each that must end. With hundreds of streams at once, the SDK's layers, a
reader thread per stream and each stream waking itself to look had each cost a large
share of the CPU.

The API key is read from the environment variable named by ``api_key_env`` each time a
request is made and put in that request's headers only: neither the engine nor its client
keeps it, so it cannot reach settings, sessions, exports or logs.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from agentworld_tui.engines.base import (
    AnswerDelta,
    EngineError,
    EngineEvent,
    EngineInfo,
    ErrorKind,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
    Message,
    ProgressCallback,
    ReasoningDelta,
    StopReason,
)
from agentworld_tui.engines.server_errors import (
    STREAMING,
    Asked,
    ContextRefusal,
    context_advice,
    context_refusal,
    describe,
    safe_line,
    server_kind,
    silent,
)
from agentworld_tui.engines.server_errors import shown_model as _shown_model
from agentworld_tui.world.splitter import ObservationSplitter

if TYPE_CHECKING:
    import httpx2
    import openai

    from agentworld_tui.engines.event_stream import Connections, EventStream

log = logging.getLogger("agentworld.remote")

DEFAULT_N_CTX = 32768
CHARS_PER_TOKEN = 3.0
"""Starting estimate; conservative for code, screens and JSON with Qwen's tokenizer."""
PROMPT_MARGIN = 1.15
"""Head-room on an estimated prompt size when capping max_tokens to the context."""
CONNECT_TIMEOUT_S = 10.0
POLL_S = 0.05
"""How often the cancel requests and the silence of the streams are looked at."""
LONGEST_TOKEN_CHARS = 256
"""More characters than any token of a real vocabulary holds."""
BLANK_CHUNK_SLACK = 16
"""Chunks without text that are not tokens (the role, the finish, keep-alives)."""
EXTRA_PARAMS = ("top_k", "chat_template_kwargs")
"""Parameters outside the OpenAI API: all are dropped when a server refuses a request."""
DROPPABLE_PARAMS = (*EXTRA_PARAMS, "seed", "top_p", "stream_options")
"""Parameters a request can do without, dropped when a refusal names them."""
_REFUSED_FIELD = re.compile(
    r"unrecogni[sz]ed|unknown|unsupported|not (?:permitted|allowed|supported)|"
    r"extra[ _](?:inputs?|fields?|param|parameters?|arguments?|forbidden)|"
    r"additional properties|invalid (?:request )?(?:param|parameters?|arguments?|fields?)",
    re.IGNORECASE,
)
"""How servers word a refusal of a field they do not know."""


def base_url(url: str) -> str:
    """The client's base URL: a bare ``host:port`` or a URL without a path gets ``/v1``."""
    text = url.strip()
    if text and "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def display_url(url: str) -> str:
    """The address to show and log: no user name, password or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


_STOP_REASONS: dict[str, StopReason] = {"stop": "eos", "length": "max_tokens"}


@dataclass
class _Counts:
    """The tokens the stream has produced so far.

    The server's own count where it reports one, else an estimate from the text; and,
    apart, a count that is never above the truth, for holding the server to max_tokens.
    """

    chars_per_token: float = CHARS_PER_TOKEN
    chars: int = 0
    reasoning_chars: int = 0
    pieces: int = 0
    """Chunks that carried text: at least one token each."""
    reasoning_pieces: int = 0
    content_pieces: int = 0
    """Chunks whose answer field carried text."""
    blanks: int = 0
    reported: int = 0
    """Completion tokens the server reported (0 until it does)."""
    reported_reasoning: int = 0
    first_at: float | None = None
    last_at: float | None = None

    @property
    def started(self) -> bool:
        return self.pieces > 0

    def chunk(self, reasoning: str, answer: str) -> None:
        """Count one chunk's text: its reasoning, and its answer (or inline reasoning)."""
        if not reasoning and not answer:
            self.blanks += 1
            return
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        self.pieces += 1
        self.chars += len(reasoning) + len(answer)
        self.reasoning_chars += len(reasoning)
        if reasoning:
            self.reasoning_pieces += 1

    def report(self, usage: Any) -> None:
        completion = _int(_field(usage, "completion_tokens"))
        if completion:
            self.reported = completion
            details = _field(usage, "completion_tokens_details")
            self.reported_reasoning = _int(_field(details, "reasoning_tokens"))

    @property
    def generated(self) -> int:
        if self.reported:
            return self.reported
        return max(self.pieces, math.ceil(self.chars / self.chars_per_token))

    @property
    def reasoning(self) -> int:
        if self.reported:
            if self.reported_reasoning:
                return self.reported_reasoning
            return round(self.reported * self.reasoning_chars / self.chars) if self.chars else 0
        return max(self.reasoning_pieces, math.ceil(self.reasoning_chars / self.chars_per_token))

    @property
    def at_least(self) -> int:
        """Tokens the server has surely generated, whatever it says."""
        return max(
            self.reported,
            self.pieces + max(0, self.blanks - BLANK_CHUNK_SLACK),
            math.ceil(self.chars / LONGEST_TOKEN_CHARS),
        )


def _reasoning_field(delta: Any) -> str | None:
    """The delta's reasoning (``reasoning_content``, or newer vLLM's ``reasoning``): None
    when it has neither field as text, "" when the server sent an empty one."""
    texts = [_field(delta, name) for name in ("reasoning_content", "reasoning")]
    given = [text for text in texts if isinstance(text, str)]
    if not given:
        return None
    return next((text for text in given if text), "")


def _field(value: Any, name: str) -> Any:
    """``value[name]`` when ``value`` is a JSON object that has it, else None."""
    return value.get(name) if isinstance(value, dict) else None


def _read_chunk(chunk: Any) -> tuple[Any, str | None, Any]:
    """The first choice's delta and finish reason, and the usage, whatever the chunk's shape.

    A chunk is the JSON value the server sent, unchecked (building the SDK's objects for
    every chunk cost more CPU than reading them), so a server may put anything in any
    field: what is not of the expected shape counts as absent.
    """
    usage = _field(chunk, "usage")
    choices = _field(chunk, "choices")
    if not isinstance(choices, list) or not choices:
        return None, None, usage
    choice = choices[0]
    finish = _field(choice, "finish_reason")
    return _field(choice, "delta"), finish if isinstance(finish, str) else None, usage


class _Watched:
    """One answer's stream under the watch, and why the watch ended it ("" while not)."""

    def __init__(self, stream: EventStream, control: Any, wait: float) -> None:
        self.stream = stream
        self.control = control
        self.wait = wait
        """Seconds the server may stay silent from ``last_at``."""
        self.last_at = time.monotonic()
        self.why = ""
        """"cancelled" (a stop) or "silent" (past ``wait`` with nothing sent)."""


class _StreamWatch:
    """Ends the streams that were stopped, or whose server stayed silent too long.

    A stream is read on the thread of its generation, blocked on the network between
    chunks; one thread looks at every stream's cancel request and silence, every
    ``POLL_S``, while there are any, and ends the connection of each that must end (the
    blocked read then returns). A thread per stream to wait on, or each stream waking
    itself that often to look, cost a large share of the process's CPU with a few hundred
    streams at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: set[_Watched] = set()
        self._running = False

    def watch(self, watched: _Watched) -> None:
        with self._lock:
            self._watched.add(watched)
            if not self._running:
                self._running = True
                thread = threading.Thread(target=self._run, name="remote-streams", daemon=True)
                thread.start()

    def forget(self, watched: _Watched) -> None:
        with self._lock:
            self._watched.discard(watched)

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            now = time.monotonic()
            with self._lock:
                if not self._watched:
                    self._running = False
                    return
                ending = []
                for watched in self._watched:
                    if _cancelled(watched.control):
                        watched.why = "cancelled"
                    elif now - watched.last_at > watched.wait:
                        watched.why = "silent"
                    else:
                        continue
                    ending.append(watched)
                self._watched.difference_update(ending)
            for watched in ending:
                try:
                    watched.stream.interrupt()
                except Exception:  # a stream that cannot be ended meets its own timeout
                    log.debug("ending a stream failed", exc_info=True)


def _cancelled(control: Any) -> bool:
    try:
        return bool(control.cancelled)
    except Exception:  # a broken control cannot stop the watch for every other stream
        log.debug("reading a cancel request failed", exc_info=True)
        return False


_WATCH = _StreamWatch()


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
        self.where = safe_line(display_url(self.base_url), 200)
        self.requested_model = model
        self.api_key_env = api_key_env
        """The name of the variable holding the key; the key itself is never stored."""
        self.requested_ctx = n_ctx
        self.timeout = timeout
        """Seconds to wait for a reply, and for the answer's first chunk (a long prompt
        delays it)."""
        self.idle_timeout = idle_timeout
        """Seconds to wait for the next chunk once the answer has begun."""
        self._model = model
        self._server = ""
        """The server software, when its model list says (for advice that names its flags)."""
        self._n_ctx = 0
        self._ctx_from_server = False
        self._loaded = False
        self._chars_per_token = CHARS_PER_TOKEN
        self._server_tokenizes = True
        self._dropped: set[str] = set()
        self._api: openai.OpenAI | None = None
        """The client, from first use to ``unload``; it holds no key."""
        self._connections: Connections | None = None
        """The answer streams' kept connections, from first use to ``unload``."""
        self._api_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """The settings and what was learnt of the server; a copy makes its own client."""
        state = self.__dict__.copy()
        state["_api"] = None
        state["_connections"] = None
        del state["_api_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._api_lock = threading.Lock()

    # -- the protocol ------------------------------------------------------------------
    @property
    def info(self) -> EngineInfo:
        name = _shown_model(self._model) if self._model else "(server model)"
        return EngineInfo(name, self.where, self._context_size(), remote=True)

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
        return self._ctx_from_server

    def load(self, progress: ProgressCallback | None = None) -> None:
        """Check that the server answers and serves the model; learn its context size."""
        say = progress or (lambda _msg: None)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EngineError(f"invalid server URL {self.url!r}: give one like http://host:8000/v1")
        self._check_key()
        say(f"connecting to {self.where}")
        try:
            reported = self._connect()
        except BaseException:
            self._close_client()  # no unload comes for an engine that did not load
            raise
        self._ctx_from_server = bool(reported)
        self._n_ctx = reported
        self._loaded = True
        log.info(
            "connected to %s: model=%s n_ctx=%d (%s)",
            self.where,
            _shown_model(self._model),
            self._context_size(),
            "reported by the server" if reported else "from the setting or default",
        )
        say("ready")

    def _connect(self) -> int:
        """Choose the model; the context size the server reports (0 if none)."""
        client = self._client()
        try:
            page = client.models.list(
                extra_headers=self._auth_headers(), timeout=self._timeout(self.timeout)
            )
            served = list(page.data)
        except Exception as exc:
            import openai

            if isinstance(exc, openai.NotFoundError) and self.requested_model:
                log.warning(
                    "%s does not list its models; using %s",
                    self.where,
                    _shown_model(self._model),
                )
                served = []
            else:
                raise self._failure(exc, "listing the models") from None
        names = [m.id for m in served if isinstance(getattr(m, "id", None), str)]
        self._model = self._choose_model(names)
        chosen = next((m for m in served if getattr(m, "id", None) == self._model), None)
        self._server = server_kind(getattr(chosen, "owned_by", None))
        reported = _int(getattr(chosen, "max_model_len", None)) if chosen is not None else 0
        return reported or self._llama_server_ctx(client)

    def unload(self) -> None:
        """Forget the connection and close the client (a later ``load`` makes another)."""
        self._loaded = False
        self._close_client()

    def count_tokens(self, text: str) -> int:
        """An estimate: characters over a ratio recalibrated from the server's counts."""
        return max(1, math.ceil(len(text) / self._chars_per_token))

    def stream(
        self, messages: list[Message], params: GenerationParams, control: GenerationControl
    ) -> Iterator[EngineEvent]:
        started = time.perf_counter()
        splitter = ObservationSplitter(starts_in_reasoning=params.enable_thinking)
        counts = _Counts(self._chars_per_token)
        prompt_chars = sum(len(m.get("content", "")) for m in messages)
        estimate = self._estimate(messages)
        if not self._loaded:
            unloaded = EngineError(f"not connected to {self.where}: the engine was not loaded")
            yield self._finish(splitter, counts, started, estimate, None, "error", unloaded)
            return
        try:
            self._check_key()
        except EngineError as exc:
            yield self._finish(splitter, counts, started, estimate, None, "error", exc)
            return
        max_tokens = params.max_tokens
        if self._ctx_from_server:
            estimate = self._server_prompt_tokens(messages) or estimate
            n_ctx = self._context_size()
            room = n_ctx - math.ceil(estimate * PROMPT_MARGIN)
            if room < 1:
                too_long = self._too_long(estimate)
                yield self._finish(splitter, counts, started, estimate, None, "error", too_long)
                return
            max_tokens = min(max_tokens, room)
        request = self._request(messages, params, max_tokens)
        finish: str | None = None
        usage: Any = None
        failure: EngineError | None = None
        stop: StopReason | None = None
        tried_without: set[str] = set()
        chunks = 0
        shortened = False
        while not control.cancelled:  # once, or again as a refusal allows (see below)
            stream = self._event_stream(request)
            watched = _Watched(stream, control, self.timeout)
            _WATCH.watch(watched)
            try:
                stream.open()
                for item in stream:
                    chunks += 1
                    watched.last_at = time.monotonic()
                    delta, finished, reported = _read_chunk(item)
                    if reported is not None:
                        usage = reported
                        counts.report(reported)
                    yield from self._deltas(splitter, counts, delta)
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
                    learnt = refusal is not None and self._learn_context(refusal, prompt_chars)
                    if refusal is not None and refusal.prompt_fits and not shortened:
                        shortened = True
                        max_tokens = min(max_tokens, refusal.n_ctx - refusal.prompt_tokens)
                        request = self._request(messages, params, max_tokens)
                        continue
                    blamed = set() if counts.started or refusal else self._blamed_params(exc)
                    if blamed:
                        self._dropped |= blamed
                        tried_without |= blamed
                        request = self._request(messages, params, max_tokens)
                        continue
                    self._dropped -= tried_without  # leaving them out did not help
                    tried_without = set()
                    doing = STREAMING if counts.started else "starting the answer"
                    failure = self._failure(exc, doing, learnt=learnt)
            finally:
                _WATCH.forget(watched)
                stream.close()
            break
        if stop is None and failure is None and control.cancelled:
            stop = "cancelled"
        notice = self._say_dropped(tried_without) if tried_without else ""
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
                stop = _STOP_REASONS.get(finish, "eos")
        if failure is not None:
            log.warning("remote turn failed (%s): %s", failure.kind, failure)
        if _int(_field(usage, "prompt_tokens")):
            self._calibrate(prompt_chars, _int(_field(usage, "prompt_tokens")))
        yield from self._flush(splitter, counts)
        yield self._finish(splitter, counts, started, estimate, usage, stop, failure, notice)

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
            self._client().post(
                "/chat/completions",
                cast_to=object,
                body=probe,
                options={
                    "headers": self._auth_headers(),
                    "timeout": self._timeout(CONNECT_TIMEOUT_S),
                },
            )
        except Exception as exc:
            refusal = context_refusal(exc)
            if refusal is None:
                return None
            chars = sum(len(str(m.get("content", ""))) for m in request["messages"])
            learnt = self._learn_context(refusal, chars)
            return self._failure(exc, "starting the answer", learnt=learnt)
        return None

    def _learn_context(self, refusal: ContextRefusal, prompt_chars: int) -> bool:
        """Take the sizes a server's refusal gave (its context, so that later prompts fit
        it; the prompt's, for the token estimate); True when the context was new."""
        self._calibrate(prompt_chars, refusal.prompt_tokens)
        if refusal.server and not self._server:
            self._server = refusal.server
        if not refusal.n_ctx or refusal.n_ctx == self._n_ctx:
            return False
        log.info("%s says its context holds %d tokens", self.where, refusal.n_ctx)
        self._n_ctx = refusal.n_ctx
        self._ctx_from_server = True
        return True

    def _too_long(self, prompt: int) -> EngineError:
        """A prompt of about ``prompt`` tokens that leaves no room in the known context."""
        n_ctx = self._context_size()
        if self.requested_ctx and self._n_ctx > self.requested_ctx:
            return EngineError(
                f"the prompt is about {prompt} tokens and the context holds {n_ctx} (--ctx): "
                f"raise --ctx (the server offers {self._n_ctx}), or start a new session or "
                "shorten the state",
                ErrorKind.CONTEXT_TOO_LONG,
            )
        refusal = ContextRefusal(n_ctx, prompt, estimated=True)
        text = context_advice(refusal, self._server, self.where)
        return EngineError(text, ErrorKind.CONTEXT_TOO_LONG)

    # -- the request -------------------------------------------------------------------
    def _request(
        self, messages: list[Message], params: GenerationParams, max_tokens: int
    ) -> dict[str, Any]:
        """The request's body, as sent: plain JSON values only (see ``_open_stream``)."""
        optional: dict[str, Any] = {
            "stream_options": {"include_usage": True},
            "top_p": params.top_p,
        }
        if params.seed >= 0:
            optional["seed"] = params.seed
        extra = {
            "top_k": params.top_k if params.top_k > 0 else -1,
            "chat_template_kwargs": {"enable_thinking": params.enable_thinking},
        }
        request: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "stream": True,
            "temperature": params.temperature,
            "max_tokens": max_tokens,
            **{k: v for k, v in {**optional, **extra}.items() if k not in self._dropped},
        }
        return request

    def _blamed_params(self, exc: BaseException) -> set[str]:
        """The parameters a 400 or 422 refusal blames that requests still send: worth
        sending the request again without them."""
        import openai

        if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
            return set()
        try:
            body = exc.response.text  # already cut short by the client's bounds
        except Exception:  # a body that could not be read blames nothing
            body = ""
        text = f"{exc.message} {body}"
        named = {p for p in DROPPABLE_PARAMS if re.search(rf"\b{p}\b", text)}
        if not named and not _REFUSED_FIELD.search(text):
            return set()
        return (named | set(EXTRA_PARAMS)) - self._dropped

    def _say_dropped(self, dropped: set[str]) -> str:
        """Log the parameters left out, and give the turn's notice of it."""
        notice = f"the server refused {', '.join(sorted(dropped))}; left out from now on" + (
            " (the thinking switch no longer reaches it)"
            if "chat_template_kwargs" in dropped
            else ""
        )
        log.warning("%s: %s", self.where, notice)
        return notice

    def _event_stream(self, request: dict[str, Any]) -> EventStream:
        """The answer's request, not sent yet (``engines/event_stream``: the body goes out
        as it is and the events come back as the JSON the server sent, through the
        standard library's client; the SDK's layers cost more CPU than all the rest of a
        step). The stream's pauses are timed by the watch (``_StreamWatch``); the socket's
        own timeout is only a backstop."""
        from agentworld_tui.engines.event_stream import Connections, EventStream

        with self._api_lock:
            if self._connections is None:
                self._connections = Connections(f"{self.base_url.rstrip('/')}/chat/completions")
            connections = self._connections
        key = self._key()
        return EventStream(
            connections,
            request,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=max(self.timeout, self.idle_timeout) + CONNECT_TIMEOUT_S,
        )

    def _deltas(
        self, splitter: ObservationSplitter, counts: _Counts, delta: Any
    ) -> Iterator[EngineEvent]:
        field = _reasoning_field(delta)
        reasoning = field or ""
        content = _field(delta, "content")
        content = content if isinstance(content, str) else ""
        shown = ""
        if field is not None and (reasoning or not counts.content_pieces):
            # The server runs a reasoning parser: even an empty field (the model thought
            # nothing) means the content is the answer. Once content was read inline, an
            # empty field changes nothing.
            shown = splitter.feed_reasoning(reasoning)
        inline = splitter.in_reasoning
        counts.chunk(reasoning + (content if inline else ""), "" if inline else content)
        if shown:
            yield ReasoningDelta(shown, counts.generated, counts.reasoning)
        if content:
            counts.content_pieces += 1
            yield from self._events(splitter, splitter.feed(content), counts)

    @staticmethod
    def _events(
        splitter: ObservationSplitter, fed: tuple[str, str, bool], counts: _Counts
    ) -> Iterator[EngineEvent]:
        reasoning, answer, reset = fed
        if reasoning:
            yield ReasoningDelta(reasoning, counts.generated, counts.reasoning)
        if answer or reset:
            yield AnswerDelta(answer, counts.generated, reset)

    def _flush(self, splitter: ObservationSplitter, counts: _Counts) -> Iterator[EngineEvent]:
        _split, reasoning, answer, reset = splitter.finish()
        yield from self._events(splitter, (reasoning, answer, reset), counts)

    def _finish(
        self,
        splitter: ObservationSplitter,
        counts: _Counts,
        started: float,
        estimate: int,
        usage: Any,
        stop: StopReason,
        failure: EngineError | None,
        notice: str = "",
    ) -> Finished:
        """The last event: the split, the stats, and the output as the server sent it.

        ``raw`` is the answer text as streamed; when the server sent the reasoning apart
        (a reasoning parser), it comes first in think tags:
        ``"<think>" + reasoning + "</think>" + content``.
        """
        split = splitter.finish()[0]
        prompt = _int(_field(usage, "prompt_tokens")) or estimate
        evaluated = prompt
        details = _field(usage, "prompt_tokens_details")
        cached = _field(details, "cached_tokens")
        if isinstance(cached, int) and 0 <= cached <= prompt:
            evaluated = prompt - cached
        generated = _int(_field(usage, "completion_tokens")) or counts.generated
        completion_details = _field(usage, "completion_tokens_details")
        reasoning = _int(_field(completion_details, "reasoning_tokens"))
        if not reasoning and counts.chars:
            # From the text as finally split: inline text the stream counted as reasoning
            # until it turned out to be the answer (no think tags at all) is not.
            reasoning = round(generated * len(split.reasoning) / counts.chars)
        rate = 0.0
        if counts.first_at is not None and counts.last_at is not None and generated > 1:
            span = counts.last_at - counts.first_at
            rate = (generated - 1) / span if span > 0 else 0.0
        stats = GenerationStats(
            prompt_tokens=prompt,
            evaluated_prompt_tokens=evaluated,
            generated_tokens=generated,
            reasoning_tokens=min(reasoning, generated),
            time_to_first_token=(counts.first_at or time.perf_counter()) - started,
            tokens_per_second=rate,
            elapsed=time.perf_counter() - started,
            stop_reason=stop,
            n_ctx=self._known_context(),
        )
        return Finished(
            split.reasoning,
            split.observation,
            split.closed_reasoning,
            stats,
            str(failure) if failure is not None else "",
            raw=splitter.raw,
            extraction=split.extraction,
            notice=notice,
            content=splitter.content,
            error_kind=failure.kind if failure is not None else None,
        )

    # -- context and tokens ------------------------------------------------------------
    def _context_size(self) -> int:
        """The server's context, capped by the setting; the setting or default if unknown."""
        if self._n_ctx and self.requested_ctx:
            return min(self._n_ctx, self.requested_ctx)
        return self._n_ctx or self.requested_ctx or DEFAULT_N_CTX

    def _known_context(self) -> int:
        """The context as the server or the setting gave it; 0 when only assumed."""
        if self._n_ctx and self.requested_ctx:
            return min(self._n_ctx, self.requested_ctx)
        return self._n_ctx or self.requested_ctx

    def _estimate(self, messages: list[Message]) -> int:
        per_message = 4  # role markers the chat template adds
        return sum(self.count_tokens(m.get("content", "")) + per_message for m in messages)

    def _calibrate(self, chars: int, tokens: int) -> None:
        if chars > 0 and tokens > 0:
            self._chars_per_token = min(8.0, max(1.0, chars / tokens))

    def _server_prompt_tokens(self, messages: list[Message]) -> int:
        """The exact prompt size from vLLM's ``/tokenize``; 0 where it is not served."""
        if not self._server_tokenizes:
            return 0
        root = self.base_url.removesuffix("/v1")
        body = {"model": self._model, "messages": messages, "add_generation_prompt": True}
        try:
            reply = self._client().post(
                root + "/tokenize",
                cast_to=object,
                body=body,
                options={
                    "headers": self._auth_headers(),
                    "timeout": self._timeout(CONNECT_TIMEOUT_S),
                },
            )
        except Exception as exc:
            log.info(
                "%s has no usable /tokenize (%s); estimating prompt sizes",
                self.where,
                self._failure(exc, "counting the prompt"),
            )
            self._server_tokenizes = False
            return 0
        count = _int(reply.get("count")) if isinstance(reply, dict) else 0
        if count:
            self._calibrate(sum(len(m.get("content", "")) for m in messages), count)
        else:
            self._server_tokenizes = False
        return count

    def _llama_server_ctx(self, client: openai.OpenAI) -> int:
        """llama.cpp's ``llama-server`` reports its context in ``/props``."""
        root = self.base_url.removesuffix("/v1")
        try:
            props = client.get(
                root + "/props",
                cast_to=object,
                options={"headers": self._auth_headers(), "timeout": self._timeout(self.timeout)},
            )
        except Exception:
            return 0
        if not isinstance(props, dict):
            return 0
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(settings, dict) and not self._server:
            self._server = "llama-server"
        return _int(n_ctx) or _int(props.get("n_ctx"))

    def _choose_model(self, names: list[str]) -> str:
        wanted = self.requested_model
        shown = ", ".join(_shown_model(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        if wanted:
            if names and wanted not in names:
                raise EngineError(
                    f"{self.where} does not serve '{_shown_model(wanted)}'; it serves: {shown}",
                    ErrorKind.NOT_FOUND,
                )
            return wanted
        if len(names) == 1:
            return names[0]
        if not names:
            raise EngineError(
                f"{self.where} lists no models; name one with --server-model NAME",
                ErrorKind.NOT_FOUND,
            )
        raise EngineError(
            f"{self.where} serves {len(names)} models ({shown}); choose one with --server-model NAME"
        )

    # -- the key and the client ----------------------------------------------------------
    def _check_key(self) -> None:
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise EngineError(
                f"the environment variable {self.api_key_env} (named by --api-key-env) is "
                "not set or empty: export it with the server's API key",
                ErrorKind.AUTH,
            )
        self._key()

    def _key(self) -> str:
        """The key, read now ("" for none); one that a header cannot carry is refused
        without showing it (the HTTP client's error would quote the header whole)."""
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if not all("!" <= c <= "~" for c in key):
            raise EngineError(
                f"the environment variable {self.api_key_env} (named by --api-key-env) holds "
                "characters an HTTP header cannot carry (a line break, a space, a control or "
                "non-ASCII character): export the key alone",
                ErrorKind.AUTH,
            )
        return key

    def _auth_headers(self) -> dict[str, Any]:
        """The headers that carry the key, read now; every request sends them. With no
        key, the Authorization header is left out entirely."""
        key = self._key()
        if key:
            return {"Authorization": f"Bearer {key}"}
        import openai

        return {"Authorization": openai.Omit()}

    @staticmethod
    def _timeout(read_timeout: float) -> httpx2.Timeout:
        """A request's timeouts; its read timeout also bounds the time a reply other than
        the answer's stream may take (``bounded_http``)."""
        import httpx2

        return httpx2.Timeout(read_timeout, connect=CONNECT_TIMEOUT_S)

    def _client(self) -> openai.OpenAI:
        """The engine's client: made at first use, shared by every request and thread
        (a pool of connections), closed by ``unload``.

        It holds no key: each request sends its own (``_auth_headers``). Its replies are
        bounded in size, and those other than the answer's stream in time (the request's
        read timeout).
        """
        with self._api_lock:
            if self._api is None:
                import openai

                from agentworld_tui.engines.bounded_http import bounded_client

                timeout = self._timeout(self.timeout)
                self._api = openai.OpenAI(
                    base_url=self.base_url,
                    api_key="no-key",  # never sent: every request names its own header
                    timeout=timeout,
                    max_retries=0,
                    http_client=bounded_client(timeout),
                )
            return self._api

    def _close_client(self) -> None:
        with self._api_lock:
            client, self._api = self._api, None
            connections, self._connections = self._connections, None
        if client is not None:
            client.close()
        if connections is not None:
            connections.close()

    # -- errors ----------------------------------------------------------------------------
    def _failure(self, exc: BaseException, doing: str, *, learnt: bool = False) -> EngineError:
        """What went wrong talking to the server: its kind and what to try."""
        asked = Asked(
            self.where,
            doing,
            self.timeout,
            api_key_env=self.api_key_env,
            model=self._model,
            server=self._server,
            learnt=learnt,
        )
        return describe(exc, asked)
