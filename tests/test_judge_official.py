"""The official evaluator's text rules, one test per rule on cases written here: how the
judged prediction is extracted from a generated text, and how a judge's verdict is read."""

from __future__ import annotations

import json
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.evaluation.extraction import NO_OUTPUT, official_prediction
from agentworld_tui.judging.official import read_official_verdict, remove_thinking
from agentworld_tui.judging.verdicts import read_verdict
from agentworld_tui.world.judgement import JudgementError, normalise

OBS = "<predicted_observation>{}</predicted_observation>"


# -- extraction ---------------------------------------------------------------------------------
def test_thinking_on_without_any_closing_tag_judges_the_whole_text() -> None:
    # A server or model that skipped thinking: no </think> anywhere.
    assert (
        official_prediction("total 8\ndrwxr-xr-x 2 root root") == "total 8\ndrwxr-xr-x 2 root root"
    )


def test_an_orphan_closing_tag_ends_the_reasoning() -> None:
    text = "I should list the files" + "</think>\n" + OBS.format("a.txt  b.txt")
    assert official_prediction(text) == "a.txt  b.txt"


def test_a_second_orphan_closing_tag_moves_the_end_of_the_reasoning() -> None:
    text = "first thoughts</think>more thoughts</think>\n" + OBS.format("README.md")
    assert official_prediction(text) == "README.md"
    # Without an answer tag, what follows the last orphan is the answer.
    assert official_prediction("a</think>b</think>  the screen ") == "the screen"


def test_nested_think_blocks_are_removed_whole() -> None:
    text = "<think>outer <think>inner</think> still outer</think>" + OBS.format("ok")
    assert official_prediction(text) == "ok"
    # Reasoning opened by the prompt, with a nested block inside it.
    assert official_prediction("r <think>x</think> r</think>\n" + OBS.format("ok")) == "ok"


def test_tags_are_matched_in_any_case() -> None:
    text = "plan</THINK><Predicted_Observation> $ whoami\nroot </PREDICTED_OBSERVATION>"
    assert official_prediction(text) == "$ whoami\nroot"


def test_thinking_off_a_leading_orphan_closing_tag_does_not_leak_reasoning() -> None:
    # Thinking was off (the template closed the block in the prompt), yet the model wrote
    # reasoning and a closing tag of its own before its answer.
    text = "Let me think about the ls output.</think>\n\n" + OBS.format("a b")
    assert official_prediction(text) == "a b"
    assert "think" not in official_prediction("the user runs ls</think>a b")


def test_the_last_block_wins_and_an_unclosed_one_runs_to_the_end() -> None:
    text = OBS.format("draft") + " then " + "<predicted_observation> final\nscreen"
    assert official_prediction(text) == "final\nscreen"


def test_an_unclosed_think_runs_only_to_the_answer_tag() -> None:
    assert official_prediction("<think>pondering " + OBS.format("x")) == "x"
    assert official_prediction("before <think>pondering to the end") == "before"


def test_reasoning_alone_gives_no_output_and_tags_alone_give_empty() -> None:
    assert official_prediction("only reasoning</think>   ") == NO_OUTPUT
    assert official_prediction("") == NO_OUTPUT
    assert official_prediction(OBS.format("   ")) == ""


def test_remove_thinking_leaves_tagless_text_exactly() -> None:
    assert remove_thinking("  two  spaces \n") == "  two  spaces \n"
    assert remove_thinking(" a </think> b ") == "b"


# -- verdicts -----------------------------------------------------------------------------------
def verdict_text(scores: dict[str, object], **extra: object) -> str:
    body = json.dumps({"strengths": ["s"], "weaknesses": ["w"], "scores": scores, **extra})
    return f"Weighing it.</think>\n<final_evaluation>\n```json\n{body}\n```\n</final_evaluation>"


def test_float_scores_are_rounded_to_whole_numbers() -> None:
    verdict = read_official_verdict(
        verdict_text(
            {"format": 3.6, "factuality": 2.5, "consistency": 3.5, "realism": 4.4, "quality": 1}
        )
    )
    # Python rounds halves to even: 2.5 -> 2, 3.5 -> 4.
    assert verdict.scores == {
        "format": 4,
        "factuality": 2,
        "consistency": 4,
        "realism": 4,
        "quality": 1,
    }


def test_scores_above_five_are_clamped_to_five() -> None:
    verdict = read_official_verdict(
        verdict_text({"format": 9, "factuality": 6.2, "consistency": 5, "realism": 5, "quality": 5})
    )
    assert (verdict.scores["format"], verdict.scores["factuality"]) == (5, 5)
    assert verdict.total == 5.0


def test_a_missing_or_unreadable_dimension_is_absent_and_the_total_is_the_mean_of_the_rest() -> (
    None
):
    verdict = read_official_verdict(
        verdict_text({"format": 4, "factuality": "good", "consistency": "2/5", "realism": 3})
    )
    assert verdict.scores == {
        "format": 4,
        "factuality": 0,
        "consistency": 2,
        "realism": 3,
        "quality": 0,
    }
    assert verdict.total == pytest.approx(3.0)


