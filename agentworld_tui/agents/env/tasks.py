"""Rollout tasks: what a policy is asked to do, in which simulated environment.

A tasks file is JSON Lines (one object a line) or TOML (``[[task]]`` tables). A task has an
``instruction`` and a ``domain``, and optionally an ``id``, a ``scenario`` (a name from
``prompts/<domain>/scenarios.toml``, or a file), a fictional ``world`` (a name, or a
``.toml`` file), a perturbation
``schedule`` (a table with a ``seed`` and ``rule`` list, or just the list of rules; see
``agents.schedule``), ``max_steps``, ``system`` (the policy's
system prompt instead of the default) and ``check`` (a command line run in the episode's
twin after it, exit 0 = success; only with a twin, and only inside it: a terminal or SWE
twin's sandbox, or this machine where the run was given ``--twin-on-host``). Every task is checked in full when the file is read:
a bad one is reported with its line (JSONL) or its place (TOML) and what is wrong, and the
others run.

A tasks file may come from someone else, so the files it names are read only from its own
folder (relative paths that stay inside it, links resolved): it cannot send the policy
server a file of the user's. A task is known by its ``id``, or without one by its content
(``task-`` and a hash), never by its place in the file: a run resumed after tasks were
inserted, moved or removed plays each task's episodes once.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.agents.env.scenarios import resolve_domain, scenario_named, world_named
from agentworld_tui.agents.env.twins import check_command, scenario_check
from agentworld_tui.agents.schedule import ScheduleError, parse_schedule
from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.fictional_world import FictionalWorld, WorldError, load_world_file
from agentworld_tui.world.prompts import load_scenarios

KEYS = (
    "id",
    "instruction",
    "domain",
    "scenario",
    "world",
    "schedule",
    "max_steps",
    "system",
    "check",
)
MAX_TASKS_BYTES = 64 << 20
MAX_STEPS = 10_000
SCENARIO_SUFFIXES = (".toml", ".json", ".txt")


class TasksError(Exception):
    """A tasks file that cannot be read at all; the message is one line."""


@dataclass(frozen=True)
class Task:
    key: str
    """The task's ``id``, or ``task-`` and a hash of its content: unique within the file,
    and the same wherever the task moves in it."""
    instruction: str
    domain: str
    scenario: str | None = None
    world: str | None = None
    schedule: dict[str, Any] = field(default_factory=dict)
    """The schedule as written in a file (``{"seed": 0, "rule": [...]}``); empty for none."""
    max_steps: int | None = None
    system: str = ""
    check: str = ""
    """Run in the episode's twin after it (exit 0 = success); "" for none."""
    where: str = ""
    """Where the task is written (``tasks.jsonl:3``): for messages, never for identity."""
    scenario_loaded: Scenario | None = field(default=None, compare=False, repr=False)
    """The scenario file the task names, read from the tasks file's folder."""
    world_loaded: FictionalWorld | None = field(default=None, compare=False, repr=False)
    """The world file the task names, likewise."""

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
        if self.check:
            data["check"] = self.check
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
    seen: dict[str, Task] = {}
    for where, entry in entries:
        if isinstance(entry, str):
            problems.append(f"{where}: {entry}")
            continue
        try:
            task = check_task(entry, where, folder=path.parent)
        except TasksError as exc:
            problems.append(f"{where}: {exc}")
            continue
        same = seen.get(task.key)
        if same is not None:
            problems.append(
                f"{where}: the id {task.key!r} is already used by another task"
                if "id" in entry
                else f"{where}: the same task as {same.where} (give it an id to play it "
                "again, or ask for more --episodes)"
            )
            continue
        seen[task.key] = task
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


