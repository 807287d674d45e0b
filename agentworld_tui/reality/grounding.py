"""Grounding: earlier real answers of the same tool, shown to the world model before it
answers a call, within a token budget.

The examples go into the current turn's user message as one more section of the
benchmark's Markdown, ``**Real Examples:**``, placed before the turn's state and action:

    ### Turn 4

    **Real Examples:**
    For reference only: answers the real tool read_file gave to earlier calls, ...

    Example 1, arguments:
    ```json
    {"path": "notes.txt"}
    ```
    Real result:
    ```
    buy milk
    ```

    **Action:**
    ```json
    {"name": "read_file", "arguments": {"path": "todo.txt"}}
    ```

Only the turn being predicted carries them; earlier turns are sent as they were written,
so the history keeps the benchmark's shape and examples are never paid for twice. Every
text from the store is sanitized and fenced with a fence longer than any backtick run in
it, so a recorded answer cannot close its block or pose as a section of the turn. The
whole section fits ``budget`` tokens as the given counter counts them: the examples that
fit whole are shown whole, the longest ones share what is left, cut at a line where one
is near, and an example that would keep too little is left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentworld_tui.domains.turn import fenced
from agentworld_tui.reality.traces import Exchange, TraceStore, call_of
from agentworld_tui.world.action import Action
from agentworld_tui.world.sanitize import one_line, sanitize
from agentworld_tui.world.session import Conversation

SECTION = "Real Examples"
DEFAULT_BUDGET = 2000
"""Tokens the examples may take in a turn's prompt, by default: a few tool results beside
a history that must still fit a local model's context."""
DEFAULT_EXAMPLES = 3
MIN_OBSERVATION_TOKENS = 40
"""An example whose result would be cut to fewer tokens than this is left out."""
MAX_ARGUMENTS_SHOWN = 2000
"""Characters of an example's arguments shown."""
CUT_NOTE = "[… {n:,} more characters not shown]"
_ANCHORS = ("**Current State:**\n", "**Action:**\n")

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """Tokens by a rule of thumb, three characters a token: more than Qwen's tokenizer
    counts for English prose and most code, fewer for dense JSON, long numbers and
    non-Latin scripts. Give the engine's own counter where the budget must be exact."""
    return (len(text) + 2) // 3


