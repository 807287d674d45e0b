"""What a request to the server carries: the answer's body, the parameters a server refused
(left out from then on), and the API key.

Besides the OpenAI API's own parameters the engine sends ``top_k`` and
``chat_template_kwargs`` (the thinking switch), which vLLM, SGLang and llama.cpp take and
some hosted APIs refuse. A request refused with 400 or 422 for them (or for ``seed``,
``top_p`` or ``stream_options`` when the refusal names one) is sent again without them,
and they stay left out for the engine's life.

The API key is read from the environment variable named by ``api_key_env`` each time a
request is made and put in that request's headers only: nothing keeps it, so it cannot
reach settings, sessions, exports or logs.
"""

from __future__ import annotations

import os
import re
from typing import Any

from agentworld_tui.engines.base import EngineError, ErrorKind, GenerationParams, Message
from agentworld_tui.engines.remote.transport import StatusError

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
"""How servers word a refusal of a field they do not know (the server's words, not ours)."""


def answer_request(
    model: str,
    messages: list[Message],
    params: GenerationParams,
    max_tokens: int,
    dropped: set[str],
) -> dict[str, Any]:
    """The answer's request body, as sent: plain JSON values only."""
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
    return {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "stream": True,
        "temperature": params.temperature,
        "max_tokens": max_tokens,
        **{k: v for k, v in {**optional, **extra}.items() if k not in dropped},
    }


def blamed_params(exc: BaseException, dropped: set[str]) -> set[str]:
    """The parameters a 400 or 422 refusal blames that requests still send: worth sending
    the request again without them."""
    if not isinstance(exc, StatusError) or exc.status not in (400, 422):
        return set()
    text = f"{exc.message} {exc.text}"
    named = {p for p in DROPPABLE_PARAMS if re.search(rf"\b{p}\b", text)}
    if not named and not _REFUSED_FIELD.search(text):
        return set()
    return (named | set(EXTRA_PARAMS)) - dropped


def dropped_notice(dropped: set[str]) -> str:
    """A turn's notice that the server refused parameters, left out from now on."""
    thinking = " (the thinking switch no longer reaches it)"
    return f"the server refused {', '.join(sorted(dropped))}; left out from now on" + (
        thinking if "chat_template_kwargs" in dropped else ""
    )


# -- the key ----------------------------------------------------------------------------------
def check_key(api_key_env: str) -> None:
    """Refuse a key that is named but missing, or that a header cannot carry."""
    if api_key_env and not os.environ.get(api_key_env):
        raise EngineError(
            f"the environment variable {api_key_env} (named by --api-key-env) is "
            "not set or empty: export it with the server's API key",
            ErrorKind.AUTH,
        )
    auth_headers(api_key_env)


def auth_headers(api_key_env: str) -> dict[str, str]:
    """The headers that carry the key, read now (none without a key). A key that a header
    cannot carry is refused without showing it (an HTTP client's error would quote the
    header whole)."""
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    if not all("!" <= c <= "~" for c in key):
        raise EngineError(
            f"the environment variable {api_key_env} (named by --api-key-env) holds "
            "characters an HTTP header cannot carry (a line break, a space, a control or "
            "non-ASCII character): export the key alone",
            ErrorKind.AUTH,
        )
    return {"Authorization": f"Bearer {key}"} if key else {}
