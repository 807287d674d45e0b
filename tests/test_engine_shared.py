"""What the engines share, each in one home: how far two prompts begin alike, what a model
file's header says, the state file an engine was told to keep, and how generated text
becomes the stream's events and its last one.

The engines themselves are tested on real models in tests/test_engine_*.py; these are the
shared pieces on their own, with real GGUF files where a file is read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from ggufgen import CHATML_THINK_TEMPLATE, write_recurrent_model, write_scripted_model
from hypothesis import given
from hypothesis import strategies as st

from agentworld_tui.engines.answer import LocalAnswer, deltas, ended
from agentworld_tui.engines.base import (
    AnswerDelta,
    Finished,
    GenerationParams,
    ReasoningDelta,
)
from agentworld_tui.engines.model_file import (
    DEFAULT_N_CTX,
    ModelHeader,
    context_size,
    model_metadata,
)
from agentworld_tui.engines.prefix import common_prefix, common_text
from agentworld_tui.engines.state_file import KeptStateFile

tokens = st.lists(st.integers(0, 3), max_size=40)


def alike(a: Sequence[object], b: Sequence[object]) -> int:
    """The oracle: items compared one by one from the start."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(tokens, tokens)
def test_common_prefix_of_token_lists_and_arrays(a: list[int], b: list[int]) -> None:
    expected = alike(a, b)
    assert common_prefix(a, b) == expected
    assert common_prefix(np.asarray(a, dtype=np.intc), np.asarray(b, dtype=np.intc)) == expected


@given(st.text(alphabet="ab\u00e9", max_size=40), st.text(alphabet="ab\u00e9", max_size=40))
def test_common_text(a: str, b: str) -> None:
    assert common_text(a, b) == alike(a, b)


def test_the_header_says_context_template_and_kind_of_cache(tmp_path: Path) -> None:
    scripted = write_scripted_model(tmp_path / "scripted.gguf", "hello", n_ctx_train=2048)
    header = model_metadata(scripted)
    assert header.trained_context == 2048
    assert header.template == CHATML_THINK_TEMPLATE
    assert header.eos == "<|im_end|>"
    assert not header.checkpointed
    recurrent = write_recurrent_model(tmp_path / "recurrent.gguf", "hello")
    assert model_metadata(recurrent).checkpointed


def test_a_damaged_header_reads_as_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole = write_scripted_model(tmp_path / "whole.gguf", "hello").read_bytes()
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(whole[:200])
    with caplog.at_level(logging.WARNING, "agentworld.engine"):
        assert model_metadata(damaged) == ModelHeader()
    assert "cannot read the GGUF header" in caplog.text


def test_the_context_loaded_without_one_asked() -> None:
    assert context_size(0, 0) == DEFAULT_N_CTX
    assert context_size(0, 2048) == 2048
    assert context_size(0, 10 * DEFAULT_N_CTX) == DEFAULT_N_CTX
    assert context_size(1000, 2048) == 1000


def test_a_state_file_is_opened_once_and_given_up_without_a_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = write_scripted_model(tmp_path / "model.gguf", "hello")
    kept = KeptStateFile()
    assert not kept.asked and kept.open("build", model) is None
    kept.keep(tmp_path / "session.json.state", max_bytes=1 << 20)
    opened = kept.open("build", model)
    assert opened is not None and opened.max_bytes == 1 << 20
    assert kept.open("build", model) is opened
    kept.keep(None)
    assert not kept.asked and kept.open("build", model) is None

    kept.keep(tmp_path / "other.json.state")
    with caplog.at_level(logging.WARNING, "agentworld.engine"):
        assert kept.open("build", tmp_path / "gone.gguf") is None
    assert not kept.asked  # given up: the prompt is read whole, as without a file
    assert "no model state file" in caplog.text


def test_deltas_send_only_what_there_is() -> None:
    assert list(deltas(("", "", False), 3, 1)) == []
    assert list(deltas(("why", "", False), 3, 1)) == [ReasoningDelta("why", 3, 1)]
    assert list(deltas(("", "", True), 3, 1)) == [AnswerDelta("", 3, True)]


def test_a_local_answer_ends_with_its_split_and_stats() -> None:
    params = GenerationParams()
    answer = LocalAnswer("<|im_start|>assistant\n<think>\n", params, time.perf_counter())
    assert answer.in_reasoning
    events = list(answer.feed("plan</think>\n\nthe ans", 2, 1))
    answer.first_token()
    events += answer.feed("wer", 3, 1)
    events += answer.finish(
        prompt_tokens=10, evaluated=4, generated=3, reasoning_tokens=1, stop="eos", n_ctx=64
    )
    *streamed, last = events
    assert "".join(e.text for e in streamed if isinstance(e, AnswerDelta)) == "the answer"
    assert isinstance(last, Finished)
    assert (last.reasoning, last.observation, last.closed_reasoning) == ("plan", "the answer", True)
    assert last.raw == "plan</think>\n\nthe answer"
    stats = last.stats
    assert (stats.prompt_tokens, stats.evaluated_prompt_tokens, stats.generated_tokens) == (
        10,
        4,
        3,
    )
    assert stats.stop_reason == "eos" and stats.n_ctx == 64 and stats.tokens_per_second > 0
    assert last.error == "" and last.error_kind is None and last.content is None

    closed = LocalAnswer("<think>\n\n</think>\n\n", params, time.perf_counter())
    assert not closed.in_reasoning


def test_a_stream_ended_before_any_token() -> None:
    last = ended(time.perf_counter(), "cancelled", 64, prompt_tokens=9, evaluated=2)
    assert (last.reasoning, last.observation, last.closed_reasoning) == ("", "", False)
    assert last.stats.stop_reason == "cancelled"
    assert (last.stats.prompt_tokens, last.stats.evaluated_prompt_tokens) == (9, 2)
    assert last.stats.generated_tokens == 0 and last.stats.n_ctx == 64
