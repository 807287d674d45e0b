"""Perturbation schedules: which calls of an agent meet which injected fault.

One format serves the MCP server (``agentworld mcp serve --schedule FILE``) and the
environment (``Environment(schedule=...)``, a task's ``schedule``, ``agentworld env serve
--schedule FILE``). A schedule is a TOML or JSON file::

    seed = 7

    [[rule]]
    tool = "read_text_file"     # optional: every tool when left out (or "*")
    calls = [2, "5-7", "10-"]   # optional: every call when left out
    probability = 0.5           # optional: 1 when left out
    preset = "rate-limit"       # one of prompts/<domain>/perturbations.toml ...
    # instruction = "..."       # ... or a control instruction of your own

or the same in Python: ``{"seed": 7, "rule": [{"calls": [3], "preset": "disk-full"}]}``, or
just the list of rules (seed 0). ``calls = [3]`` is the third call only; ``calls = ["3-"]``
is every call from the third on.

A rule's call numbers count the calls of its tool (from 1), or every call when the rule
names no tool: on one MCP connection, or in one episode of an environment (its turns: the
tool of an action is its agent tool's or web page action's name, and a command has none,
so only the rules without a tool apply to it).
Whether a rule fires is drawn from the seed, the rule's place in the schedule, the tool and
the call number, and nothing else: the same schedule and seed give every connection and
every episode the same faults, whatever runs beside them. Rules that fire on one call are
joined, in order and after an instruction set by hand, into that turn's control
instruction; each rule considered is recorded as a ``Decision``.
"""

from __future__ import annotations

import json
import random
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentworld_tui.world.perturbation import (
    MAX_CONTROL_CHARS,
    ControlInstruction,
    join_instructions,
    load_perturbations,
)

MAX_RULES = 1000
MAX_CALL = 10_000_000


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class CallRange:
    """Call numbers from ``first`` to ``last`` (0: no end)."""

    first: int
    last: int = 0

    def __contains__(self, number: object) -> bool:
        return (
            isinstance(number, int)
            and number >= self.first
            and (not self.last or number <= self.last)
        )

    def to_value(self) -> int | str:
        """As written in a schedule: ``3``, ``"2-5"`` or ``"3-"``."""
        if self.last == self.first:
            return self.first
        return f"{self.first}-{self.last or ''}"


@dataclass(frozen=True)
class Rule:
    instruction: str
    tool: str = ""
    """"" for every tool."""
    calls: tuple[CallRange, ...] = ()
    """Empty for every call."""
    probability: float = 1.0
    preset: str = ""

    def matches(self, tool: str, call: int, tool_call: int) -> bool:
        if self.tool and self.tool != tool:
            return False
        number = tool_call if self.tool else call
        return not self.calls or any(number in r for r in self.calls)

    def to_dict(self) -> dict[str, Any]:
        """The rule as written in a schedule (a preset by its name)."""
        data: dict[str, Any] = {}
        if self.tool:
            data["tool"] = self.tool
        if self.calls:
            data["calls"] = [r.to_value() for r in self.calls]
        if self.probability != 1:
            data["probability"] = self.probability
        if self.preset:
            data["preset"] = self.preset
        else:
            data["instruction"] = self.instruction
        return data


@dataclass(frozen=True)
class Decision:
    """One rule considered for one call: the draw, and whether it fired."""

    rule: int
    """The rule's number in the schedule, from 1."""
    draw: float
    fired: bool
    instruction: str
    preset: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rule": self.rule, "draw": round(self.draw, 6), "fired": self.fired}
        if self.preset:
            data["preset"] = self.preset
        return data


@dataclass(frozen=True)
class Schedule:
    rules: tuple[Rule, ...] = ()
    seed: int = 0
    source: str = ""

    def __bool__(self) -> bool:
        return bool(self.rules)

    def decide(self, tool: str, call: int, tool_call: int) -> list[Decision]:
        """The rules that apply to a connection's ``call``-th call, its ``tool_call``-th
        of ``tool``, and whether each fired."""
        decisions: list[Decision] = []
        for index, rule in enumerate(self.rules, 1):
            if not rule.matches(tool, call, tool_call):
                continue
            number = tool_call if rule.tool else call
            draw = random.Random(f"{self.seed}/{index}/{tool}/{number}").random()
            fired = draw < rule.probability
            decisions.append(Decision(index, draw, fired, rule.instruction, rule.preset))
        return decisions

    def with_seed(self, seed: int) -> Schedule:
        return Schedule(self.rules, seed, self.source)

    def to_dict(self) -> dict[str, Any]:
        """The schedule as written in a file (``parse_schedule`` reads it back)."""
        return {"seed": self.seed, "rule": [r.to_dict() for r in self.rules]}


def joined_control(
    own: ControlInstruction | None, decisions: Sequence[Decision]
) -> ControlInstruction | None:
    """The instruction a call is sent with when ``decisions`` were made for it: ``own``
    (set by hand) and then the rules that fired, in order; None when none fired. It holds
    for that call only: put ``own`` back after it when ``own`` is persistent."""
    fired = [d for d in decisions if d.fired]
    if not fired:
        return None
    texts = [own.text] if own is not None else []
    texts += [d.instruction for d in fired]
    presets = [d.preset for d in fired if d.preset]
    preset = presets[0] if len(fired) == 1 and own is None and presets else ""
    return ControlInstruction(join_instructions(*texts), persistent=False, preset=preset)


