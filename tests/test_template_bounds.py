"""Hostile chat templates: a render is bounded in work, time and size, and Esc stops it.

The templates travel in real GGUF files loaded into the real llama.cpp, and go through
the engine and ``run_turn`` as a turn would; the bounds themselves are also held against
the ChatTemplate alone, on templates that would otherwise take gigabytes or never end.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from ggufgen import CHATML_THINK_TEMPLATE
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agentworld_tui.domains import get_domain
from agentworld_tui.engines.base import (
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
)
from agentworld_tui.engines.template import ChatTemplate, TemplateLimitError
from agentworld_tui.simulator import run_turn
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import new_session

SCRIPT = "It lists.</think>\n\n<predicted_observation>\nfile_a\n</predicted_observation>"
MESSAGES = [
    {"role": "system", "content": "You simulate a shell."},
    {"role": "user", "content": "ls"},
]
GREEDY = GenerationParams(temperature=0.0, max_tokens=40)

NESTED_LOOPS = (
    "{% for a in range(3000) %}{% for b in range(3000) %}{% endfor %}{% endfor %}"
    + CHATML_THINK_TEMPLATE
)
REPEATED_PROMPT = (
    "{% for i in range(100000) %}{% for m in messages %}{{ m.content }}{% endfor %}{% endfor %}"
)
SLOW = (  # each step is slow work: a render of minutes, unless it is stopped
    "{% set big = 'abcdefghij' * 21000 %}"
    "{% for i in range(1000) %}{% set order = big|sort %}{% endfor %}" + CHATML_THINK_TEMPLATE
)


def stream(engine: Any, control: GenerationControl | None = None) -> list[EngineEvent]:
    return list(engine.stream(MESSAGES, GREEDY, control or GenerationControl()))


def a_turn(engine: Any, control: GenerationControl) -> tuple[Finished, Any]:
    domain = get_domain("terminal")
    session, _ = new_session(domain, Scenario("t", "Test", state="root@box:/app# "))
    turn = session.begin_turn(domain.parse_action("ls", session.scenario))
    events = list(run_turn(engine, session, turn, GREEDY, control))
    done = events[-1]
    assert isinstance(done, Finished)
    return done, turn


# -- through the engine, from a real model file ---------------------------------------------
@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (NESTED_LOOPS, "did more than 1,000,"),
        (REPEATED_PROMPT, "of more than 1,0"),
    ],
    ids=["nested-loops", "repeated-prompt"],
)
def test_a_template_past_its_bounds_is_a_clear_turn_error(
    scripted_model: Callable[..., Any],
    llama_engine: Callable[..., Any],
    template: str,
    expected: str,
) -> None:
    engine = llama_engine(scripted_model(SCRIPT, chat_template=template))
    with pytest.raises(TemplateLimitError, match=expected) as caught:
        stream(engine)
    message = str(caught.value)
    assert message.startswith("the model's chat template ") and "\n" not in message
    done, turn = a_turn(engine, GenerationControl())
    assert turn.status == done.stats.stop_reason == "error"
    assert done.error.startswith(message.split(" more than ")[0] + " more than ")


def test_cancel_stops_a_slow_render(
    scripted_model: Callable[..., Any], llama_engine: Callable[..., Any]
) -> None:
    engine = llama_engine(scripted_model(SCRIPT, chat_template=SLOW))
    control = GenerationControl()
    timer = threading.Timer(0.3, control.cancel)  # Esc, while the prompt is being rendered
    timer.start()
    done, turn = a_turn(engine, control)
    timer.join()
    assert (done.stats.stop_reason, done.error, turn.status) == ("cancelled", "", "interrupted")
    assert done.stats.prompt_tokens == 0  # stopped inside the render: no prompt was built
    # The engine is still usable afterwards, and an uncancelled render is bounded in time.
    with pytest.raises(TemplateLimitError, match=r"took more than 10 s"):
        stream(engine)


def test_a_well_behaved_template_is_unchanged(
    scripted_model: Callable[..., Any], llama_engine: Callable[..., Any]
) -> None:
    model = scripted_model(SCRIPT, chat_template=CHATML_THINK_TEMPLATE, n_ctx_train=8192)
    engine = llama_engine(model, n_ctx=4096)  # the terminal's system prompt and the turn
    _done, turn = a_turn(engine, GenerationControl())
    assert (turn.status, turn.observation) == ("complete", "file_a")


# -- the bounds, on the template alone ------------------------------------------------------
HOSTILE = {
    "string-times": "{{ 'a' * 10 ** 10 }}",
    "list-times": "{{ [messages] * 10 ** 9 }}",
    "center": "{{ '' | center(9999999999) }}",
    "center-folded-at-compile": "{{ '' | center(300000000) }}",
    "indent": "{{ ('\\n' * 100000) | indent(100000) }}",
    "replace-empty": "{{ ('x' * 100000) | replace('', 'y' * 100000) }}",
    "join-method": "{{ ('y' * 100000).join(['a'] * 100000) }}",
    "join-filter": "{{ (['a'] * 100000) | join('y' * 100000) }}",
    "expandtabs": "{{ ('\\t' * 100000).expandtabs(100000) }}",
    "percent-width": "{{ '%0999999999d' % 1 }}",
    "percent-star": "{{ '%*s' % (999999999, '') }}",
    "format-width": "{{ '{:>999999999}'.format('x') }}",
    "huge-power": "{{ 7 ** (10 ** 9) }}",
    "shared-references": "{% set s = 'x' * 900000 %}{{ [s, s, s, s, s, s, s, s] }}",
    "tilde-chain": "{% set s = 'x' * 900000 %}{{ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s }}",
    "namespace-doubling": (
        "{% set ns = namespace(s='ab') %}"
        "{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"
    ),
    "macro-doubling": (
        "{% macro f(s, n) %}{% if n %}{{ f(s ~ s, n - 1) }}{% endif %}{% endmacro %}"
        "{{ f('ab', 64) }}"
    ),
    "block-capture": (
        "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}"
        "{{ messages[1].content }}{% endfor %}{% endfor %}{% endset %}{{ x | length }}"
    ),
    "loop-over-a-string": (
        "{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}"
    ),
    "sum-of-lists": "{{ ([['x'] * 1000] * 1000) | sum(start=[]) | length }}",
    "lipsum": "{{ lipsum(10 ** 6) }}",
    "tojson-indent": "{{ (['a'] * 100000) | tojson(indent=100000) }}",
    "replace-by-name": "{{ ('x' * 100000) | replace(old='', new='y' * 100000) }}",
    "translate": "{{ ('a' * 100000).translate({97: 'b' * 100000}) }}",
    "bytes-times": "{{ 'a'.encode() * 10 ** 10 }}",
}


@pytest.mark.parametrize("template", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_template_stops_at_a_bound(template: str) -> None:
    with pytest.raises(EngineError, match=r"chat template") as caught:
        ChatTemplate(template).render(MESSAGES)
    if "lipsum" not in template:  # lipsum is simply not there
        assert isinstance(caught.value, TemplateLimitError), caught.value


def test_a_render_past_its_time_is_stopped() -> None:
    template = ChatTemplate(SLOW, time_limit_s=0.2)
    with pytest.raises(TemplateLimitError, match=r"took more than 0.2 s to render the prompt"):
        template.render(MESSAGES)


QWEN_LIKE = (
    "{%- set ns = namespace(last_user=messages | length - 1) %}"
    "{%- for m in messages[::-1] %}{%- set index = (messages | length - 1) - loop.index0 %}"
    "{%- if m.role == 'user' and ns.last_user == messages | length - 1 %}"
    "{%- set ns.last_user = index %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- set content = m.content.split('</think>')[-1].lstrip('\\n') %}"
    "{{- '<|im_start|>' ~ m.role ~ '\\n' ~ content | trim ~ '<|im_end|>\\n' }}"
    "{%- if loop.last %}{{ loop.length }}{% endif %}{%- endfor %}"
    "{{ messages | map(attribute='role') | join(',') }}|{{ '%s=%d' % ('n', ns.last_user) }}|"
    "{{ '{}/{}'.format(1, 2) }}|{{ {'k': 'é'} | tojson }}|{{ 'ab' * 3 }}|{{ 2 ** 10 }}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)


@pytest.mark.parametrize("source", [CHATML_THINK_TEMPLATE, QWEN_LIKE], ids=["chatml", "qwen-like"])
def test_bounds_leave_a_real_template_unchanged(source: str) -> None:
    conversation = [{"role": "system", "content": "s" * 20_000}]
    for i in range(1500):  # a long session: about 1 MB of history
        conversation.append({"role": "user", "content": f"action {i} " * 30})
        conversation.append({"role": "assistant", "content": f"r</think>\n\nscreen {i} " * 30})
    conversation.append({"role": "user", "content": "last"})
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    plain.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    values = {
        "messages": conversation,
        "add_generation_prompt": True,
        "enable_thinking": True,
        "bos_token": "",
        "eos_token": "",
        "tools": None,
    }
    expected = plain.from_string(source).render(**values)
    assert ChatTemplate(source).render(conversation) == expected


def test_loading_a_model_never_compiles_its_template_outside_the_bounds(
    scripted_model: Callable[..., Any], llama_engine: Callable[..., Any]
) -> None:
    # llama-cpp-python compiles every chat template of the file as it loads, for a chat
    # API the engine never uses; Jinja's compiler folds constants, so this one would
    # build its 200 MB string at load. The engine's own bounded template refuses it at
    # render time instead.
    import tracemalloc

    model = scripted_model(SCRIPT, chat_template="{{ '' | center(200000000) }}")
    tracemalloc.start()
    try:
        engine = llama_engine(model)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000, f"{peak:,} bytes allocated in Python while loading"
    _done, turn = a_turn(engine, GenerationControl())
    assert turn.status == "error" and "tried to build a text of more than" in turn.note
