"""Render a conversation with the model file's own chat template, in a sandbox.

A GGUF file is untrusted input and its chat template is Jinja code: rendering it without a
sandbox is a known code-execution hole in GGUF loaders. Templates here run in Jinja's
ImmutableSandboxedEnvironment with only the helpers chat templates expect.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agentworld_tui.engines.base import EngineError, Message
from agentworld_tui.world.sanitize import sanitize

# Used when a model file has no template: ChatML, opening the reasoning block like the
# Qwen-AgentWorld template does.
FALLBACK_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{%- else -%}{{ '<think>\\n' }}{%- endif -%}"
    "{%- endif -%}"
)


def _raise_exception(message: str) -> None:
    # The message comes from the model file: shown as one clean line, like any model text.
    shown = " ".join(sanitize(str(message)).split())
    raise EngineError(f"the model's chat template refused the conversation: {shown}")


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _strftime_now(fmt: str) -> str:
    return time.strftime(fmt)


class ChatTemplate:
    def __init__(self, source: str | None, *, bos_token: str = "", eos_token: str = "") -> None:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.source = source or FALLBACK_TEMPLATE
        self.from_model = bool(source)
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(self.source)
        except TemplateError as exc:
            raise EngineError(f"the model's chat template does not compile: {exc}") from exc
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool = True,
        enable_thinking: bool = True,
    ) -> str:
        from jinja2 import TemplateError

        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                enable_thinking=enable_thinking,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=None,
            )
        except EngineError:
            raise
        except TemplateError as exc:
            raise EngineError(f"the model's chat template failed: {exc}") from exc
        except Exception as exc:  # untrusted code: 1/0, endless recursion, huge ranges...
            raise EngineError(
                f"the model's chat template failed: {type(exc).__name__}: {exc}"
            ) from exc


def opens_reasoning(prompt: str) -> bool:
    """Whether the rendered prompt ends inside an open ``<think>`` block."""
    return prompt.rfind("<think>") > prompt.rfind("</think>")