def load_schedule(path: str | Path, domain: str) -> Schedule:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"cannot read {file}: {exc}") from None
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ScheduleError(
            f"{file}: not valid {file.suffix.lstrip('.') or 'TOML'}: {exc}"
        ) from None
    try:
        schedule = parse_schedule(data, domain, str(file))
        if not schedule:
            raise ScheduleError("the schedule has no [[rule]] entries")
    except ScheduleError as exc:
        raise ScheduleError(f"{file}: {exc}") from None
    return schedule


def parse_schedule(data: Any, domain: str, source: str = "") -> Schedule:
    """A schedule from its TOML/JSON form, a table with a ``seed`` and a ``rule`` list; or
    from just the list of rules (seed 0). ``None``, an empty list or an empty table is no
    schedule, and a ``Schedule`` is itself. Raises ScheduleError saying which rule and
    what is wrong."""
    if data is None or data == {}:
        return Schedule(source=source)
    if isinstance(data, Schedule):
        return data
    if isinstance(data, list | tuple):
        if not data:
            return Schedule(source=source)
        data = {"rule": list(data)}
    if not isinstance(data, dict):
        raise ScheduleError("a schedule is a table with a seed and [[rule]] entries")
    unknown = sorted(set(data) - {"seed", "rule"})
    if unknown:
        hint = "; [[schedule]] tables are [[rule]] now" if "schedule" in unknown else ""
        raise ScheduleError(f"unknown key {unknown[0]!r} (a schedule has seed and rule{hint})")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ScheduleError("seed must be a whole number")
    entries = data.get("rule", [])
    if not isinstance(entries, list) or not entries:
        raise ScheduleError("the schedule has no [[rule]] entries")
    if len(entries) > MAX_RULES:
        raise ScheduleError(f"more than {MAX_RULES} rules")
    presets, _problems = load_perturbations(domain)
    by_name = {p.name: p.instruction for p in presets}
    rules = tuple(_rule(entry, i, by_name, domain) for i, entry in enumerate(entries, 1))
    return Schedule(rules, seed, source)


_RULE_KEYS = {"tool", "calls", "probability", "preset", "instruction"}
_OLD_KEYS = {"turn", "persistent"}
"""The environment's schedule entries before the formats were one."""


def _rule(entry: Any, number: int, presets: dict[str, str], domain: str) -> Rule:
    where = f"rule {number}"
    if isinstance(entry, Rule):
        return entry
    if not isinstance(entry, dict):
        raise ScheduleError(f"{where} must be a table")
    unknown = sorted(set(entry) - _RULE_KEYS)
    if unknown:
        hint = (
            ' (calls = [N] is turn N only, calls = ["N-"] every turn from N on)'
            if unknown[0] in _OLD_KEYS
            else ""
        )
        raise ScheduleError(f"{where}: unknown key {unknown[0]!r}{hint}")
    tool = entry.get("tool", "")
    if not isinstance(tool, str):
        raise ScheduleError(f"{where}: tool must be a tool's name")
    tool = "" if tool.strip() == "*" else tool.strip()
    probability = entry.get("probability", 1.0)
    if isinstance(probability, bool) or not isinstance(probability, int | float):
        raise ScheduleError(f"{where}: probability must be a number from 0 to 1")
    if not 0 <= probability <= 1:
        raise ScheduleError(f"{where}: probability must be from 0 to 1, not {probability}")
    preset, instruction = entry.get("preset", ""), entry.get("instruction", "")
    if not isinstance(preset, str) or not isinstance(instruction, str):
        raise ScheduleError(f"{where}: preset and instruction are texts")
    if bool(preset.strip()) == bool(instruction.strip()):
        raise ScheduleError(f"{where}: give either a preset or an instruction")
    if preset:
        if preset not in presets:
            known = ", ".join(sorted(presets)) or "none"
            raise ScheduleError(
                f"{where}: no {domain} perturbation named {preset!r}; the presets are: {known}"
            )
        instruction = presets[preset]
    instruction = instruction.strip()
    if len(instruction) > MAX_CONTROL_CHARS:
        raise ScheduleError(
            f"{where}: the instruction is {len(instruction):,} characters; "
            f"the limit is {MAX_CONTROL_CHARS:,}"
        )
    calls = _calls(entry.get("calls"), where)
    return Rule(instruction, tool, calls, float(probability), preset)


def _calls(value: Any, where: str) -> tuple[CallRange, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    ranges: list[CallRange] = []
    for item in items:
        ranges.append(_call_range(item, where))
    return tuple(ranges)


def _call_range(item: Any, where: str) -> CallRange:
    problem = f'{where}: calls are numbers from 1, or ranges such as "2-5" or "3-"'
    if isinstance(item, bool):
        raise ScheduleError(problem)
    if isinstance(item, int):
        if not 1 <= item <= MAX_CALL:
            raise ScheduleError(problem)
        return CallRange(item, item)
    if not isinstance(item, str):
        raise ScheduleError(problem)
    first, dash, last = item.strip().partition("-")
    if not first.isdigit() or (last and not last.isdigit()):
        raise ScheduleError(problem)
    low = int(first)
    high = int(last) if last else (0 if dash else low)
    if not 1 <= low <= MAX_CALL or (high and not low <= high <= MAX_CALL):
        raise ScheduleError(problem)
    return CallRange(low, high)
