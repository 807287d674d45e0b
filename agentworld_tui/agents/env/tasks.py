"""Rollout tasks: what a policy is asked to do, in which simulated environment.

A tasks file is JSON Lines (one object a line) or TOML (``[[task]]`` tables). A task has an
``instruction`` and a ``domain``, and optionally an ``id``, a ``scenario`` (a name from
``prompts/<domain>/scenarios.toml``, or a file), a fictional ``world``, a perturbation
``schedule`` (a table with a ``seed`` and ``rule`` list, or just the list of rules; see
``agents.schedule``), ``max_steps`` and ``system`` (the policy's
system prompt instead of the default). Every task is checked in full when the file is read:
a bad one is reported with its line (JSONL) or its place (TOML) and what is wrong, and the
others run.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld_tui.agents.env.environment import (
    EnvError,
    resolve_domain,
    resolve_scenario,
    resolve_world,
)
from agentworld_tui.agents.schedule import ScheduleError, parse_schedule

KEYS = ("id", "instruction", "domain", "scenario", "world", "schedule", "max_steps", "system")
MAX_TASKS_BYTES = 64 << 20
MAX_STEPS = 10_000


class TasksError(Exception):
    """A tasks file that cannot be read at all; the message is one line."""


@dataclass(frozen=True)
class Task:
    key: str
    """The task's ``id``, or where it is (``tasks.jsonl:3``): unique within the file."""
    instruction: str
    domain: str
    scenario: str | None = None
    world: str | None = None
    schedule: dict[str, Any] = field(default_factory=dict)
    """The schedule as written in a file (``{"seed": 0, "rule": [...]}``); empty for none."""
    max_steps: int | None = None
    system: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.key, "instruction": self.instruction}
        data["domain"] = self.domain
        for name in ("scenario", "world", "max_steps"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.schedule:
            data["schedule"] = self.schedule
        if self.system:
            data["system"] = self.system
        return data


@dataclass
class TaskSet:
    tasks: list[Task]
    problems: list[str]
    """One line per task left out: where it is and what is wrong."""


def load_tasks(path: Path) -> TaskSet:
    """The tasks of a JSONL or TOML file; raises TasksError when it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_TASKS_BYTES:
            raise TasksError(
                f"{path} is {size:,} bytes; a tasks file is at most {MAX_TASKS_BYTES:,}"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TasksError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TasksError(f"{path}: cannot read ({exc})") from None
    if path.suffix.lower() == ".toml":
        entries = _toml_entries(path, text)
    else:
        entries = _jsonl_entries(path, text)
    tasks: list[Task] = []
    problems: list[str] = []
    seen: set[str] = set()
    for where, entry in entries:
        if isinstance(entry, str):
            problems.append(f"{where}: {entry}")
            continue
        try:
            task = check_task(entry, where)
        except TasksError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if task.key in seen:
            problems.append(f"{where}: the id {task.key!r} is already used by another task")
            continue
        seen.add(task.key)
        tasks.append(task)
    return TaskSet(tasks, problems)


def _jsonl_entries(path: Path, text: str) -> list[tuple[str, dict[str, Any] | str]]:
    entries: list[tuple[str, dict[str, Any] | str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            entries.append((where, f"not valid JSON ({exc})"))
            continue
        entries.append((where, data if isinstance(data, dict) else "a task is a JSON object"))
    return entries


def _toml_entries(path: Path, text: str) -> list[tuple[str, dict[str, Any] | str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TasksError(f"{path}: not valid TOML ({exc})") from None
    tables = data.get("task")
    if not isinstance(tables, list):
        raise TasksError(f"{path}: no [[task]] tables")
    return [
        (f"{path.name}: task {n}", t if isinstance(t, dict) else "a task is a table")
        for n, t in enumerate(tables, 1)
    ]


def check_task(data: dict[str, Any], where: str) -> Task:
    """A task from its table, checked in full (domain, scenario, world and schedule are
    looked up); raises TasksError with what is wrong."""
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise TasksError(f"unknown key {unknown[0]!r} (a task has {', '.join(KEYS)})")
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TasksError("the instruction is missing or empty")
    domain_name = data.get("domain")
    if not isinstance(domain_name, str) or not domain_name:
        raise TasksError("the domain is missing")
    for name in ("id", "scenario", "world", "system"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise TasksError(f"{name} must be text")
    key = data.get("id") or where
    steps = data.get("max_steps")
    if steps is not None and (
        isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS
    ):
        raise TasksError(f"max_steps must be a whole number from 1 to {MAX_STEPS}")
    try:
        domain = resolve_domain(domain_name)
        resolve_scenario(domain, data.get("scenario"))
        resolve_world(data.get("world"))
        schedule = parse_schedule(data.get("schedule") or None, domain.name)
    except (EnvError, ScheduleError) as exc:
        raise TasksError(
            f"schedule: {exc}" if isinstance(exc, ScheduleError) else str(exc)
        ) from None
    return Task(
        key=str(key),
        instruction=instruction.strip(),
        domain=domain.name,
        scenario=data.get("scenario"),
        world=data.get("world"),
        schedule=schedule.to_dict() if schedule else {},
        max_steps=steps,
        system=str(data.get("system") or ""),
    )
