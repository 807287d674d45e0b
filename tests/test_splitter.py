"""The reasoning / observation splitter: same result for every chunking, robust to bad tags."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
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
    "</THINK>",
    "<Predicted_Observation>",
    "</PREDICTED_observation>",
    "{",
    '"size": 28,',
    "```",
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


def test_nested_think_ends_at_the_last_close_and_stray_closes_are_dropped() -> None:
    text = "a<think>b</think>c</think><predicted_observation>obs</predicted_observation></think>"
    result = stream(chunked(text, [4, 9, 17, 30]))
    assert result.split.reasoning == "ab\n\nc"
    assert result.split.observation == "obs"
    assert result.split.extraction == ""
    assert result.reasoning.strip() == result.split.reasoning


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
    assert result.split.extraction == (
        "2 observation blocks: showing the last; text outside the observation block left out"
    )


def test_provisional_text_before_the_tag_is_replaced() -> None:
    text = "r</think>Let me answer.\n<predicted_observation>$ ls\n</predicted_observation>"
    result = stream([text])
    assert result.split.observation == "$ ls"
    assert result.resets == 1
    # Written before the answer, it was reasoning after all: shown there, not lost.
    assert result.split.reasoning == "r\n\nLet me answer."
    assert result.reasoning.strip() == result.split.reasoning
    assert result.split.extraction == ""


def test_missing_closing_tag_takes_the_rest() -> None:
    split = split_output("r</think><predicted_observation>line 1\n  line 2\n\n")
    assert split.observation == "line 1\n  line 2"


def test_no_tag_at_all_drops_the_marker_and_blank_lines() -> None:
    text = f"r</think>\n\n{OBSERVATION_MARKER}\nuser@devbox:~$ ls\nfoo\n"
    result = stream(list(text))
    assert result.split.observation == "user@devbox:~$ ls\nfoo"
    assert result.observation.rstrip() == "user@devbox:~$ ls\nfoo"


def test_marker_inside_the_tags_is_dropped() -> None:
    text = f"r</think><predicted_observation>\n{OBSERVATION_MARKER}\n x</predicted_observation>"
    result = stream(list(text))
    assert result.split.observation == " x"
    assert result.observation.rstrip() == " x"


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


# -- issue 27 item 1: answers must never lose their beginning ---------------------------

ANSWER = '```json\n{\n  "path": "notes.txt",\n  "size": 28,\n  "content": "buy milk"\n}\n```'
TAG_IN_VALUE = ANSWER.replace("buy milk", "buy milk <predicted_observation>")
TAG_REPEATED = ANSWER.replace('  "size"', '<predicted_observation>\n  "size"')
# What small models write (Qwen2.5-0.5B lost the beginning of 3 answers in 4 this way):
# the opening tag once more inside the answer, where "the last block wins" kept only what
# followed it: the last three lines, or an object starting at '"size": 28,'.
LOST_BEGINNINGS = {
    "tag in a JSON value": (
        f"<predicted_observation>\n{TAG_IN_VALUE}\n</predicted_observation>",
        TAG_IN_VALUE,
        "a repeated <predicted_observation> tag kept as text",
    ),
    "tag repeated mid-answer": (
        f"<predicted_observation>\n{TAG_REPEATED}\n</predicted_observation>",
        TAG_REPEATED,
        "a repeated <predicted_observation> tag kept as text",
    ),
    "tag repeated, block never closed": (
        f"<predicted_observation>\n{TAG_REPEATED}\n",
        TAG_REPEATED,
        "a repeated <predicted_observation> tag kept as text",
    ),
    "opening tag written for the closing one": (
        f"<predicted_observation>\n{ANSWER}\n<predicted_observation>\n",
        ANSWER,
        "",
    ),
    "opening tag written twice": (
        f"<predicted_observation>\n<predicted_observation>\n{ANSWER}</predicted_observation>",
        ANSWER,
        "",
    ),
    "closing tag inside a value": (
        "<predicted_observation>\n"
        + ANSWER.replace("buy milk", "buy milk</predicted_observation>")
        + "\n</predicted_observation>",
        ANSWER.replace("buy milk", "buy milk</predicted_observation>"),
        "",
    ),
    "tags mentioned in prose first, then the answer": (
        "I write the result between <predicted_observation> and "
        "</predicted_observation>.\n"
        f"<predicted_observation>\n{ANSWER}\n</predicted_observation>\n",
        ANSWER,
        "2 observation blocks: showing the last; text outside the observation block left out",
    ),
}


@pytest.mark.parametrize("case", LOST_BEGINNINGS)
@pytest.mark.parametrize("thinking", ["off", "closed", "never closed"])
def test_a_repeated_tag_keeps_the_whole_answer(case: str, thinking: str) -> None:
    text, answer, note = LOST_BEGINNINGS[case]
    if thinking == "closed":
        text = "The call reads a file that exists.</think>\n\n" + text
    elif thinking == "never closed":  # a server or model that skipped thinking
        text = "The call reads a file that exists.\n" + text
    result = stream(
        chunked(text, list(range(0, len(text), 7))), starts_in_reasoning=thinking != "off"
    )
    assert result.split.observation == answer
    assert result.observation.rstrip() == answer
    assert result.split.extraction == note
    assert split_output(text, starts_in_reasoning=thinking != "off") == result.split


def test_text_after_the_block_is_noted() -> None:
    text = "r</think><predicted_observation>$ ls\nsrc</predicted_observation>\nHope this helps!"
    split = split_output(text)
    assert split.observation == "$ ls\nsrc"
    assert split.extraction == "text outside the observation block left out"
    blank_after = "r</think><predicted_observation>$ ls</predicted_observation>\n\n"
    assert split_output(blank_after).extraction == ""


def test_a_closed_block_can_be_replaced_but_an_open_one_cannot() -> None:
    closed = (
        "r</think><predicted_observation>draft</predicted_observation><predicted_observation>final"
    )
    assert split_output(closed).observation == "final"
    still_open = "r</think><predicted_observation>draft <predicted_observation> final"
    assert split_output(still_open).observation == "draft <predicted_observation> final"


# -- issue 27 item 5: the app's extraction, its leaks fixed -------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan</THINK><PREDICTED_OBSERVATION>$ ls\nsrc</Predicted_Observation>",
        "plan</Think>\n<Predicted_Observation>\n$ ls\nsrc\n</predicted_OBSERVATION>\n",
    ],
)
def test_tags_are_matched_ignoring_case(text: str) -> None:
    result = stream(list(text))
    assert (result.split.reasoning, result.split.observation) == ("plan", "$ ls\nsrc")
    assert result.observation.rstrip() == "$ ls\nsrc"
    assert "<" not in result.reasoning


def test_a_tag_in_another_script_is_not_a_tag() -> None:
    # Only ASCII letters fold: a dotted capital I does not become "i".
    text = "plan</THİNK>more"
    split = split_output(text)
    assert split.closed_reasoning is False
    assert split.reasoning == text


def test_marker_in_any_case_inside_the_tags_is_dropped() -> None:
    text = (
        "r</think><predicted_observation>**environment observation:**\n$ ls</predicted_observation>"
    )
    assert split_output(text).observation == "$ ls"


def test_a_second_orphan_close_ends_the_reasoning_there() -> None:
    text = "first thoughts</think>\nsecond thoughts\n</think>\n$ ls\nsrc"
    result = stream(chunked(text, [5, 16, 20, 34, 41]))
    assert result.split.reasoning == "first thoughts\nsecond thoughts"
    assert result.split.observation == "$ ls\nsrc"
    assert result.observation.rstrip() == "$ ls\nsrc"
    assert result.resets == 1


def test_a_stray_close_after_a_plain_answer_keeps_the_answer() -> None:
    result = stream(list("thoughts</think>\n$ ls\nsrc\n</think>\n"))
    assert result.split.reasoning == "thoughts"
    assert result.split.observation == "$ ls\nsrc"
    assert result.observation.rstrip() == "$ ls\nsrc"


@pytest.mark.parametrize("tags", [True, False])
def test_thinking_off_a_leading_orphan_close_keeps_the_reasoning_out(tags: bool) -> None:
    answer = "<predicted_observation>$ ls\nsrc</predicted_observation>" if tags else "$ ls\nsrc"
    text = f"The user lists the folder.\n</think>\n\n{answer}"
    result = stream(list(text), starts_in_reasoning=False)
    assert result.split.observation == "$ ls\nsrc"
    assert result.observation.rstrip() == "$ ls\nsrc"
    assert result.split.reasoning == "The user lists the folder."
    assert "folder" not in result.observation


@pytest.mark.parametrize(
    ("text", "observation"),
    [
        (f"{OBSERVATION_MARKER}\nuser@devbox:~$ ls\nsrc", "user@devbox:~$ ls\nsrc"),
        ('{"files": ["a.txt", "b.txt"], "count": 2}', '{"files": ["a.txt", "b.txt"], "count": 2}'),
        ("```\n$ ls\nsrc\n```", "```\n$ ls\nsrc\n```"),
        ("<predicted_observation>\n$ ls\nsrc", "$ ls\nsrc"),
    ],
)
def test_thinking_on_without_any_close_an_answer_is_taken_whole(
    text: str, observation: str
) -> None:
    result = stream(list(text))
    assert result.split.closed_reasoning is False
    assert result.split.observation == observation
    assert result.observation.rstrip() == observation
    assert result.split.reasoning == ""


@pytest.mark.parametrize(
    "text",
    [
        "The tool lists the folder, so the result is a list",
        '<think>{"files": ["a.txt"]}',  # an explicit think tag: it is reasoning
        "[thinking about it] the result is",
        "{not json",
    ],
)
def test_thinking_on_without_any_close_reasoning_stays_reasoning(text: str) -> None:
    split = split_output(text)
    assert split.observation == ""
    assert split.closed_reasoning is False


# -- the raw text ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(text=model_text, cuts=st.lists(st.integers(min_value=0), max_size=12), start=st.booleans())
def test_raw_is_the_text_as_fed(text: str, cuts: list[int], start: bool) -> None:
    splitter = ObservationSplitter(starts_in_reasoning=start)
    for chunk in chunked(text, cuts):
        splitter.feed(chunk)
    splitter.finish()
    assert splitter.raw == text


def test_raw_of_reasoning_sent_apart_is_wrapped_in_think_tags() -> None:
    splitter = ObservationSplitter()
    splitter.feed_reasoning("plan ")
    splitter.feed_reasoning("more")
    splitter.feed("<predicted_observation>out</predicted_observation>")
    assert (
        splitter.raw == "<think>plan more</think><predicted_observation>out</predicted_observation>"
    )
    assert splitter.finish()[0].observation == "out"


# A block's body with opening tags anywhere but at its ends: all of it is the answer.
BODY_PIECES = [
    "<predicted_observation>",
    "<Predicted_Observation>",
    "{",
    "}",
    '"size": 28,',
    "\n",
    " ",
    "x",
    "```",
    "é",
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(BODY_PIECES), min_size=1, max_size=30),
    closed=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
def test_opening_tags_inside_a_block_never_lose_answer_text(
    pieces: list[str], closed: bool, cuts: list[int]
) -> None:
    body = "".join(pieces)
    tag = "<predicted_observation>"
    folded = body.lower().strip()
    assume(not folded.startswith(tag) and not folded.endswith(tag))
    assume(re.search(f"{tag}\\s*{tag}", body.lower()) is None)  # a stutter drops the first
    text = f"plan</think><predicted_observation>{body}" + (
        "</predicted_observation>" if closed else ""
    )
    result = stream(chunked(text, cuts))
    lines = body.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    expected = "\n".join(lines).rstrip()
    assert result.split.observation == expected
    assert result.observation.rstrip() == expected


@pytest.mark.parametrize(
    "text",
    [CANONICAL, "thinking <predicted_observation>\nscreen", "r</think>a<predicted_observation>b"],
)
def test_finish_twice_gives_the_same_split(text: str) -> None:
    """The remote engine reads the split again after flushing the stream."""
    splitter = ObservationSplitter()
    splitter.feed(text)
    first = splitter.finish()[0]
    assert splitter.finish()[0] == first
