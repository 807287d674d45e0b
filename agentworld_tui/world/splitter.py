"""Split a world model's streamed output into reasoning and the predicted observation.

The chat template opens the reasoning block inside the prompt, so generation usually
starts *inside* the reasoning. Tags can arrive split over several chunks; the splitter
holds back any tail that could still become a tag, so every chunking of the same text
gives the same reasoning, the same observation and the same deltas (concatenated).

The rules, in the order a stream meets them (tags are matched ignoring ASCII case, so
``</THINK>`` and ``<Predicted_Observation>`` count):

- Reasoning ends at its ``</think>``; a ``<think>`` inside it is dropped. A later
  ``</think>`` that comes before any observation tag means the model went on reasoning:
  the text since the previous one joins the reasoning, so the reasoning ends at the last
  ``</think>`` before the answer (``a</think>b</think>obs`` gives reasoning ``a`` and
  ``b``, observation ``obs``). This holds with thinking off too, where a leading orphan
  ``</think>`` marks everything before it as reasoning. A ``</think>`` left with nothing
  visible after it is a stray closing tag and is dropped, as is any ``</think>`` once an
  observation block has opened (``<predicted_observation>x</predicted_observation></think>``
  keeps ``x``), so the answer is not lost to a stray tag.
- Text before the first ``<predicted_observation>`` is a provisional observation (a model
  that writes no tags answers in plain text); when a block opens, that text moves to the
  reasoning, since the model wrote it before its answer.
- A block runs to its ``</predicted_observation>``, or to the end of the text when that
  never comes. A second opening tag inside a block that is still open is kept as text:
  models write the tag inside a JSON value, or repeat it in mid-answer, and "the last
  block wins" would throw away the answer's beginning. A repeated opening tag with nothing
  visible after it (a model that wrote the opening tag where the closing one belongs) is
  dropped, as is one before anything visible in the block.
- Only a *closed* block can be replaced by a later one (the last complete answer wins).
  A second closing tag with visible text since the first means the first was text (a
  closing tag inside a value): the block runs to the last closing tag, the earlier one
  kept as written.
- Blank lines above the first visible line of a block are dropped (its indentation is
  kept), and so is a leading ``**Environment Observation:**`` marker, inside the tags or
  not.
- When the reasoning never closes (no ``</think>``: the server or the model skipped
  thinking, or it ran out of tokens), the answer starts at the first observation tag in
  it; with no tag, a text that clearly is an answer (it starts with the marker, or is all
  JSON, or one fenced block) and has no think tag at all is taken whole as the answer.
  Otherwise there is no answer yet.

Whenever the extraction leaves text of the answer out (replaced blocks, text after or
between blocks) or keeps a tag as text, ``Split.extraction`` says so in a short note, and the
whole output as generated is kept apart (``ObservationSplitter.raw``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
OBS_OPEN = "<predicted_observation>"
OBS_CLOSE = "</predicted_observation>"
OBSERVATION_MARKER = "**Environment Observation:**"

_REASONING_TAGS = (THINK_OPEN, THINK_CLOSE)
_ANSWER_TAGS = (THINK_OPEN, THINK_CLOSE, OBS_OPEN, OBS_CLOSE)
# Lower-cases ASCII letters only: the text keeps its length, so indices found in the
# lowered text are indices in the text.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_MARKER = OBSERVATION_MARKER.translate(_ASCII_LOWER)


class _Block(Enum):
    """Where the answer text stands relative to the observation tags."""

    BEFORE = "before"  # no tag yet: the text itself is the provisional observation
    INSIDE = "inside"  # within <predicted_observation>
    AFTER = "after"  # after </predicted_observation>: ignored unless a new block opens


@dataclass(frozen=True)
class Split:
    """What the splitter found once a stream has ended."""

    reasoning: str
    observation: str
    closed_reasoning: bool
    """True when the reasoning block was closed (or never open): an answer was started."""
    extraction: str = ""
    """A note when the observation leaves text of the answer out, or kept a tag as text."""


def _lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _partial_tag_len(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a tag."""
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), best, -1):
            if text.endswith(tag[:n]):
                best = n
                break
    return best


