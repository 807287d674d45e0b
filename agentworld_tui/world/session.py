"""A simulated environment's conversation: its turns and the messages sent for each.

The model sees one conversation per environment: the domain's system prompt, then for each
earlier turn the action (user) and the observation that was shown (assistant; never the
reasoning), then the current action. Oldest turns are left out when the history would not
fit the context budget.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentworld_tui.world.action import Action
from agentworld_tui.world.context import first_kept_turn
from agentworld_tui.world.domain import Domain, Scenario

TurnStatus = Literal["pending", "complete", "interrupted", "no_answer", "error"]
Message = dict[str, str]

# Chat-template overhead per message (role markers, newlines), a safe over-estimate.
_MESSAGE_OVERHEAD = 6


@dataclass
class Turn:
    number: int
    action: Action
    user_message: str
    """The turn exactly as it was sent to the model."""
    state: str | None = None
    observation: str = ""
    """The observation exactly as predicted (sanitized only for display)."""
    reasoning: str = ""
    status: TurnStatus = "pending"
    note: str = ""
    """Why a turn is not complete: stopped by the user, max tokens, an engine error..."""
    stats: dict[str, Any] = field(default_factory=dict)
    omitted_turns: int = 0
    """Earlier turns that did not fit the context and were left out of this turn's prompt."""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Earlier answers to this same action (retries), newest last."""

    @property
    def shown(self) -> bool:
        """Whether this turn has an observation that later turns build on."""
        return self.status in ("complete", "interrupted") and bool(self.observation)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "action": self.action.to_dict(),
            "user_message": self.user_message,
            "state": self.state,
            "observation": self.observation,
            "reasoning": self.reasoning,
            "status": self.status,
            "note": self.note,
            "stats": self.stats,
            "omitted_turns": self.omitted_turns,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        return cls(
            number=int(data["number"]),
            action=Action.from_dict(data["action"]),
            user_message=str(data["user_message"]),
            state=data.get("state"),
            observation=str(data.get("observation", "")),
            reasoning=str(data.get("reasoning", "")),
            status=data.get("status", "complete"),
            note=str(data.get("note", "")),
            stats=dict(data.get("stats", {})),
            omitted_turns=int(data.get("omitted_turns", 0)),
            attempts=list(data.get("attempts", [])),
        )


@dataclass
class Prompt:
    messages: list[Message]
    omitted_turns: int
    """Earlier turns left out because they did not fit."""


@dataclass
class Session:
    domain: Domain
    scenario: Scenario
    system_prompt: str
    turns: list[Turn] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created: float = field(default_factory=time.time)
    _sizes: dict[str, int] = field(default_factory=dict, repr=False)

    # -- the path of one action ---------------------------------------------------------
    def begin_turn(self, action: Action) -> Turn:
        """Add the action as a new pending turn, or retry a pending/unanswered last one."""
        number = len(self.turns) + 1
        state = self.scenario.state if number == 1 and self.scenario.state.strip() else None
        turn = Turn(number, action, self.domain.render_turn(number, action, state), state)
        self.turns.append(turn)
        return turn

    def retry(self) -> Turn:
        """Put the last turn back to pending, keeping its previous answer among attempts."""
        turn = self.turns[-1]
        if turn.observation or turn.reasoning:
            turn.attempts.append(
                {
                    "observation": turn.observation,
                    "reasoning": turn.reasoning,
                    "status": turn.status,
                    "note": turn.note,
                    "stats": turn.stats,
                }
            )
        turn.observation = turn.reasoning = turn.note = ""
        turn.status, turn.stats = "pending", {}
        return turn

    def undo(self) -> Turn | None:
        return self.turns.pop() if self.turns else None

    def prompt(
        self,
        turn: Turn,
        count_tokens: Callable[[str], int] | None = None,
        budget: int | None = None,
    ) -> Prompt:
        """The messages for ``turn``; with a token counter and budget, oldest turns that
        do not fit are left out."""
        earlier = [t for t in self.turns[: turn.number - 1] if t.shown]
        first = 0
        if count_tokens is not None and budget is not None:
            sizes = [
                self._size(t.user_message, count_tokens) + self._size(t.observation, count_tokens)
                for t in earlier
            ]
            fixed = self._size(self.system_prompt, count_tokens) + self._size(
                turn.user_message, count_tokens
            )
            first = first_kept_turn(sizes, fixed, budget)
        messages: list[Message] = [{"role": "system", "content": self.system_prompt}]
        for t in earlier[first:]:
            messages.append({"role": "user", "content": t.user_message})
            messages.append({"role": "assistant", "content": t.observation})
        messages.append({"role": "user", "content": turn.user_message})
        return Prompt(messages, first)

    def finish_turn(
        self,
        turn: Turn,
        *,
        observation: str,
        reasoning: str,
        status: TurnStatus,
        note: str = "",
        stats: dict[str, Any] | None = None,
    ) -> None:
        turn.observation, turn.reasoning = observation, reasoning
        turn.status, turn.note = status, note
        turn.stats = dict(stats or {})

    def _size(self, text: str, count_tokens: Callable[[str], int]) -> int:
        size = self._sizes.get(text)
        if size is None:
            size = count_tokens(text) + _MESSAGE_OVERHEAD
            self._sizes[text] = size
        return size

    # -- files --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "domain": self.domain.name,
            "created": self.created,
            "scenario": self.scenario.to_dict(),
            "system_prompt": self.system_prompt,
            "turns": [t.to_dict() for t in self.turns],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], domain: Domain) -> Session:
        return cls(
            domain=domain,
            scenario=Scenario.from_dict(data["scenario"]),
            system_prompt=str(data["system_prompt"]),
            turns=[Turn.from_dict(t) for t in data.get("turns", [])],
            id=str(data.get("id") or uuid.uuid4().hex[:12]),
            created=float(data.get("created", time.time())),
        )


def new_session(domain: Domain, scenario: Scenario) -> tuple[Session, list[str]]:
    """A fresh session with the domain's system prompt filled in for ``scenario``.

    Returns the problems met loading the prompt (an unreadable override, say).
    """
    from agentworld_tui.world.prompts import load_template

    template = load_template(domain.name)
    prompt = template.render(domain.prompt_values(scenario))
    return Session(domain, scenario, prompt), template.problems