def test_a_judge_quoting_the_answer_tags_before_its_verdict_is_still_read() -> None:
    answer = (
        "The model wrote <predicted_observation>a b</predicted_observation> where the real "
        "screen was <predicted_observation>a b c</predicted_observation>.\n"
        + verdict_text({"format": 5, "factuality": 2, "consistency": 4, "realism": 4, "quality": 3})
    )
    assert read_official_verdict(answer).scores["factuality"] == 2


def test_the_last_verdict_block_wins_and_a_draft_in_the_reasoning_is_ignored() -> None:
    draft = '<final_evaluation>{"scores": {"format": 1}}</final_evaluation>'
    final = verdict_text(
        {"format": 4, "factuality": 4, "consistency": 4, "realism": 4, "quality": 4}
    )
    assert read_official_verdict("<think>" + draft + "</think>" + final).total == 4.0
    assert read_official_verdict(draft + " on reflection " + final).total == 4.0


def test_without_tags_the_last_object_with_scores_is_read() -> None:
    scores = {"format": 2, "factuality": 2, "consistency": 2, "realism": 2, "quality": 2}
    answer = (
        'An example: {"note": "not this"}. My verdict: '
        + json.dumps({"scores": scores})
        + ' and a footnote {"x": 1}'
    )
    assert read_official_verdict(answer).total == 2.0


def test_trailing_commas_and_unquoted_keys_are_mended() -> None:
    answer = "<final_evaluation>{scores: {'format': 3, 'factuality': 3, quality: 5,},}</final_evaluation>"
    verdict = read_official_verdict(answer)
    assert (verdict.scores["format"], verdict.scores["quality"], verdict.scores["realism"]) == (
        3,
        5,
        0,
    )


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("", "empty"),
        ("It looks right to me, 4 out of 5.", "no JSON object"),
        ('<final_evaluation>{"format": 4, "quality": 4}</final_evaluation>', "no scores object"),
        ('<final_evaluation>{"scores": [4, 4, 4, 4, 4]}</final_evaluation>', "no scores object"),
        ('<final_evaluation>{"scores": {"format": NaN}}</final_evaluation>', "cannot be rounded"),
        ("<final_evaluation>{" * 3 + "</final_evaluation>", "no JSON object"),
    ],
)
def test_answers_the_official_evaluator_cannot_read(answer: str, why: str) -> None:
    with pytest.raises(JudgementError, match=why):
        read_official_verdict(answer)


def test_a_run_of_unclosed_braces_is_unreadable_not_a_hang() -> None:
    with pytest.raises(JudgementError, match="too many unclosed braces"):
        read_official_verdict("{" * 300_000)


FRAGMENTS = [
    "<think>",
    "</think>",
    "<final_evaluation>",
    "</final_evaluation>",
    "```json\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    '"scores"',
    '"format"',
    '"quality"',
    ":",
    ",",
    '"',
    "'",
    "\\",
    "4",
    "2.5",
    "-1",
    "NaN",
    "true",
    " ",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=60).map("".join))
def test_any_answer_gives_a_verdict_or_one_clear_line(answer: str) -> None:
    try:
        verdict = read_official_verdict(answer)
    except JudgementError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(v <= 5 for v in verdict.scores.values())


# -- nothing in an answer makes reading it raise ------------------------------------------------
NUMBER_TEXTS = [
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "1" + "0" * 5000,  # more digits than Python converts
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "2.5",
    "4.9999999999999999999",
    "-0",
    '"4/5"',
    '"1e999/5"',
    '"' + "9" * 5000 + '/5"',
    "true",
    "null",
    "[]",
    "{}",
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
).map(json.dumps)
SCORE_TEXTS = st.sampled_from(NUMBER_TEXTS) | JSON_VALUES


@st.composite
def verdict_answers(draw: st.DrawFn) -> str:
    dimensions = ["format", "factuality", "consistency", "realism", "quality", "Format", "x"]
    keys = draw(st.lists(st.sampled_from(dimensions), max_size=6))
    body = ", ".join(f'"{k}": {draw(SCORE_TEXTS)}' for k in keys)
    verdict = '{"strengths": ' + draw(JSON_VALUES) + ', "scores": {' + body + "}}"
    before = draw(st.sampled_from(["", "thinking</think>", "<think>", "```json\n"]))
    after = draw(st.sampled_from(["", "```", "}", ",}", "</final_evaluation>"]))
    return f"{before}<final_evaluation>{verdict}{after}"


@settings(max_examples=400, deadline=None)
@given(verdict_answers() | JSON_VALUES | st.text(max_size=200))
def test_any_verdict_text_or_json_is_a_verdict_or_unreadable_never_an_exception(
    answer: str,
) -> None:
    reading = read_verdict(answer)  # never raises
    if reading.official is None:
        assert reading.official_error and "\n" not in reading.official_error
    else:
        values = list(reading.official.scores.values())
        assert all(isinstance(v, int) and v <= 5 for v in values)
        # Whatever was read can be averaged and written, as the score step does.
        for value in values:
            normalise(statistics.mean([value, 3]))
        json.dumps(reading.official.to_dict())
    if reading.strict is None:
        assert reading.strict_error and "\n" not in reading.strict_error
    else:
        assert all(1 <= v <= 5 for v in reading.strict.scores.values())