def _find_tag(text: str, tags: tuple[str, ...]) -> tuple[int, str]:
    """First occurrence of any tag in ``text`` as (index, tag), or (-1, "")."""
    found, which = -1, ""
    for tag in tags:
        i = text.find(tag)
        if i != -1 and (found == -1 or i < found):
            found, which = i, tag
    return found, which


def _visible(text: str) -> bool:
    return bool(text.strip())


def _looks_like_answer(text: str) -> bool:
    """Whether unclosed "reasoning" is clearly an answer: the marker, JSON, or one fence."""
    body = text.strip()
    if _lower(body).startswith(_MARKER):
        return True
    if body.startswith("```") and body.endswith("```") and body.count("```") == 2:
        return True
    if body[:1] in ("{", "["):
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            return False
        return True
    return False


class ObservationSplitter:
    """Incremental reasoning / observation parser (the rules are in the module docstring).

    ``feed`` returns ``(reasoning_delta, observation_delta, reset)``; ``reset`` is True
    when what was shown as the observation so far was replaced (a later block, or
    provisional text that turned out to be reasoning): the caller clears the view before
    applying ``observation_delta``.
    """

    def __init__(self, *, starts_in_reasoning: bool = True) -> None:
        self.in_reasoning = starts_in_reasoning
        self.closed_reasoning = not starts_in_reasoning
        self._pending = ""
        self._reasoning: list[str] = []
        self._observation: list[str] = []
        self._block = _Block.BEFORE
        # Leading blank text of the observation is held until something visible comes,
        # and a leading "**Environment Observation:**" marker is dropped.
        self._lead = ""
        self._lead_done = False
        self._reasoning_apart = False
        self._raw: list[str] = []
        self._raw_reasoning: list[str] = []
        self._before: list[str] = []  # provisional text as written, since it began
        self._orphan_close = False  # a </think> after visible provisional text, undecided
        self._after_orphan = ""  # blank text after it, held until it is decided
        self._repeated_open = ""  # a second opening tag in the block, held until decided
        self._after: list[str] = []  # text after the closing tag of the last block
        self._close_tag = ""  # that closing tag as written
        self._replaced = 0  # closed blocks with visible text that a later block replaced
        self._left_outside = False  # visible text between blocks was left out
        self._tag_as_text = False
        self._saw_think = False
        # This call's deltas.
        self._out_reasoning: list[str] = []
        self._out_observation: list[str] = []
        self._out_reset = False

    # -- public -------------------------------------------------------------------------
    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def observation(self) -> str:
        return "".join(self._observation)

    @property
    def raw(self) -> str:
        """All the text fed, as it came, tags and all.

        When a server sent the reasoning apart (``feed_reasoning``) it is given back in
        think tags before the answer text: ``"<think>" + reasoning + "</think>" + answer``.
        """
        answer = "".join(self._raw)
        if self._reasoning_apart:
            return f"{THINK_OPEN}{''.join(self._raw_reasoning)}{THINK_CLOSE}{answer}"
        return answer

    @property
    def content(self) -> str | None:
        """The answer text alone when a server sent the reasoning apart (its ``content``
        field), None when the reasoning came inline."""
        return "".join(self._raw) if self._reasoning_apart else None

    def feed_reasoning(self, text: str) -> str:
        """Take reasoning that a server sent apart from the answer (its reasoning field).

        Such a server strips the think tags itself, so from the first call on ``feed``
        reads answer text only; the reasoning counts as closed once answer text arrives.
        Returns the reasoning delta to show.
        """
        if not self._reasoning_apart:
            self._reasoning_apart = True
            self.in_reasoning = False
            self.closed_reasoning = False
        self._raw_reasoning.append(text)
        self._reasoning.append(text)
        return text

    def feed(self, chunk: str) -> tuple[str, str, bool]:
        if self._reasoning_apart and chunk:
            self.closed_reasoning = True
        self._raw.append(chunk)
        text = self._pending + chunk
        self._pending = ""
        while text:
            tags = _REASONING_TAGS if self.in_reasoning else _ANSWER_TAGS
            lowered = _lower(text)
            i, tag = _find_tag(lowered, tags)
            if i == -1:
                keep = _partial_tag_len(lowered, tags)
                body, self._pending = text[: len(text) - keep], text[len(text) - keep :]
                self._emit(body)
                break
            self._emit(text[:i])
            self._on_tag(tag, text[i : i + len(tag)])
            text = text[i + len(tag) :]
        return self._take_deltas()

    def finish(self) -> tuple[Split, str, str, bool]:
        """Flush held-back text; returns the final split and the last deltas."""
        tail = self._pending
        self._pending = ""
        self._emit(tail)
        self._repeated_open = ""  # nothing visible followed it: it stood for a close
        self._orphan_close, self._after_orphan = False, ""  # a stray close at the end
        if not self._lead_done and self._block is not _Block.AFTER:
            self._release_lead(final=True)
        reasoning_delta, observation_delta, reset = self._take_deltas()
        split = Split(
            reasoning=self.reasoning.strip(),
            observation=_clean_observation(self.observation),
            closed_reasoning=self.closed_reasoning,
            extraction=self._notes(),
        )
        if not split.closed_reasoning and not split.observation:
            answer = self._answer_in_open_reasoning(split.reasoning)
            if answer is not None:
                # The view streamed it as reasoning, so it is sent again as a reset answer.
                return answer, reasoning_delta, answer.observation, True
        return split, reasoning_delta, observation_delta, reset

    # -- internals ----------------------------------------------------------------------
    def _take_deltas(self) -> tuple[str, str, bool]:
        deltas = ("".join(self._out_reasoning), "".join(self._out_observation), self._out_reset)
        self._out_reasoning, self._out_observation, self._out_reset = [], [], False
        return deltas

    def _answer_in_open_reasoning(self, reasoning: str) -> Split | None:
        """The answer of an output whose reasoning never closed, if it has one."""
        i = _lower(reasoning).find(OBS_OPEN)
        if i != -1:
            before, answer = reasoning[:i].strip(), reasoning[i:]
        elif not self._saw_think and _looks_like_answer(reasoning):
            before, answer = "", reasoning
        else:
            return None
        inner = ObservationSplitter(starts_in_reasoning=False)
        inner.feed(answer)
        found = inner.finish()[0]
        if not found.observation:
            return None
        return Split(before, found.observation, False, found.extraction)

    def _notes(self) -> str:
        notes = []
        if self._replaced:
            notes.append(f"{self._replaced + 1} observation blocks: showing the last")
        after = self._block is _Block.AFTER and _visible("".join(self._after))
        if after or self._left_outside:
            notes.append("text outside the observation block left out")
        if self._tag_as_text:
            notes.append("a repeated <predicted_observation> tag kept as text")
        return "; ".join(notes)

    def _on_tag(self, tag: str, written: str) -> None:
        if tag == THINK_OPEN:
            self._saw_think = True
        if self.in_reasoning:
            if tag == THINK_CLOSE:
                self.in_reasoning = False
                self.closed_reasoning = True
            return  # a nested <think> inside reasoning is dropped
        if self._orphan_close:
            self._settle_orphan_close()
        if self._block is _Block.BEFORE:
            self._tag_before_block(tag, written)
        elif self._block is _Block.INSIDE:
            self._tag_in_block(tag, written)
        else:
            self._tag_after_block(tag, written)

    def _tag_before_block(self, tag: str, written: str) -> None:
        if tag == THINK_CLOSE:
            # The provisional text may still have been reasoning: that is decided by what
            # follows (something visible: it was; nothing: this close is a stray).
            self._orphan_close = _visible("".join(self._before))
        elif tag == THINK_OPEN:
            self._move_provisional_to_reasoning()
            self._reopen_reasoning()
        elif tag == OBS_OPEN:
            self._move_provisional_to_reasoning()
            self._open_block()
        else:  # a block whose opening tag is missing: the provisional text is its content
            self._close_block(written)

    def _tag_in_block(self, tag: str, written: str) -> None:
        self._repeated_open = ""  # a tag follows a held repeated opening tag: it is dropped
        if tag == OBS_OPEN:
            if self._lead_done:
                self._repeated_open = written  # text, once something visible follows it
        elif tag == OBS_CLOSE:
            self._close_block(written)
        elif tag == THINK_OPEN:
            self._reopen_reasoning()
        # a </think> inside the block is a stray closing tag: dropped

    def _tag_after_block(self, tag: str, written: str) -> None:
        after = "".join(self._after)
        if tag == OBS_OPEN:
            if self._lead_done:
                self._replaced += 1
            self._left_outside = self._left_outside or _visible(after)
            self._open_block()
        elif tag == OBS_CLOSE:
            if _visible(after):
                # The earlier closing tag was text of the answer: the block goes on.
                self._block = _Block.INSIDE
                self._emit((self._close_tag if self._lead_done else "") + after)
                self._block = _Block.AFTER
                self._close_tag, self._after = written, []
        elif tag == THINK_OPEN:
            self._reopen_reasoning()

    def _open_block(self) -> None:
        had = bool(self._observation)
        self._block = _Block.INSIDE
        self._lead, self._lead_done = "", False
        self._observation.clear()
        self._out_observation.clear()
        self._after, self._close_tag = [], ""
        self._out_reset = self._out_reset or had

    def _close_block(self, written: str) -> None:
        if not self._lead_done:
            self._release_lead(final=True)
        self._block = _Block.AFTER
        self._close_tag, self._after = written, []

    def _reopen_reasoning(self) -> None:
        self.in_reasoning = True
        self.closed_reasoning = False
        if self._reasoning:
            self._append_reasoning("\n\n")

    def _settle_orphan_close(self) -> None:
        """Something followed an orphan ``</think>``: the provisional text was reasoning."""
        held = self._after_orphan
        self._orphan_close, self._after_orphan = False, ""
        self._move_provisional_to_reasoning()
        self._before.append(held)
        self._lead += held

    def _move_provisional_to_reasoning(self) -> None:
        text = "".join(self._before)
        self._before = []
        if _visible(text):
            joined = self.reasoning
            if joined.strip() and not joined[-1].isspace() and not text[0].isspace():
                self._append_reasoning("\n\n")
            self._append_reasoning(text)
        had = bool(self._observation)
        self._observation.clear()
        self._out_observation.clear()
        self._lead, self._lead_done = "", False
        self._out_reset = self._out_reset or had

    def _append_reasoning(self, text: str) -> None:
        self._reasoning.append(text)
        self._out_reasoning.append(text)

    def _emit(self, body: str) -> None:
        if not body:
            return
        if self.in_reasoning:
            self._append_reasoning(body)
            return
        if self._block is _Block.AFTER:
            self._after.append(body)
            return
        if self._block is _Block.BEFORE:
            if self._orphan_close:
                if not _visible(body):
                    self._after_orphan += body
                    return
                self._settle_orphan_close()
            self._before.append(body)
        elif self._repeated_open:
            if not _visible(body):
                self._repeated_open += body
                return
            body, self._repeated_open = self._repeated_open + body, ""
            self._tag_as_text = True
        if not self._lead_done:
            self._lead += body
            self._release_lead(final=False)
        else:
            self._observation.append(body)
            self._out_observation.append(body)

    def _release_lead(self, *, final: bool) -> None:
        """Release held leading text once it is clearly neither blank nor the marker.

        Blank lines above the first visible line are dropped (its indentation stays), and
        a leading "**Environment Observation:**" marker is dropped.
        """
        lead = self._lead
        stripped = lead.lstrip()
        folded = _lower(stripped)
        if folded.startswith(_MARKER):
            lead = stripped[len(_MARKER) :]
        elif not final and _MARKER.startswith(folded):
            return
        visible = lead.lstrip()
        if not visible and not final:
            return
        first = len(lead) - len(visible)
        text = lead[lead.rfind("\n", 0, first) + 1 :] if visible else ""
        self._lead, self._lead_done = "", bool(visible)
        if text:
            self._observation.append(text)
            self._out_observation.append(text)


def _clean_observation(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip()


def split_output(text: str, *, starts_in_reasoning: bool = True) -> Split:
    """Split a complete model output in one go (same result as any streamed chunking)."""
    splitter = ObservationSplitter(starts_in_reasoning=starts_in_reasoning)
    splitter.feed(text)
    return splitter.finish()[0]
