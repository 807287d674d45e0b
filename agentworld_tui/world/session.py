"""A simulated environment's conversation: its turns and the messages sent for each.

The model sees one conversation per environment: the domain's system prompt, then for each
earlier turn the action (user) and the observation that was shown (assistant; never the
reasoning), then the current action. Oldest turns are left out when the history would not
fit the context budget.

History can be edited: undo the last turn, regenerate a turn (earlier answers stay
reachable), or branch at an earlier turn with an edited action. A session holds every
branch; ``turns`` is always the branch being shown.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentworld_tui.world.action import Action
from agentworld_tui.world.context import first_kept_turn
from agentworld_tui.world.domain import Domain, Scenario

if TYPE_CHECKING:
    # Imported where they are used: the app's first frame needs neither.
    from agentworld_tui.world.fictional_world import FictionalWorld
    from agentworld_tui.world.perturbation import ControlInstruction

TurnStatus = Literal["pending", "complete", "interrupted", "no_answer", "error"]
Message = dict[str, str]

# Chat-template overhead per message (role markers, newlines), a safe over-estimate.
_MESSAGE_OVERHEAD = 6


@dataclass
class Turn:
    """One action and what the model predicted for it."""

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
    control: str = ""
    """The control instruction this turn was sent with ("" for none); it is also written
    into ``user_message``."""
    judgement: dict[str, Any] | None = None
    """The latest judgement of this turn's observation (``judge.Verdict.to_dict()``)."""
    raw: str = ""
    """The model's output as generated, tags and all (the observation is extracted from it)."""
    extraction: str = ""
    """What the extraction left out, when it did ("2 observation blocks: showing the last")."""
    reality: dict[str, Any] | None = None
    """What the twin answered for this action, in a twinned session: ``real`` (the twin's
    ``RealObservation.to_dict()``), ``divergence`` (of ``observation`` from it; None when
    reality gave no answer to compare), ``delivered`` ("real" or "sim": the side the agent
    received) and, once judged, ``judgement`` (a verdict with the real side as the
    reference). Plain data: the world knows no twin."""
    route: dict[str, Any] | None = None
    """Where a routed call was answered, and why (a routing ``Decision.to_dict()``:
    ``route``, ``answered`` "real", "sim" or "both", ``reason``...). A turn reality
    answered alone has reality's answer as its ``observation``. Plain data."""
    grounding: dict[str, Any] | None = None
    """The real examples this turn's prompt was shown (``Grounding.to_dict()``: their ids
    in the trace store, and the section's ``text``, which goes into the current turn's
    message only, so ``user_message`` stays as the history shows it)."""

    @property
    def delivered_real(self) -> bool:
        """Whether the agent received reality's answer for this turn."""
        return self.reality is not None and self.reality.get("delivered") == "real"

    @property
    def shown_text(self) -> str:
        """What the agent received for this turn, and so what later prompts show for it:
        reality's answer when that was delivered, else the prediction. ``observation``
        stays what the model predicted."""
        if self.delivered_real:
            assert self.reality is not None
            return str(self.reality.get("real", {}).get("text", ""))
        return self.observation

    @property
    def shown(self) -> bool:
        """Whether this turn has an observation that later turns build on."""
        if self.delivered_real:
            return True
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
            "control": self.control,
            "judgement": self.judgement,
            "raw": self.raw,
            "extraction": self.extraction,
        } | {
            key: value
            for key, value in (
                ("reality", self.reality),
                ("route", self.route),
                ("grounding", self.grounding),
            )
            if value is not None
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
            control=str(data.get("control") or ""),
            judgement=dict(data["judgement"]) if data.get("judgement") else None,
            raw=str(data.get("raw") or ""),
            extraction=str(data.get("extraction") or ""),
            reality=dict(data["reality"]) if data.get("reality") else None,
            route=dict(data["route"]) if data.get("route") else None,
            grounding=dict(data["grounding"]) if data.get("grounding") else None,
        )


@dataclass
class Prompt:
    """The messages for one turn, and how many earlier turns were left out."""

    messages: list[Message]
    omitted_turns: int
    """Earlier turns left out because they did not fit."""


