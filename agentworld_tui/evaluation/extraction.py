"""The prediction a bench sample is judged on, extracted as the official evaluator does.

The app reads a turn's answer with its own streaming splitter (world/splitter.py), which is
kinder to a reader (it keeps an answer's first-line indentation, ignores a stray closing
tag, and says what it dropped). A bench score must match the published tables instead, so
the text a judge sees is taken from the model's whole generated text by the official rules,
in one pure function; docs/judging.md shows, with examples, where the two differ.

The rules: think blocks are removed (``judging.official.remove_thinking``: pairs, nested
blocks, an orphan ``</think>`` ends the reasoning, an unclosed ``<think>`` runs to the next
``<predicted_observation>``); then the last ``<predicted_observation>`` block is the answer,
up to its closing tag or the end; without the tag, the whole cleaned text is. Tags are
matched in any case. A text with no ``</think>`` at all (a model or server that skipped
thinking) is therefore judged whole.
"""

from __future__ import annotations

from agentworld_tui.judging.official import ANSWER_TAG, last_tagged, remove_thinking

NO_OUTPUT = "No output"
"""What the judge is shown when nothing is left after the reasoning is removed."""


def official_prediction(generated: str) -> str:
    """The answer in a generated text (reasoning and tags included), by the official rules.

    An empty text gives ``NO_OUTPUT``; the bench never judges one (the official evaluator
    counts an empty generation as failed), so that value shows only for text that held
    nothing but reasoning.
    """
    if not generated:
        return NO_OUTPUT
    cleaned = remove_thinking(generated, ANSWER_TAG)
    tagged = last_tagged(cleaned, ANSWER_TAG)
    if tagged is not None:
        return tagged
    return cleaned.strip() or NO_OUTPUT
