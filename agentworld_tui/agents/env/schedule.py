"""Perturbation schedules: which control instruction goes with which turn of an episode.

The authors steer the simulator with control instructions (a tool that fails, a rate limit, a
full disk); a schedule injects them at chosen turns, so that every episode of a task meets
the same failures at the same points. An entry names a preset of the domain
(``prompts/<domain>/perturbations.toml``) or gives its own instruction, and applies to one
turn, or to every turn from it on (``persistent``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_TURN = 1_000_000


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says which entry and why."""


@dataclass(frozen=True)
class ScheduledPerturbation:
    """One control instruction, sent with turn ``turn`` (and every later one when
    ``persistent``)."""

    turn: int
    instruction: str
    preset: str = ""
    persistent: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": self.turn, "instruction": self.instruction}
        if self.preset:
            data["preset"] = self.preset
        if self.persistent:
            data["persistent"] = True
        return data


@dataclass(frozen=True)
class Schedule:
    """The perturbations of an episode, by turn."""

    entries: tuple[ScheduledPerturbation, ...] = ()

    def at(self, turn: int) -> ScheduledPerturbation | None:
        """The entry for ``turn``: one given for that very turn, else the latest persistent
        one that started before it."""
        exact = [e for e in self.entries if e.turn == turn]
        if exact:
            return exact[-1]
        running = [e for e in self.entries if e.persistent and e.turn < turn]
        return max(running, key=lambda e: e.turn) if running else None

    def to_list(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.entries]

    def __bool__(self) -> bool:
        return bool(self.entries)


def parse_schedule(domain: str, data: object) -> Schedule:
    """A schedule from its JSON/TOML form: a list of tables with ``turn`` (a number or a
    list of numbers) and ``preset`` or ``instruction``, optionally ``persistent``; or a
    table from turn to preset name. Raises ScheduleError."""
    if data is None:
        return Schedule()
    if isinstance(data, Schedule):
        return data
    if isinstance(data, Mapping):
        items: list[Any] = [{"turn": key, "preset": value} for key, value in data.items()]
    elif isinstance(data, Iterable) and not isinstance(data, str | bytes):
        items = list(data)
    else:
        raise ScheduleError("a schedule is a list of {turn, preset or instruction} tables")
    presets: dict[str, Any] | None = None
    entries: list[ScheduledPerturbation] = []
    for number, item in enumerate(items, 1):
        where = f"schedule entry {number}"
        if isinstance(item, ScheduledPerturbation):
            entries.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ScheduleError(f"{where} is not a table")
        unknown = set(item) - {"turn", "preset", "instruction", "persistent"}
        if unknown:
            raise ScheduleError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        turns = _turns(item.get("turn"), where)
        persistent = item.get("persistent", False)
        if not isinstance(persistent, bool):
            raise ScheduleError(f"{where}: persistent must be true or false")
        preset, text = item.get("preset"), item.get("instruction")
        if (preset is None) == (text is None):
            raise ScheduleError(f"{where}: give either a preset or an instruction")
        if preset is not None:
            if presets is None:
                presets = _presets(domain)
            found = presets.get(str(preset))
            if found is None:
                known = ", ".join(sorted(presets)) or "none"
                raise ScheduleError(
                    f"{where}: {domain} has no perturbation preset {str(preset)!r} (it has: {known})"
                )
            text, name = found.instruction, found.name
        else:
            name = ""
        if not isinstance(text, str) or not text.strip():
            raise ScheduleError(f"{where}: the instruction is empty")
        from agentworld_tui.world.perturbation import ControlError, control_instruction

        try:
            checked = control_instruction(text).text
        except ControlError as exc:
            raise ScheduleError(f"{where}: {exc}") from None
        entries.extend(ScheduledPerturbation(t, checked, name, persistent) for t in turns)
    return Schedule(tuple(entries))


def _turns(value: object, where: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    turns: list[int] = []
    for item in values:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_TURN:
            raise ScheduleError(f"{where}: turn must be a whole number from 1")
        turns.append(item)
    if not turns:
        raise ScheduleError(f"{where}: turn is missing")
    return turns


def _presets(domain: str) -> dict[str, Any]:
    from agentworld_tui.world.perturbation import load_perturbations

    found, _problems = load_perturbations(domain)
    return {p.name: p for p in found}


def load_schedule_file(domain: str, path: str | Path) -> Schedule:
    """A schedule from a file: TOML with ``[[schedule]]`` tables, or a JSON list (or an
    object with a ``schedule`` list); raises ScheduleError naming the file."""
    import json
    import tomllib

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"cannot read {file}: {exc}") from None
    try:
        data: Any = tomllib.loads(text) if file.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ScheduleError(f"{file}: {exc}") from None
    if isinstance(data, dict):
        data = data.get("schedule", [])
    try:
        return parse_schedule(domain, data)
    except ScheduleError as exc:
        raise ScheduleError(f"{file}: {exc}") from None