def message_size(text: str, count_tokens: Callable[[str], int]) -> int:
    """Tokens one message takes in the prompt, its chat-template markers included."""
    return count_tokens(text) + _MESSAGE_OVERHEAD


@dataclass(frozen=True)
class Conversation:
    """One turn's conversation before it is fitted to the context: the system prompt, the
    earlier turns that were shown (action, observation), and the current action."""

    system: str
    earlier: tuple[tuple[str, str], ...]
    current: str

    def fit(
        self, count_tokens: Callable[[str], int] | None = None, budget: int | None = None
    ) -> Prompt:
        """The messages; with a token counter and a budget, the oldest earlier turns that
        do not fit are left out."""
        first = 0
        if count_tokens is not None and budget is not None:
            count = count_tokens

            def size(text: str) -> int:
                return message_size(text, count)

            sizes = [size(user) + size(observation) for user, observation in self.earlier]
            first = first_kept_turn(sizes, size(self.system) + size(self.current), budget)
        messages: list[Message] = [{"role": "system", "content": self.system}]
        for user, observation in self.earlier[first:]:
            messages.append({"role": "user", "content": user})
            messages.append({"role": "assistant", "content": observation})
        messages.append({"role": "user", "content": self.current})
        return Prompt(messages, first)


class HistoryError(ValueError):
    """An edit the history does not allow; the message says why, for display."""


@dataclass
class Branch:
    """One line of turns.

    A branch owns copies of the turns it shares with the branch it came from, so editing
    one branch never changes another.
    """

    id: int
    turns: list[Turn] = field(default_factory=list)
    parent: int | None = None
    """The branch this one was made from (None for the first)."""
    fork_turn: int = 1
    """The first turn where this branch differs from ``parent``."""
    created: float = field(default_factory=time.time)
    undo: bool = False
    """Made by undoing turns of ``parent`` (redo takes them back from it)."""

    @property
    def label(self) -> str:
        if self.parent is None:
            return f"branch {self.id}"
        how = "undone" if self.undo else "from"
        return f"branch {self.id} ({how} branch {self.parent} at turn {self.fork_turn})"

    def to_dict(self, *, with_turns: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "parent": self.parent,
            "fork_turn": self.fork_turn,
            "created": self.created,
            "undo": self.undo,
        }
        if with_turns:
            data["turns"] = [t.to_dict() for t in self.turns]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], turns: list[Turn] | None = None) -> Branch:
        parent = data.get("parent")
        return cls(
            id=int(data["id"]),
            turns=turns if turns is not None else [Turn.from_dict(t) for t in data["turns"]],
            parent=None if parent is None else int(parent),
            fork_turn=int(data.get("fork_turn", 1)),
            created=float(data.get("created", time.time())),
            undo=data.get("undo") is True,
        )


def _prediction_figures(turn: Turn) -> dict[str, Any]:
    """What of a twinned turn's reality record belongs to its prediction (the divergence,
    the judgement against reality), kept with the prediction among the attempts."""
    if turn.reality is None:
        return {}
    kept = {k: turn.reality[k] for k in ("divergence", "judgement") if turn.reality.get(k)}
    return {"reality": kept} if kept else {}


def _same_turn(a: Turn, b: Turn) -> bool:
    return (a.user_message, a.observation, a.status) == (b.user_message, b.observation, b.status)


