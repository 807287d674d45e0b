"""Split a world model's streamed output into reasoning and the predicted observation.

The chat template opens the reasoning block inside the prompt, so generation usually
starts *inside* the reasoning. Tags can arrive split over several chunks; the splitter
holds back any tail that could still become a tag, so every chunking of the same text
gives the same reasoning, the same observation and the same deltas (concatenated).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
OBS_OPEN = "<predicted_observation>"
OBS_CLOSE = "</predicted_observation>"
OBSERVATION_MARKER = "**Environment Observation:**"

_REASONING_TAGS = (THINK_OPEN, THINK_CLOSE)
_ANSWER_TAGS = (THINK_OPEN, THINK_CLOSE, OBS_OPEN, OBS_CLOSE)


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


class ObservationSplitter:
    """Incremental reasoning / observation parser.

    ``feed`` returns ``(reasoning_delta, observation_delta, reset)``; ``reset`` is True
    when a later ``<predicted_observation>`` block replaced what was shown so far (the
    caller clears the view before applying ``observation_delta``).
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

    # -- public -------------------------------------------------------------------------
    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def observation(self) -> str:
        return "".join(self._observation)

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
        self._reasoning.append(text)
        return text

    def feed(self, chunk: str) -> tuple[str, str, bool]:
        if self._reasoning_apart and chunk:
            self.closed_reasoning = True
        text = self._pending + chunk
        self._pending = ""
        reasoning: list[str] = []
        observation: list[str] = []
        reset = False
        while text:
            tags = _REASONING_TAGS if self.in_reasoning else _ANSWER_TAGS
            i, tag = _find_tag(text, tags)
            if i == -1:
                keep = _partial_tag_len(text, tags)
                body, self._pending = text[: len(text) - keep], text[len(text) - keep :]
                self._emit(body, reasoning, observation)
                break
            self._emit(text[:i], reasoning, observation)
            text = text[i + len(tag) :]
            reset = self._on_tag(tag, reasoning, observation) or reset
        return "".join(reasoning), "".join(observation), reset

    def finish(self) -> tuple[Split, str, str, bool]:
        """Flush held-back text; returns the final split and the last deltas."""
        tail = self._pending
        self._pending = ""
        reasoning: list[str] = []
        observation: list[str] = []
        self._emit(tail, reasoning, observation)
        if not self._lead_done and self._block is not _Block.AFTER:
            self._release_lead(observation, final=True)
        split = Split(
            reasoning=self.reasoning.strip(),
            observation=_clean_observation(self.observation),
            closed_reasoning=self.closed_reasoning,
        )
        if not split.closed_reasoning and not split.observation and OBS_OPEN in split.reasoning:
            # The model skipped </think> but wrote its answer tag: the answer starts there.
            # The view streamed it as reasoning, so it is sent again as a reset answer.
            before, _, after = split.reasoning.rpartition(OBS_OPEN)
            answer = after.split(OBS_CLOSE, 1)[0]
            split = Split(before.strip(), _clean_observation(answer), False)
            return split, "".join(reasoning), split.observation, True
        return split, "".join(reasoning), "".join(observation), False

    # -- internals ----------------------------------------------------------------------
    def _on_tag(self, tag: str, reasoning: list[str], observation: list[str]) -> bool:
        if self.in_reasoning:
            if tag == THINK_CLOSE:
                self.in_reasoning = False
                self.closed_reasoning = True
            return False  # a nested <think> inside reasoning is dropped
        if tag == THINK_OPEN:
            self.in_reasoning = True
            self.closed_reasoning = False
            if self._reasoning:
                self._emit("\n\n", reasoning, observation)
            return False
        if tag == OBS_OPEN:
            had = bool(self._observation)
            self._block = _Block.INSIDE
            self._lead, self._lead_done = "", False
            self._observation.clear()
            observation.clear()
            return had
        if tag == OBS_CLOSE:
            if not self._lead_done:
                self._release_lead(observation, final=True)
            self._block = _Block.AFTER
        return False  # a stray </think> in the answer is dropped

    def _emit(self, body: str, reasoning: list[str], observation: list[str]) -> None:
        if not body:
            return
        if self.in_reasoning:
            self._reasoning.append(body)
            reasoning.append(body)
        elif self._block is _Block.AFTER:
            return
        elif not self._lead_done:
            self._lead += body
            self._release_lead(observation, final=False)
        else:
            self._observation.append(body)
            observation.append(body)

    def _release_lead(self, observation: list[str], *, final: bool) -> None:
        """Release held leading text once it is clearly neither blank nor the marker.

        Blank lines above the first visible line are dropped (its indentation stays), and
        before any tag a leading "**Environment Observation:**" marker is dropped.
        """
        lead = self._lead
        if self._block is _Block.BEFORE:
            stripped = lead.lstrip()
            if stripped.startswith(OBSERVATION_MARKER):
                lead = stripped[len(OBSERVATION_MARKER) :]
            elif not final and OBSERVATION_MARKER.startswith(stripped):
                return
        visible = lead.lstrip()
        if not visible and not final:
            return
        first = len(lead) - len(visible)
        text = lead[lead.rfind("\n", 0, first) + 1 :] if visible else ""
        self._lead, self._lead_done = "", True
        if text:
            self._observation.append(text)
            observation.append(text)


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
