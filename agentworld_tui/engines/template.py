"""Render a conversation with the model file's own chat template, in a bounded sandbox.

A GGUF file is untrusted input and its chat template is Jinja code: rendering it without a
sandbox is a known code-execution hole in GGUF loaders. Templates here run in Jinja's
ImmutableSandboxedEnvironment with only the helpers chat templates expect.

A sandbox keeps a template from the system, not from the CPU or memory: nested loops can
run for ever and a repeated prompt can fill gigabytes. So every render is also bounded,
while it runs: in steps of work (each loop iteration, call, filter and output counts one),
in time, and in the size of any text or value it builds, which is checked before the
operation that would build it (``*``, ``+``, ``%``, ``~``, filters, string methods, block
captures, namespace assignments). The render stops at the first step past a bound, or
once its ``GenerationControl`` is cancelled, with an EngineError that says which.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from agentworld_tui.engines.base import EngineError, GenerationControl, Message
from agentworld_tui.world.sanitize import one_line

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.runtime import Context

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

RENDER_TIME_LIMIT_S = 10.0
MIN_TEXT_LIMIT = 1 << 20
"""Characters a render may build, at least; more for a longer conversation."""
TEXT_PER_INPUT_CHAR = 4
MIN_STEP_LIMIT = 1_000_000
STEPS_PER_INPUT_CHAR = 4
BUILT_PER_TEXT = 4
"""All the text a render outputs anywhere (block captures and macros too), in multiples
of its text limit."""
MAX_INT_BITS = 1 << 14


class TemplateLimitError(EngineError):
    """A chat template went past a bound while rendering."""


class RenderCancelled(EngineError):
    """The render was stopped through its GenerationControl."""


class _Bounds:
    """The bounds of one render, and what it has used of them."""

    def __init__(
        self, messages: list[Message], control: GenerationControl | None, time_limit_s: float
    ) -> None:
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        self.text_limit = MIN_TEXT_LIMIT + TEXT_PER_INPUT_CHAR * chars
        self.step_limit = MIN_STEP_LIMIT + STEPS_PER_INPUT_CHAR * chars
        self.built_limit = BUILT_PER_TEXT * self.text_limit
        self.time_limit_s = time_limit_s
        self.deadline = time.monotonic() + time_limit_s
        self.control = control
        self.steps = 0
        self.built = 0
        self._sizes: dict[int, tuple[object, int]] = {}

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.step_limit:
            raise TemplateLimitError(
                f"the model's chat template did more than {self.step_limit:,} steps of work "
                "rendering the prompt (a loop without end?)"
            )
        if self.control is not None and self.control.cancelled:
            raise RenderCancelled("rendering the chat template was stopped")
        if time.monotonic() > self.deadline:
            raise TemplateLimitError(
                f"the model's chat template took more than {self.time_limit_s:g} s to render "
                "the prompt"
            )

    def too_big(self, what: str) -> TemplateLimitError:
        return TemplateLimitError(
            f"the model's chat template tried to build {what} of more than "
            f"{self.text_limit:,} characters"
        )

    def check(self, size: int, what: str = "a text") -> None:
        if size > self.text_limit:
            raise self.too_big(what)

    def size(self, value: Any) -> int:
        """About how many characters ``value`` becomes as text (a string's length; a
        container's items, each as often as it is held), counted only up to the limit."""
        if isinstance(value, (str, bytes)):
            return len(value)
        if not isinstance(value, (list, tuple, dict, set, frozenset)):
            return 8
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        total = 0
        pending: list[Any] = [value]
        while pending and total <= self.text_limit:
            item = pending.pop()
            if isinstance(item, (str, bytes)):
                total += len(item)
            elif isinstance(item, dict):
                total += 2 + 4 * len(item)
                pending.extend(item.keys())
                pending.extend(item.values())
            elif isinstance(item, (list, tuple, set, frozenset)):
                total += 2 + 2 * len(item)
                pending.extend(item)
            else:
                total += 8
        self._sizes[id(value)] = (value, total)  # the value is kept: its id stays its own
        return total

    def check_value(self, value: Any, what: str = "a value") -> None:
        self.check(self.size(value), what)

    def add_built(self, size: int) -> None:
        self.built += size
        if self.built > self.built_limit:
            raise TemplateLimitError(
                f"the model's chat template wrote more than {self.built_limit:,} characters "
                "rendering the prompt"
            )


_active = threading.local()


def _bounds() -> _Bounds:
    """The running render's bounds. With none, Jinja is folding constants while it
    compiles: the operation is left to run (bounded) at render time."""
    bounds: _Bounds | None = getattr(_active, "bounds", None)
    if bounds is None:
        from jinja2 import nodes

        raise nodes.Impossible()
    return bounds


def _raise_exception(message: str) -> None:
    # The message comes from the model file: shown as one clean line, like any model text.
    shown = one_line(str(message))
    raise EngineError(f"the model's chat template refused the conversation: {shown}")


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _strftime_now(fmt: str) -> str:
    return time.strftime(fmt)


_DIGITS = re.compile(r"\d+")


def _check_format(bounds: _Bounds, fmt: str, args: Iterable[Any]) -> None:
    """A width or precision in a format (written in it, or taken from the arguments) is
    the size of the text it makes."""
    for digits in _DIGITS.findall(fmt):
        if len(digits) > 12 or int(digits) > bounds.text_limit:
            raise bounds.too_big("a formatted text")
    for arg in args:
        if isinstance(arg, int) and abs(arg) > bounds.text_limit:
            raise bounds.too_big("a formatted text")


def _check_sizes(bounds: _Bounds, args: Iterable[Any]) -> None:
    """Numbers given to something that makes text of that size (a width, a count)."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > bounds.text_limit:
            raise bounds.too_big("a text")
        if isinstance(arg, str):
            bounds.check(len(arg))


def _replaced_size(text: str, old: Any, new: Any, count: Any) -> int:
    old, new = str(old), str(new)
    found = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(0, len(new) - len(old))


def _joined(bounds: _Bounds, separator: str, items: Iterable[Any]) -> list[Any]:
    """The items to join, once the text they make is known to fit."""
    listed = []
    size = 0
    for item in items:
        bounds.step()
        listed.append(item)
        size += bounds.size(item) + len(separator)
        bounds.check(size, "a joined text")
    return listed


def _checked_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that counts a step and checks what it would build, before and after."""
    takes_context = getattr(function, "jinja_pass_arg", None) is not None

    @functools.wraps(function)  # keeps Jinja's pass_context/pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        bounds = _bounds()
        bounds.step()
        lead, values = (args[:1], list(args[1:])) if takes_context else ((), list(args))
        for value in (*values, *kwargs.values()):
            bounds.check_value(value)
        if values:
            _check_filter(bounds, name, values, kwargs)
        result = function(*lead, *values, **kwargs)
        if isinstance(result, (str, list, tuple, dict)):
            bounds.check_value(result)
        return result

    return bounded


def _check_filter(bounds: _Bounds, name: str, values: list[Any], kwargs: dict[str, Any]) -> None:
    """Check what the filter ``name`` would build from ``values`` (the filtered value and
    its arguments); an iterable it would consume is made a list first, in steps."""

    def arg(index: int, key: str, default: Any) -> Any:
        return values[index] if len(values) > index else kwargs.get(key, default)

    if name == "replace":
        old, new, count = arg(1, "old", None), arg(2, "new", None), arg(3, "count", None)
        if old is not None and new is not None:
            bounds.check(_replaced_size(str(values[0]), old, new, count))
    elif name == "tojson":
        indent = arg(1, "indent", None)
        if isinstance(indent, int):  # an indented line per item, each item at least 2
            _check_sizes(bounds, [indent])
            size = bounds.size(values[0])
            bounds.check(size + max(0, indent) * size // 2, "a JSON text")
    elif name in ("center", "indent", "wordwrap", "batch", "slice", "truncate"):
        _check_sizes(bounds, [*values[1:], *kwargs.values()])
        if name == "indent":
            width = arg(1, "width", 4)
            per_line = len(width) if isinstance(width, str) else width
            if isinstance(per_line, int):
                text = str(values[0])
                bounds.check(len(text) + max(0, per_line) * (text.count("\n") + 1))
    elif name == "format":
        _check_format(bounds, str(values[0]), [*values[1:], *kwargs.values()])
    elif name == "join" and not isinstance(values[0], str):
        values[0] = _joined(bounds, str(arg(1, "d", "")), values[0])
    elif name == "sum" and isinstance(arg(2, "start", 0), (str, list, tuple)):
        values[0] = _joined(bounds, "", values[0])
        bounds.check(bounds.size(values[0]) + bounds.size(arg(2, "start", 0)))


def _bounded_concat(parts: Iterable[str]) -> str:
    """What a block capture, macro body or filter block joins (``environment.concat``)."""
    bounds = _bounds()
    listed = list(parts)
    bounds.check(sum(len(p) for p in listed), "a block of text")
    bounds.step()
    return "".join(listed)


def _finalize(value: Any) -> Any:
    """Every ``{{ ... }}`` output, before it becomes text."""
    bounds = _bounds()
    bounds.step()
    size = bounds.size(value)
    bounds.check(size, "an output")
    bounds.add_built(size)
    return value


class _BoundedIterator:
    """A loop's iterable, one step per item."""

    def __init__(self, iterable: Iterable[Any], bounds: _Bounds) -> None:
        self._iterable = iterable
        self._items = iter(iterable)
        self._bounds = bounds

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        self._bounds.step()
        return next(self._items)

    def __len__(self) -> int:  # loop.length; a TypeError makes Jinja count the items
        return len(self._iterable)  # type: ignore[arg-type]


@functools.cache
def _environment() -> tuple[Any, Any]:
    """The bounded sandbox, and the transformer that puts a parsed template under it.

    (Built on first use: Jinja is imported only when a template is.)
    """
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace
    from jinja2.visitor import NodeTransformer

    class BoundedNamespace(Namespace):
        """``namespace()``, whose assignments (a loop's carried state) are checked."""

        def __setitem__(self, name: str, value: Any) -> None:
            bounds = _bounds()
            bounds.step()
            bounds.check_value(value)
            super().__setitem__(name, value)

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def bounded_iter(self, iterable: Iterable[Any]) -> _BoundedIterator:
            return _BoundedIterator(iterable, _bounds())

        def bounded_join(self, *parts: Any) -> str:
            """The ``~`` operator."""
            bounds = _bounds()
            bounds.step()
            bounds.check(sum(bounds.size(p) for p in parts), "a joined text")
            joined = "".join(str(p) for p in parts)
            bounds.check(len(joined), "a joined text")
            return joined

        def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            if getattr(obj, "__self__", None) is self:  # bounded_iter, bounded_join
                return context.call(obj, *args, **kwargs)
            bounds = _bounds()
            bounds.step()
            for arg in (*args, *kwargs.values()):
                bounds.check_value(arg)
            method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
            owner = getattr(method, "__self__", None)
            if isinstance(owner, str):
                args = self._check_method(bounds, owner, method.__name__, args, kwargs)
            result = super().call(context, obj, *args, **kwargs)
            if isinstance(result, (str, list, tuple, dict)):
                bounds.check_value(result)
            return result

        @staticmethod
        def _check_method(
            bounds: _Bounds, text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[Any, ...]:
            if name == "replace" and len(args) >= 2:
                count = args[2] if len(args) > 2 else kwargs.get("count", -1)
                bounds.check(_replaced_size(text, args[0], args[1], count))
            elif name == "join" and args:
                return (_joined(bounds, text, args[0]), *args[1:])
            elif name == "expandtabs":
                size = args[0] if args else kwargs.get("tabsize", 8)
                if isinstance(size, int):
                    bounds.check(len(text) + text.count("\t") * max(0, size))
            elif name in ("center", "ljust", "rjust", "zfill"):
                _check_sizes(bounds, [*args, *kwargs.values()])
            elif name == "translate" and args and isinstance(args[0], dict):
                longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
                bounds.check(len(text) * max(1, longest))
            elif name in ("format", "format_map"):
                _check_format(bounds, text, [*args, *kwargs.values()])
            return args

        def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
            bounds = _bounds()
            bounds.step()
            if operator == "%" and isinstance(left, str):
                if isinstance(right, dict):
                    _check_format(bounds, left, right.values())
                else:
                    _check_format(bounds, left, right if isinstance(right, tuple) else (right,))
            elif operator == "*":
                for sequence, times in ((left, right), (right, left)):
                    if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(times, int):
                        bounds.check(bounds.size(sequence) * max(0, times), "a repeated value")
                both_int = isinstance(left, int) and isinstance(right, int)
                if both_int and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise bounds.too_big("a number")
            elif operator == "**" and isinstance(left, int) and isinstance(right, int):
                if abs(left) > 1 and right * left.bit_length() > MAX_INT_BITS:
                    raise bounds.too_big("a number")
            elif operator == "+" and isinstance(left, (str, bytes, list, tuple)):
                bounds.check(bounds.size(left) + bounds.size(right), "a joined value")
            return super().call_binop(context, operator, left, right)

    def bounded(name: str, args: list[Any], lineno: int) -> nodes.Call:
        function = nodes.EnvironmentAttribute(name, lineno=lineno)
        return nodes.Call(function, args, [], None, None, lineno=lineno)

    class Guard(NodeTransformer):
        """Puts each loop's iterable and each ``~`` under the bounds."""

        def visit_For(self, node: nodes.For) -> nodes.Node:
            self.generic_visit(node)
            node.iter = bounded("bounded_iter", [node.iter], node.lineno)
            return node

        def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
            self.generic_visit(node)
            return bounded("bounded_join", list(node.nodes), node.lineno)

    env = BoundedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols"],
        finalize=_finalize,
    )
    env.filters["tojson"] = _tojson
    env.filters = {name: _checked_filter(name, f) for name, f in env.filters.items()}
    env.globals.pop("lipsum", None)  # makes pages of text from one small number
    env.globals["namespace"] = BoundedNamespace
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.concat = _bounded_concat  # type: ignore[method-assign]
    return env, Guard()


class ChatTemplate:
    def __init__(
        self,
        source: str | None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        time_limit_s: float = RENDER_TIME_LIMIT_S,
    ) -> None:
        from jinja2 import TemplateError

        self.source = source or FALLBACK_TEMPLATE
        self.from_model = bool(source)
        self.time_limit_s = time_limit_s
        env, guard = _environment()
        try:
            tree = guard.visit(env.parse(self.source))
            tree.set_environment(env)
            self._template = env.from_string(tree)
        except TemplateError as exc:
            raise EngineError(f"the model's chat template does not compile: {exc}") from exc
        except RecursionError as exc:
            raise EngineError(
                "the model's chat template does not compile: nested too deeply"
            ) from exc
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool = True,
        enable_thinking: bool = True,
        control: GenerationControl | None = None,
    ) -> str:
        """The prompt; an EngineError past a bound (RenderCancelled once ``control`` is
        cancelled)."""
        from jinja2 import TemplateError

        bounds = _Bounds(messages, control, self.time_limit_s)
        _active.bounds = bounds
        try:
            parts: list[str] = []
            size = 0
            for part in self._template.generate(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                enable_thinking=enable_thinking,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=None,
            ):
                size += len(part)
                bounds.check(size, "a prompt")
                parts.append(part)
            return "".join(parts)
        except EngineError:
            raise
        except TemplateError as exc:
            raise EngineError(f"the model's chat template failed: {exc}") from exc
        except Exception as exc:  # untrusted code: 1/0, endless recursion, huge ranges...
            raise EngineError(
                f"the model's chat template failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            _active.bounds = None

    def render_turn(
        self,
        messages: list[Message],
        *,
        enable_thinking: bool = True,
        control: GenerationControl | None = None,
    ) -> tuple[str, str]:
        """The prompt and its history part (everything before the generation prompt),
        where the next turn's prompt goes on: an engine keeps the state there."""
        prompt = self.render(messages, enable_thinking=enable_thinking, control=control)
        history = self.render(
            messages, add_generation_prompt=False, enable_thinking=enable_thinking, control=control
        )
        return prompt, history

    def blank_last(self, messages: list[Message], *, enable_thinking: bool = True) -> str:
        """The prompt with the last message's content left empty ("" with one message, or
        when it cannot be rendered).

        The same messages and roles, so a template that renders a message by its place
        (Qwen3 shows an answer's reasoning only after the last user message) renders all
        before it the same: what it shares with the prompt ends where the last message's
        content begins, after its role header, which a retried, undone, edited, forked or
        dropped last turn shares too. (A cut further in, after the markup that actions
        share, such as "### Turn ", would save a few tokens but miss an edited action that
        differs earlier.)
        """
        if len(messages) < 2:
            return ""
        blank = [*messages[:-1], {**messages[-1], "content": ""}]
        try:
            return self.render(blank, enable_thinking=enable_thinking)
        except EngineError:
            return ""


def opens_reasoning(prompt: str) -> bool:
    """Whether the rendered prompt ends inside an open ``<think>`` block."""
    return prompt.rfind("<think>") > prompt.rfind("</think>")