@dataclass
class Session:
    """One tab's history: the domain, its scenario and system prompt, the turns and branches."""

    domain: Domain
    scenario: Scenario
    system_prompt: str
    turns: list[Turn] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created: float = field(default_factory=time.time)
    branches: list[Branch] = field(default_factory=list)
    """Every branch, the shown one included (its ``turns`` is this session's ``turns``)."""
    branch_id: int = 1
    """The branch being shown."""
    control: ControlInstruction | None = None
    """The control instruction for the next turn (kept after it when persistent)."""
    world: FictionalWorld | None = None
    """A fictional world that every turn's simulation instruction carries (panes opt in)."""
    twin: dict[str, Any] | None = None
    """The real twin beside this session, in a twinned session: what it is (``domain``,
    ``kind``, its sandbox or server, never a secret), the side delivered to the agent,
    and at the episode's end the task's ``check`` (command and result) and the episode's
    ``figures``. Plain data: the world knows no twin."""

    def __post_init__(self) -> None:
        if not any(b.id == self.branch_id for b in self.branches):
            self.branches.append(Branch(self.branch_id, self.turns, created=self.created))
        self.branch.turns = self.turns

    # -- the path of one action ---------------------------------------------------------
    def begin_turn(self, action: Action) -> Turn:
        """Add the action as a new pending turn, or retry a pending/unanswered last one."""
        number = len(self.turns) + 1
        state = self.scenario.state if number == 1 and self.scenario.state.strip() else None
        control = self.control.text if self.control is not None else ""
        from agentworld_tui.world.perturbation import join_instructions, write_control

        message = write_control(
            self.domain.render_turn(number, action, state),
            join_instructions(control, self.world.instruction() if self.world else ""),
        )
        turn = Turn(number, action, message, state, control=control)
        if self.control is not None and not self.control.persistent:
            self.control = None
        self.turns.append(turn)
        return turn

    def set_control(self, text: str, *, persistent: bool = False, preset: str = "") -> None:
        """Send ``text`` with the next turn, or with every turn until ``clear_control``;
        raises ControlError for an empty or oversized instruction."""
        from agentworld_tui.world.perturbation import control_instruction

        self.control = control_instruction(text, persistent=persistent, preset=preset)

    def clear_control(self) -> None:
        self.control = None

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
                    "raw": turn.raw,
                    "extraction": turn.extraction,
                }
                | _prediction_figures(turn)
            )
        turn.observation = turn.reasoning = turn.note = turn.raw = turn.extraction = ""
        turn.status, turn.stats = "pending", {}
        if turn.reality is not None:  # reality answered once; only the prediction is new
            turn.reality = {
                k: v for k, v in turn.reality.items() if k not in ("divergence", "judgement")
            }
        return turn

    def undo(self) -> Turn | None:
        """Take back the last turn; None when there is none.

        Nothing is lost: the first undo moves the shown history to a new branch without
        the turn, leaving the branch it was on whole (``redo`` brings it back, and the
        branches screen switches to it); undoing again on that branch takes more turns
        off it while it is still a part of the branch it came from.
        """
        self._check_idle()
        if not self.turns:
            return None
        turn = self.turns[-1]
        shown = self.branch
        parent = self._undone_from(shown)
        if parent is None:
            kept = [copy.deepcopy(t) for t in self.turns[:-1]]
            branch = Branch(
                max(b.id for b in self.branches) + 1,
                kept,
                parent=shown.id,
                fork_turn=len(self.turns),
                undo=True,
            )
            self.branches.append(branch)
            self.branch_id, self.turns = branch.id, kept
        else:
            self.turns.pop()
        return turn

    def redo(self) -> Turn:
        """Bring back the turn undone last; raises HistoryError when there is none (or a
        new turn was taken since)."""
        self._check_idle()
        shown = self.branch
        parent = self._undone_from(shown)
        if parent is None:
            raise HistoryError("nothing to redo")
        turn = copy.deepcopy(parent.turns[len(self.turns)])
        if len(self.turns) + 1 == len(parent.turns):  # all back: the undo branch goes
            self.branches.remove(shown)
            for branch in self.branches:
                if branch.parent == shown.id:
                    branch.parent = parent.id
            self.branch_id, self.turns = parent.id, parent.turns
            return self.turns[-1]
        self.turns.append(turn)
        return turn

    def _undone_from(self, branch: Branch) -> Branch | None:
        """The branch that ``branch`` was undone from, while ``branch`` is still a part of
        it with fewer turns (no new turn taken since)."""
        if not branch.undo or branch.parent is None:
            return None
        parent = next((b for b in self.branches if b.id == branch.parent), None)
        if parent is None or len(parent.turns) <= len(branch.turns):
            return None
        if all(_same_turn(a, b) for a, b in zip(branch.turns, parent.turns, strict=False)):
            return parent
        return None

    def conversation(self, turn: Turn) -> Conversation:
        """What ``turn`` sends, as an immutable snapshot: the engine's thread fits it to the
        context while this session's own thread goes on owning (and changing) the session."""
        earlier = tuple(
            (t.user_message, t.shown_text) for t in self.turns[: turn.number - 1] if t.shown
        )
        return Conversation(self.system_prompt, earlier, turn.user_message)

    def prompt(
        self,
        turn: Turn,
        count_tokens: Callable[[str], int] | None = None,
        budget: int | None = None,
    ) -> Prompt:
        """The messages for ``turn``; with a token counter and budget, oldest turns that
        do not fit are left out."""
        return self.conversation(turn).fit(count_tokens, budget)

    def finish_turn(
        self,
        turn: Turn,
        *,
        observation: str,
        reasoning: str,
        status: TurnStatus,
        note: str = "",
        stats: dict[str, Any] | None = None,
        raw: str = "",
        extraction: str = "",
        reality: dict[str, Any] | None = None,
    ) -> None:
        """Record a finished turn; ``reality`` (a twinned turn's record) replaces the
        turn's when given, and leaves it as it was when not."""
        turn.observation, turn.reasoning = observation, reasoning
        turn.status, turn.note = status, note
        turn.stats = dict(stats or {})
        turn.raw, turn.extraction = raw, extraction
        if reality is not None:
            turn.reality = reality

    # -- editing history --------------------------------------------------------------------
    @property
    def branch(self) -> Branch:
        """The branch being shown (kept in step with ``turns``)."""
        for branch in self.branches:
            if branch.id == self.branch_id:
                branch.turns = self.turns
                return branch
        raise HistoryError(f"branch {self.branch_id} is missing")

    def regenerate(self, number: int | None = None) -> Turn:
        """Sample turn ``number`` (default: the last) again and return it, pending.

        The last turn is retried in place, its answer kept among ``attempts``; an earlier
        turn is regenerated on a new branch, so the turns built on its old answer stay on
        the old branch.
        """
        self._check_idle()
        if not self.turns:
            raise HistoryError("there is no turn to regenerate")
        if number is None or number == len(self.turns):
            return self.retry()
        return self.fork(number)

    def restore_attempt(self, index: int) -> Turn:
        """Show an earlier answer of the last turn again; the current one joins the attempts."""
        self._check_idle()
        if not self.turns or not 0 <= index < len(self.turns[-1].attempts):
            raise HistoryError("no such earlier answer")
        turn = self.turns[-1]
        chosen = turn.attempts.pop(index)
        turn.attempts.append(
            {
                "observation": turn.observation,
                "reasoning": turn.reasoning,
                "status": turn.status,
                "note": turn.note,
                "stats": turn.stats,
                "raw": turn.raw,
                "extraction": turn.extraction,
            }
            | _prediction_figures(turn)
        )
        turn.observation = str(chosen.get("observation", ""))
        turn.reasoning = str(chosen.get("reasoning", ""))
        turn.status = chosen.get("status", "complete")
        turn.note = str(chosen.get("note", ""))
        turn.stats = dict(chosen.get("stats", {}))
        turn.raw = str(chosen.get("raw") or "")
        turn.extraction = str(chosen.get("extraction") or "")
        if turn.reality is not None:
            figures = chosen.get("reality") or {}
            turn.reality = {
                k: v for k, v in turn.reality.items() if k not in ("divergence", "judgement")
            } | {k: figures[k] for k in ("divergence", "judgement") if figures.get(k)}
        return turn

    def fork(self, number: int, action: Action | None = None) -> Turn:
        """Start a new branch at turn ``number`` and return its pending turn there.

        The new branch has copies of the turns before ``number``, then ``action`` (an
        edited action) or, without one, the same turn text again. The branch left behind
        stays whole and can be switched back to.
        """
        self._check_idle()
        if not 1 <= number <= len(self.turns):
            raise HistoryError(f"there is no turn {number} to branch from")
        left = self.branch  # (reading it keeps its turns in step with ``turns``)
        old = self.turns[number - 1]
        kept = [copy.deepcopy(t) for t in self.turns[: number - 1]]
        branch = Branch(
            max(b.id for b in self.branches) + 1, kept, parent=left.id, fork_turn=number
        )
        self.branches.append(branch)
        self.branch_id, self.turns = branch.id, kept
        if action is not None:
            return self.begin_turn(action)
        turn = Turn(number, old.action, old.user_message, old.state, control=old.control)
        self.turns.append(turn)
        return turn

    def switch_branch(self, branch_id: int) -> Branch:
        self._check_idle()
        self.branch.turns = self.turns
        for branch in self.branches:
            if branch.id == branch_id:
                self.branch_id, self.turns = branch.id, branch.turns
                return branch
        raise HistoryError(f"there is no branch {branch_id}")

    def delete_branch(self, branch_id: int) -> None:
        """Remove a branch that is not shown; branches made from it keep their turns."""
        if branch_id == self.branch_id:
            raise HistoryError("the branch being shown cannot be deleted: switch first")
        doomed = next((b for b in self.branches if b.id == branch_id), None)
        if doomed is None:
            raise HistoryError(f"there is no branch {branch_id}")
        self.branches.remove(doomed)
        for branch in self.branches:
            if branch.parent == branch_id:
                branch.parent = doomed.parent

    def alternatives(self, number: int) -> list[Branch]:
        """The versions of turn ``number`` to switch between, one branch per version.

        Only branches that agree with the shown one before ``number`` count; of several
        with the same version of that turn, the shown branch, else the newest, stands for
        it. One entry means there is nothing to switch to.
        """
        shown = self.branch
        if not 1 <= number <= len(shown.turns):
            return []
        prefix = shown.turns[: number - 1]
        versions: list[Branch] = []
        for branch in sorted(self.branches, key=lambda b: b.id):
            if len(branch.turns) < number or not all(
                _same_turn(a, b) for a, b in zip(prefix, branch.turns, strict=False)
            ):
                continue
            turn = branch.turns[number - 1]
            same = next(
                (i for i, v in enumerate(versions) if _same_turn(v.turns[number - 1], turn)), None
            )
            if same is None:
                versions.append(branch)
            elif versions[same] is not shown:
                versions[same] = branch
        return versions

    def _check_idle(self) -> None:
        if self.turns and self.turns[-1].status == "pending":
            raise HistoryError("a turn is still running: stop it first")

    # -- files --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "domain": self.domain.name,
            "created": self.created,
            "scenario": self.scenario.to_dict(),
            "system_prompt": self.system_prompt,
            "turns": [t.to_dict() for t in self.turns],
            "branch": self.branch_id,
            "branches": [b.to_dict(with_turns=b.id != self.branch_id) for b in self.branches],
            "control": self.control.to_dict() if self.control is not None else None,
            "world": self.world.to_dict() if self.world is not None else None,
        } | ({"twin": self.twin} if self.twin is not None else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any], domain: Domain) -> Session:
        from agentworld_tui.world.fictional_world import world_from_dict
        from agentworld_tui.world.perturbation import ControlInstruction

        turns = [Turn.from_dict(t) for t in data.get("turns", [])]
        shown = int(data.get("branch", 1))
        branches = [
            Branch.from_dict(b, turns if int(b["id"]) == shown else None)
            for b in data.get("branches", [])
        ]
        return cls(
            domain=domain,
            scenario=Scenario.from_dict(data["scenario"]),
            system_prompt=str(data["system_prompt"]),
            turns=turns,
            id=str(data.get("id") or uuid.uuid4().hex[:12]),
            created=float(data.get("created", time.time())),
            branches=branches,
            branch_id=shown,
            control=ControlInstruction.from_dict(data["control"]) if data.get("control") else None,
            world=world_from_dict(data["world"]) if data.get("world") else None,
            twin=dict(data["twin"]) if data.get("twin") else None,
        )


def new_session(domain: Domain, scenario: Scenario) -> tuple[Session, list[str]]:
    """A fresh session with the domain's system prompt filled in for ``scenario``.

    Returns the problems met loading the prompt (an unreadable override, say).
    """
    from agentworld_tui.world.prompts import load_template

    template = load_template(domain.name)
    prompt = template.render(domain.prompt_values(scenario))
    return Session(domain, scenario, prompt), template.problems