def check_task(data: dict[str, Any], where: str, *, folder: Path | None = None) -> Task:
    """A task from its table, checked in full (domain, scenario, world and schedule are
    looked up); raises TasksError with what is wrong. Files are read from ``folder`` (the
    tasks file's) and nowhere else; without one a task names scenarios and worlds by name
    only."""
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise TasksError(f"unknown key {unknown[0]!r} (a task has {', '.join(KEYS)})")
    for name in KEYS:
        if name in data and not _encodable(data[name]):
            raise TasksError(
                f"the {name} holds a lone surrogate (a \\ud800-\\udfff escape that is no "
                "character): it cannot be sent or saved"
            )
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TasksError("the instruction is missing or empty")
    domain_name = data.get("domain")
    if not isinstance(domain_name, str) or not domain_name:
        raise TasksError("the domain is missing")
    for name in ("id", "scenario", "world", "system"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise TasksError(f"{name} must be text")
    steps = data.get("max_steps")
    if steps is not None and (
        isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS
    ):
        raise TasksError(f"max_steps must be a whole number from 1 to {MAX_STEPS}")
    try:
        domain = resolve_domain(domain_name)
        scenario = _scenario(domain, data.get("scenario"), folder)
        world = _world(data.get("world"), folder)
        schedule = parse_schedule(data.get("schedule") or None, domain.name)
        named = scenario or (
            scenario_named(domain, data["scenario"]) if data.get("scenario") else None
        )
        if named is not None:
            scenario_check(named, domain.name)
    except (EnvError, ScheduleError) as exc:
        raise TasksError(
            f"schedule: {exc}" if isinstance(exc, ScheduleError) else str(exc)
        ) from None
    check = ""
    if data.get("check") is not None:
        try:
            check = check_command(data["check"], domain.name)
        except EnvError as exc:
            raise TasksError(str(exc)) from None
    task = Task(
        key="",
        instruction=instruction.strip(),
        domain=domain.name,
        scenario=data.get("scenario"),
        world=data.get("world"),
        schedule=schedule.to_dict() if schedule else {},
        max_steps=steps,
        system=str(data.get("system") or ""),
        check=check,
        where=where,
        scenario_loaded=scenario,
        world_loaded=world,
    )
    key = data.get("id") or content_key(task)
    return replace(task, key=str(key))


def content_key(task: Task) -> str:
    """``task-`` and a hash of what the task asks (everything but its id): the same task
    has the same key wherever it is written, and a changed task is a new one."""
    content = task.to_dict()
    del content["id"]
    text = json.dumps(content, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return "task-" + hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def _encodable(value: object) -> bool:
    """Whether every text in ``value`` is real Unicode (JSON may hold lone surrogates)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_encodable(k) and _encodable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_encodable(item) for item in value)
    return True


def inside(folder: Path, written: str, what: str) -> Path:
    """The file ``written`` names relative to ``folder``; raises TasksError when it is
    absolute, leads out of the folder (through ``..`` or a link), or is not a file."""
    if Path(written).is_absolute() or Path(written).drive:
        raise TasksError(
            f"the {what} {written!r} is an absolute path: a tasks file names files "
            "relative to its own folder"
        )
    try:
        root = folder.resolve()
        target = (root / written).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise TasksError(f"the {what} {written!r} cannot be resolved ({exc})") from None
    if not target.is_relative_to(root):
        raise TasksError(
            f"the {what} {written!r} is outside the tasks file's folder: a tasks file "
            "names files in its own folder only"
        )
    if not target.is_file():
        raise TasksError(f"the {what} {written!r}: no such file in the tasks file's folder")
    return target


def _scenario(domain: Domain, written: Any, folder: Path | None) -> Scenario | None:
    """None for a scenario named (or none); the scenario a file in ``folder`` holds."""
    if written is None:
        return None
    found, _problems = load_scenarios(domain.name)
    if any(item.name == written for item in found):
        return None
    if folder is not None and (
        Path(written).suffix.lower() in SCENARIO_SUFFIXES or "/" in written or "\\" in written
    ):
        path = inside(folder, written, "scenario file")
        try:
            return load_scenario_file(path)
        except ScenarioFileError as exc:
            raise TasksError(f"the scenario file {written!r}: {exc}") from None
    scenario_named(domain, written)  # raises EnvError: no such name, and the names there are
    return None


def _world(written: Any, folder: Path | None) -> FictionalWorld | None:
    """None for a world named (or none); the world a ``.toml`` file in ``folder`` holds."""
    if written is None:
        return None
    if folder is not None and Path(written).suffix.lower() == ".toml":
        path = inside(folder, written, "world file")
        try:
            return load_world_file(path)
        except WorldError as exc:
            raise TasksError(f"the world file {written!r}: {exc}") from None
    world_named(written)  # raises EnvError: no such name, and the names there are
    return None
