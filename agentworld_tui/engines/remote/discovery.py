"""What the engine learns of a server: its address, the model it serves, the server
software, the context size, and how many characters a token holds.

Servers differ in what they report, so each fact is taken where it is given and falls back
where the server is silent:

- the model is the one asked for, or the only one the model list names;
- the context size comes from ``max_model_len`` in ``/v1/models`` (vLLM, SGLang), or
  llama.cpp's ``/props``, or the first refusal of a prompt too long for it
  (llama-cpp-python's server says it nowhere else), else from the setting (``--ctx``),
  else ``DEFAULT_N_CTX`` is assumed for fitting the history (a turn's stats then say 0,
  unknown);
- a prompt's size is vLLM's ``/tokenize`` count where it serves one, else an estimate
  (characters per token, recalibrated from the prompt sizes the server reports), because
  asking the server for every message of the history would cost a round trip each.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentworld_tui.engines.base import EngineError, ErrorKind, Message
from agentworld_tui.engines.remote.errors import ContextRefusal, safe_line, server_kind, shown_model
from agentworld_tui.engines.remote.reading import CHARS_PER_TOKEN, count

log = logging.getLogger("agentworld.remote")

DEFAULT_N_CTX = 32768
MAX_CHARS_PER_TOKEN = 8.0


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


def model_names(listing: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """The model ids of a ``/v1/models`` reply, and its entries, whatever its shape: an
    entry without a text id is left out."""
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    served = [e for e in entries if isinstance(e.get("id"), str)]
    return [e["id"] for e in served], served


def llama_server_ctx(props: Any) -> tuple[int, bool]:
    """The context in llama.cpp's ``/props`` (0 if none), and whether the reply is
    llama-server's."""
    if not isinstance(props, dict):
        return 0, False
    settings = props.get("default_generation_settings")
    is_llama_server = isinstance(settings, dict)
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return count(n_ctx) or count(props.get("n_ctx")), is_llama_server


@dataclass
class Served:
    """The server as the engine knows it, from its load on."""

    where: str
    """The server's address as shown."""
    requested_model: str = ""
    requested_ctx: int = 0
    model: str = ""
    server: str = ""
    """The server software, when the server says (for advice that names its flags)."""
    n_ctx: int = 0
    """The context the server reported or refused with (0: unknown)."""
    ctx_from_server: bool = False
    chars_per_token: float = CHARS_PER_TOKEN
    tokenizes: bool = True
    """Whether ``/tokenize`` is worth asking (until it fails once)."""

    def choose_model(self, names: list[str]) -> str:
        wanted = self.requested_model
        shown = ", ".join(shown_model(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        if wanted:
            if names and wanted not in names:
                raise EngineError(
                    f"{self.where} does not serve '{shown_model(wanted)}'; it serves: {shown}",
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
            f"{self.where} serves {len(names)} models ({shown}); choose one with "
            "--server-model NAME"
        )

    def take_listing(self, listing: Any) -> int:
        """Choose the model from a model list; the context it reports (0 if none)."""
        names, served = model_names(listing)
        self.model = self.choose_model(names)
        chosen = next((e for e in served if e["id"] == self.model), None)
        self.server = server_kind(chosen.get("owned_by") if chosen else None)
        return count(chosen.get("max_model_len")) if chosen else 0

    def context_size(self) -> int:
        """The server's context, capped by the setting; the setting or default if unknown."""
        return self.known_context() or DEFAULT_N_CTX

    def known_context(self) -> int:
        """The context as the server or the setting gave it; 0 when only assumed."""
        if self.n_ctx and self.requested_ctx:
            return min(self.n_ctx, self.requested_ctx)
        return self.n_ctx or self.requested_ctx

    def count_tokens(self, text: str) -> int:
        """An estimate: characters over a ratio recalibrated from the server's counts."""
        return max(1, math.ceil(len(text) / self.chars_per_token))

    def estimate(self, messages: list[Message]) -> int:
        per_message = 4  # role markers the chat template adds
        return sum(self.count_tokens(m.get("content", "")) + per_message for m in messages)

    def calibrate(self, chars: int, tokens: int) -> None:
        if chars > 0 and tokens > 0:
            self.chars_per_token = min(MAX_CHARS_PER_TOKEN, max(1.0, chars / tokens))

    def take_token_count(self, reply: Any, messages: list[Message]) -> int:
        """A ``/tokenize`` reply's count (0 when it has none: not asked again)."""
        tokens = count(reply.get("count")) if isinstance(reply, dict) else 0
        if tokens:
            self.calibrate(sum(len(m.get("content", "")) for m in messages), tokens)
        else:
            self.tokenizes = False
        return tokens

    def learn_context(self, refusal: ContextRefusal, prompt_chars: int) -> bool:
        """Take the sizes a server's refusal gave (its context, so that later prompts fit
        it; the prompt's, for the token estimate); True when the context was new."""
        self.calibrate(prompt_chars, refusal.prompt_tokens)
        if refusal.server and not self.server:
            self.server = refusal.server
        if not refusal.n_ctx or refusal.n_ctx == self.n_ctx:
            return False
        log.info("%s says its context holds %d tokens", self.where, refusal.n_ctx)
        self.n_ctx = refusal.n_ctx
        self.ctx_from_server = True
        return True

    def shown(self) -> str:
        """The model's name as shown."""
        return shown_model(self.model) if self.model else "(server model)"


def shown_where(url: str) -> str:
    """A server's address, fit to show and log."""
    return safe_line(display_url(url), 200)
