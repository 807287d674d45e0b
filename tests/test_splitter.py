"""The reasoning / observation splitter: same result for every chunking, robust to bad tags."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.world.splitter import (
    OBSERVATION_MARKER,
    ObservationSplitter,
    Split,
    split_output,
)


@dataclass
class Streamed:
    split: Split
    reasoning: str
    """Every reasoning delta, concatenated."""
    observation: str
    """What a view showing the observation holds at the end (a reset clears it)."""
    resets: int


def stream(chunks: list[str], *, starts_in_reasoning: bool = True) -> Streamed:
    splitter = ObservationSplitter(starts_in_reasoning=starts_in_reasoning)
    reasoning, view, resets = [], "", 0

    def apply(r: str, o: str, reset: bool) -> None:
        nonlocal view, resets
        reasoning.append(r)
        if reset:
            view, resets = "", resets + 1
        view += o

    for chunk in chunks:
        apply(*splitter.feed(chunk))
    split, r, o, reset = splitter.finish()
    apply(r, o, reset)
    return Streamed(split, "".join(reasoning), view, resets)


def chunked(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


# Text built from the pieces that matter: tags, their prefixes, the marker, blanks.
FRAGMENTS = [
    "<think>",
    "</think>",
    "<predicted_observation>",
    "</predicted_observation>",
    "</thi",
    "nk>",
    "<predicted_obs",
    "</predicted",
    "<",
    "</",
    ">",
    OBSERVATION_MARKER,
    "**Env",
    "\n",
    "\n\n",
    "  ",
    "\t",
    "ls -la",
    "é",
    "日本",
    "\U0001f600",
]
model_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet="ab <>/*\n", max_size=6)),
    max_size=40,
).map("".join)

CANONICAL = (
    "The agent lists files. The cwd is ~/project.</think>\n\n"
    "<predicted_observation>\nuser@devbox:~/project$ ls\nREADME.md  src\n"
    "user@devbox:~/project$\n</predicted_observation>"
)


@settings(max_examples=400, deadline=None)
@given(text=model_text, cuts=st.lists(st.integers(min_value=0), max_size=12), start=st.booleans())
def test_every_chunking_gives_the_same_split_and_deltas(
    text: str, cuts: list[int], start: bool
) -> None:
    whole = stream([text], starts_in_reasoning=start)
    pieces = stream(chunked(text, cuts), starts_in_reasoning=start)
    assert pieces.split == whole.split
    assert pieces.split == split_output(text, starts_in_reasoning=start)
    assert pieces.reasoning == whole.reasoning
    assert pieces.observation == whole.observation


@settings(max_examples=400, deadline=None)
@given(text=model_text, cuts=st.lists(st.integers(min_value=0), max_size=12), start=st.booleans())
def test_streamed_observation_is_the_final_one(text: str, cuts: list[int], start: bool) -> None:
    result = stream(chunked(text, cuts), starts_in_reasoning=start)
    assert result.observation.rstrip() == result.split.observation


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0), max_size=30))
def test_canonical_answer_for_any_chunking(cuts: list[int]) -> None:
    result = stream(chunked(CANONICAL, cuts))
    assert result.split == Split(
        reasoning="The agent lists files. The cwd is ~/project.",
        observation="user@devbox:~/project$ ls\nREADME.md  src\nuser@devbox:~/project$",
        closed_reasoning=True,
    )
    assert result.reasoning.strip() == result.split.reasoning
    assert "<" not in result.reasoning and "<" not in result.observation


def test_tags_split_one_character_at_a_time() -> None:
    result = stream(list(CANONICAL))
    assert result.split == split_output(CANONICAL)
    assert result.observation.rstrip() == result.split.observation
    assert "think" not in result.reasoning


def test_tag_prefix_that_turns_out_to_be_text_is_released() -> None:
    splitter = ObservationSplitter()
    reasoning, _, _ = splitter.feed("a < b and </th")
    assert reasoning == "a < b and "  # "</th" is held: it may become </think>
    reasoning, _, _ = splitter.feed("ere")
    assert reasoning == "</there"


def test_explicit_think_at_the_start() -> None:
    split = split_output("<think>\nplan the screen\n</think>\n<predicted_observation>$ pwd\n/app")
    assert split.reasoning == "plan the screen"
    assert split.observation == "$ pwd\n/app"
    assert split.closed_reasoning


def test_explicit_think_when_the_prompt_did_not_open_one() -> None:
    text = "<think>hmm</think><predicted_observation>out</predicted_observation>"
    split = split_output(text, starts_in_reasoning=False)
    assert (split.reasoning, split.observation, split.closed_reasoning) == ("hmm", "out", True)


def test_nested_think_ends_at_the_first_close_and_stray_closes_are_dropped() -> None:
    text = "a<think>b</think>c</think><predicted_observation>obs</predicted_observation>"
    split = split_output(text)
    assert split.reasoning == "ab"
    assert split.observation == "obs"
    assert "think" not in split.observation


def test_reasoning_that_never_closes_has_no_answer() -> None:
    result = stream(["still thinking about ", "the </thi", "s and that"])
    assert result.split.closed_reasoning is False
    assert result.split.observation == ""
    assert result.observation == ""
    assert result.split.reasoning == "still thinking about the </this and that"


def test_unclosed_reasoning_with_an_answer_tag_starts_the_answer_there() -> None:
    text = "thinking<predicted_observation>\n$ whoami\nroot\n</predicted_observation>"
    result = stream(chunked(text, [3, 12, 30]))
    assert result.split.reasoning == "thinking"
    assert result.split.observation == "$ whoami\nroot"
    assert result.split.closed_reasoning is False
    # The view that streamed nothing as an answer receives it when the stream ends.
    assert result.observation.rstrip() == "$ whoami\nroot"


def test_the_last_observation_block_wins_and_resets_the_view() -> None:
    text = (
        "r</think><predicted_observation>first</predicted_observation> between "
        "<predicted_observation>second\n</predicted_observation> after"
    )
    result = stream(chunked(text, list(range(0, len(text), 5))))
    assert result.split.observation == "second"
    assert result.observation.rstrip() == "second"
    assert result.resets == 1


def test_provisional_text_before_the_tag_is_replaced() -> None:
    text = "r</think>Let me answer.\n<predicted_observation>$ ls\n</predicted_observation>"
    result = stream([text])
    assert result.split.observation == "$ ls"
    assert result.resets == 1


def test_missing_closing_tag_takes_the_rest() -> None:
    split = split_output("r</think><predicted_observation>line 1\n  line 2\n\n")
    assert split.observation == "line 1\n  line 2"


def test_no_tag_at_all_drops_the_marker_and_blank_lines() -> None:
    text = f"r</think>\n\n{OBSERVATION_MARKER}\nuser@devbox:~$ ls\nfoo\n"
    result = stream(list(text))
    assert result.split.observation == "user@devbox:~$ ls\nfoo"
    assert result.observation.rstrip() == "user@devbox:~$ ls\nfoo"


def test_marker_inside_the_tags_is_kept() -> None:
    text = f"r</think><predicted_observation>{OBSERVATION_MARKER} x</predicted_observation>"
    assert split_output(text).observation == f"{OBSERVATION_MARKER} x"


def test_text_that_only_starts_like_the_marker_is_shown() -> None:
    assert split_output("r</think>**Env is set**").observation == "**Env is set**"


def test_indentation_of_the_first_line_is_kept() -> None:
    text = "r</think><predicted_observation>\n\n    indented\nnext</predicted_observation>"
    assert split_output(text).observation == "    indented\nnext"


@pytest.mark.parametrize(
    ("text", "observation"),
    [
        ("<predicted_observation>x</predicted_observation>", "x"),
        ("plain screen\n$ ", "plain screen\n$"),
        (f"{OBSERVATION_MARKER}\nscreen", "screen"),
    ],
)
def test_without_reasoning(text: str, observation: str) -> None:
    split = split_output(text, starts_in_reasoning=False)
    assert split.reasoning == ""
    assert split.observation == observation
    assert split.closed_reasoning


def test_think_opened_in_the_answer_and_never_closed_is_unfinished_reasoning() -> None:
    split = split_output("<think>planning the screen", starts_in_reasoning=False)
    assert split.observation == ""
    assert split.reasoning == "planning the screen"
    assert split.closed_reasoning is False