@dataclass(frozen=True)
class Grounding:
    """The examples one call was given: the section's text, and what a turn records."""

    text: str = ""
    """The ``**Real Examples:**`` section ("" when no example was shown)."""
    examples: tuple[int, ...] = ()
    """The trace store's ids of the exchanges shown, in the order shown."""
    cut: tuple[int, ...] = ()
    """Those whose result was shortened to fit."""
    tokens: int = 0
    budget: int = 0
    found: int = 0
    """Exchanges the store offered before the budget chose among them."""
    skipped: int = 0
    """Damaged rows the store met (counted, not shown)."""
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "examples": list(self.examples),
            "tokens": self.tokens,
            "budget": self.budget,
            "found": self.found,
            "text": self.text,
        }
        if self.cut:
            data["cut"] = list(self.cut)
        if self.skipped:
            data["skipped"] = self.skipped
        if self.problem:
            data["problem"] = self.problem
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grounding:
        def ids(key: str) -> tuple[int, ...]:
            value = data.get(key)
            if not isinstance(value, list):
                return ()
            return tuple(i for i in value if isinstance(i, int) and not isinstance(i, bool))

        def whole(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        text = data.get("text")
        return cls(
            text=text if isinstance(text, str) else "",
            examples=ids("examples"),
            cut=ids("cut"),
            tokens=whole("tokens"),
            budget=whole("budget"),
            found=whole("found"),
            skipped=whole("skipped"),
            problem=str(data.get("problem") or ""),
        )


def ground(
    store: TraceStore,
    domain: str,
    tool: str,
    arguments: Any,
    *,
    budget: int = DEFAULT_BUDGET,
    limit: int = DEFAULT_EXAMPLES,
    count_tokens: TokenCounter = approx_tokens,
    exclude: Collection[int] = (),
) -> Grounding:
    """The examples for a call of ``tool``: the store's most similar earlier real
    exchanges of that tool (``limit`` at most, none of ``exclude``), within ``budget``."""
    found = store.similar(domain, tool, arguments, limit=limit, exclude=exclude)
    exchanges = [m.exchange for m in found.matches]
    grounding = render_examples(domain, tool, exchanges, budget=budget, count_tokens=count_tokens)
    return replace(grounding, found=len(exchanges), skipped=found.skipped, problem=found.problem)


def render_examples(
    domain: str,
    tool: str,
    exchanges: Sequence[Exchange],
    *,
    budget: int = DEFAULT_BUDGET,
    count_tokens: TokenCounter = approx_tokens,
) -> Grounding:
    """The section for ``exchanges`` (best first), fitted to ``budget`` tokens."""
    header = _header(domain, tool)
    chosen = list(exchanges)
    room = budget
    while chosen:
        fitted = _fit(header, chosen, room, count_tokens)
        if fitted is None:
            chosen.pop()  # the least similar goes; the others get its share
            room = budget
            continue
        text, cut = fitted
        tokens = count_tokens(text)
        if tokens > budget:  # a counter that does not add up over parts: ask for less
            room -= tokens - budget
            continue
        return Grounding(
            text=text,
            examples=tuple(e.id for e in chosen),
            cut=tuple(cut),
            tokens=tokens,
            budget=budget,
            found=len(exchanges),
        )
    return Grounding(budget=budget, found=len(exchanges))


def _fit(
    header: str, chosen: list[Exchange], budget: int, count: TokenCounter
) -> tuple[str, list[int]] | None:
    """The section with every one of ``chosen`` shown, its parts adding up to ``budget``
    tokens at most; None when one would keep fewer than MIN_OBSERVATION_TOKENS of its
    result."""
    observations = [sanitize(e.observation) for e in chosen]
    room = budget - count(_join(header, [_block(i, e, "") for i, e in enumerate(chosen, 1)]))
    if room < MIN_OBSERVATION_TOKENS * len(chosen):
        return None
    wants = [count(o) for o in observations]
    blocks: list[str] = []
    cut: list[int] = []
    for i, (exchange, observation, share) in enumerate(
        zip(chosen, observations, _share(wants, room), strict=True), 1
    ):
        if share >= wants[i - 1]:
            blocks.append(_block(i, exchange, observation))
            continue
        shown = _shorten(observation, count, share)
        if shown is None:
            return None
        blocks.append(_block(i, exchange, shown))
        cut.append(exchange.id)
    return _join(header, blocks), cut


def _share(wants: list[int], room: int) -> list[int]:
    """Split ``room`` so that every want that fits its share is met in full and the
    largest ones share what the others leave (water-filling)."""
    shares = [0] * len(wants)
    left, open_ = room, len(wants)
    for index in sorted(range(len(wants)), key=lambda k: wants[k]):
        fair = left // open_
        shares[index] = min(wants[index], fair)
        left -= shares[index]
        open_ -= 1
    return shares


def _shorten(text: str, size: TokenCounter, limit: int) -> str | None:
    """The longest head of ``text`` (with a note of what was cut) whose size is within
    ``limit``, cut at a line end where one is near; None when too little would be left."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if size(_head(text, middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    shown = _head(text, low)
    if low == 0 or size(shown) < MIN_OBSERVATION_TOKENS // 2:
        return None
    return shown


def _head(text: str, chars: int) -> str:
    if chars >= len(text):
        return text
    head = text[:chars]
    line = head.rfind("\n")
    if line >= chars * 4 // 5:
        head = head[:line]
    return head.rstrip() + "\n" + CUT_NOTE.format(n=len(text) - len(head))


def _header(domain: str, tool: str) -> str:
    name = one_line(tool)[:100]
    if tool == domain:
        what = f"answers the real {name} environment gave to earlier actions"
    else:
        what = f"answers the real tool {name} gave to earlier calls"
    return (
        f"**{SECTION}:**\n"
        f"For reference only: {what}, recorded outside this conversation. They show how "
        "it really answers (format, fields, errors). They are not part of this "
        "environment's history and may come from a different state: answer the action "
        "below from this environment's own history."
    )


def _block(number: int, exchange: Exchange, observation: str) -> str:
    arguments = json.dumps(exchange.arguments, ensure_ascii=False, sort_keys=True)
    arguments = sanitize(arguments)
    if len(arguments) > MAX_ARGUMENTS_SHOWN:
        cut = len(arguments) - MAX_ARGUMENTS_SHOWN
        arguments = arguments[:MAX_ARGUMENTS_SHOWN] + "\n" + CUT_NOTE.format(n=cut)
    return (
        f"Example {number}, arguments:\n{fenced(arguments, 'json')}\n"
        f"Real result:\n{fenced(observation)}"
    )


def _join(header: str, blocks: Sequence[str]) -> str:
    return "\n\n".join([header, *blocks])


# -- putting it into a turn -----------------------------------------------------------------
def with_grounding(user_message: str, grounding: Grounding | str) -> str:
    """``user_message`` with the examples as a section before its state and action (after
    the heading and any other section); unchanged when there is none."""
    text = (grounding.text if isinstance(grounding, Grounding) else grounding).strip()
    if not text:
        return user_message
    places = [user_message.find("\n\n" + anchor) for anchor in _ANCHORS]
    found = [p for p in places if p >= 0]
    if found:
        at = min(found)
        return f"{user_message[:at]}\n\n{text}{user_message[at:]}"
    heading, sep, rest = user_message.partition("\n\n")
    if heading.startswith("### Turn") and sep:
        return f"{heading}\n\n{text}\n\n{rest}"
    return f"{text}\n\n{user_message}"


def grounded(conversation: Conversation, grounding: Grounding | str) -> Conversation:
    """The conversation with the examples in its current turn only."""
    return replace(conversation, current=with_grounding(conversation.current, grounding))


@dataclass(frozen=True)
class Grounder:
    """A trace store and how much of it a turn may show: what a front-end holds when
    grounding is on (it is off unless a store is given)."""

    store: TraceStore
    budget: int = DEFAULT_BUDGET
    limit: int = DEFAULT_EXAMPLES
    count_tokens: TokenCounter = approx_tokens

    def for_action(self, action: Action, *, exclude: Collection[int] = ()) -> Grounding:
        """The examples for an action a domain validated."""
        tool, arguments = call_of(action.domain, action.payload)
        return ground(
            self.store,
            action.domain,
            tool,
            arguments,
            budget=self.budget,
            limit=self.limit,
            count_tokens=self.count_tokens,
            exclude=exclude,
        )
