"""The session file: every tab's session, with its branches, in one JSON file.

The app saves it after every finished or interrupted turn, through ``write_atomic``, so a
crash, a kill or a full disk leaves the previous version or the new one, never a mix. A file
is checked in full before anything is built from it: a damaged file, or one written by a
newer version, is refused with a message that says why, and is never written to.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from agentworld_tui import __version__
from agentworld_tui.world.domain import Domain
from agentworld_tui.world.json_input import JsonInputError, check_bounds, parse_json
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.session import Session, TurnStatus
from agentworld_tui.world.store import write_atomic

FILE_FORMAT = "agentworld-session"
SCHEMA_VERSION = 1
"""Raise when the layout changes in a way older versions cannot read."""
TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
STOPPED_NOTE = "the app stopped before this turn finished"
LATEST_TIME = 253402300799.0
"""The last second of the year 9999: a later time cannot be shown as a date."""

DomainLookup = Callable[[str], Domain]


class WorkspaceError(Exception):
    """A session file that cannot be read or written; the message is one line for the user."""


@dataclass
class Workspace:
    """All tabs of the app, in tab order, as one shareable file."""

    tabs: list[Session] = field(default_factory=list)
    name: str = ""
    active_tab: int = 0
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    ui: dict[str, Any] = field(default_factory=dict)
    """The app's own per-file settings (JSON-able), saved and loaded as they are."""
    path: Path | None = None
    """Where it was loaded from or last saved to."""

    def tab_for(self, domain: str) -> Session | None:
        """The first tab simulating ``domain``."""
        return next((s for s in self.tabs if s.domain.name == domain), None)

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.tabs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FILE_FORMAT,
            "schema": SCHEMA_VERSION,
            "app_version": __version__,
            "name": self.name,
            "created": self.created,
            "updated": self.updated,
            "active_tab": self.active_tab,
            "tabs": [s.to_dict() for s in self.tabs],
            "ui": self.ui,
        }

    def to_json(self) -> bytes:
        """The file's bytes; raises JsonInputError for content the loader would refuse."""
        data = self.to_dict()
        check_bounds(data)
        return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")

    def save(self, path: Path | None = None) -> Path:
        """Write the file atomically; on failure the previous file stays as it was."""
        target = path or self.path
        if target is None:
            raise WorkspaceError("no file to save to")
        self.updated = time.time()
        try:
            data = self.to_json()
            write_atomic(target, data)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise WorkspaceError(f"cannot save {target}: {reason}") from exc
        except (TypeError, ValueError) as exc:
            raise WorkspaceError(f"cannot save {target}: {exc}") from exc
        self.path = target
        return target


def load_workspace(path: Path, domains: DomainLookup | None = None) -> Workspace:
    """Read and check a session file; raises WorkspaceError and never writes to it."""
    where = _where(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise WorkspaceError(f"{where}: no such file") from None
    except OSError as exc:
        raise WorkspaceError(f"{where}: cannot read ({exc.strerror or exc})") from None
    workspace = workspace_from_json(raw, domains, where=where)
    workspace.path = path
    return workspace


def workspace_from_json(
    raw: bytes, domains: DomainLookup | None = None, where: str = "session file"
) -> Workspace:
    """Parse (within bounds) and check a session file's bytes; raises WorkspaceError."""
    try:
        data = parse_json(raw)
    except JsonInputError as exc:
        raise WorkspaceError(f"{where}: damaged ({exc})") from None
    try:
        return workspace_from_dict(data, domains, where=where)
    except WorkspaceError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        # The checks below are meant to catch every bad shape first; should one slip
        # through, the user still gets a message and the file is still left alone.
        raise WorkspaceError(f"{where}: damaged ({type(exc).__name__}: {exc})") from None


def open_or_new(path: Path, domains: DomainLookup | None = None) -> Workspace:
    """The workspace in ``path``, or a new empty one that will be saved there."""
    if not path.exists():
        return Workspace(name=path.stem, path=path)
    return load_workspace(path, domains)


def workspace_from_dict(
    data: Any, domains: DomainLookup | None = None, where: str = "session file"
) -> Workspace:
    """Check ``data`` in full, then build the workspace; raises WorkspaceError."""
    lookup = domains or _registered_domain
    check = _Checker(where)
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise WorkspaceError(f"{where}: not an agentworld session file")
    schema = data.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise WorkspaceError(f"{where}: damaged (schema must be a positive whole number)")
    if schema > SCHEMA_VERSION:
        saved_by = data.get("app_version")
        by = f" by agentworld {_one_line(saved_by)[:40]}" if isinstance(saved_by, str) else ""
        raise WorkspaceError(
            f"{where}: saved{by} in session format {schema}; this version "
            f"({__version__}) reads format {SCHEMA_VERSION} or older: upgrade agentworld to open it"
        )
    check.text(data, "name", optional=True)
    check.moment(data, "created", optional=True)
    check.moment(data, "updated", optional=True)
    check.whole(data, "active_tab", optional=True)
    check.mapping(data, "ui", optional=True)
    tabs = check.array(data, "tabs")
    sessions: list[Session] = []
    for i, tab in enumerate(tabs):
        check.session(tab, f"tabs[{i}]")
        name = tab["domain"]
        try:
            domain = lookup(name)
        except KeyError:
            raise WorkspaceError(
                f"{where}: tabs[{i}] simulates the domain {name!r}, which this version "
                "does not have"
            ) from None
        session = Session.from_dict(tab, domain)
        for turn in session.turns:
            if turn.status == "pending":  # saved while it ran: the process died mid-turn
                turn.status, turn.note = "interrupted", STOPPED_NOTE
            for attempt in turn.attempts:
                if attempt.get("status") == "pending":  # restoring it would look running
                    attempt["status"] = "interrupted"
        sessions.append(session)
    active = int(data.get("active_tab", 0))
    now = time.time()
    return Workspace(
        tabs=sessions,
        name=str(data.get("name", "")),
        active_tab=min(max(active, 0), max(len(sessions) - 1, 0)),
        created=float(data.get("created", now)),
        updated=float(data.get("updated", now)),
        ui=dict(data.get("ui", {})),
    )


def _registered_domain(name: str) -> Domain:
    from agentworld_tui.domains import get_domain

    return get_domain(name)


class _Checker:
    """Type checks with the path of the offending value in the message."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, expected: str, value: Any) -> WorkspaceError:
        got = "nothing" if value is _MISSING else type(value).__name__
        got = {"str": "text", "dict": "an object", "list": "a list", "NoneType": "null"}.get(
            got, got
        )
        return WorkspaceError(f"{self.where}: damaged ({path}: expected {expected}, got {got})")

    def _get(self, obj: dict[str, Any], key: str, optional: bool) -> Any:
        return obj.get(key, None if optional else _MISSING)

    def text(self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False) -> None:
        value = self._get(obj, key, optional)
        if not (isinstance(value, str) or (optional and value is None)):
            raise self.fail(_join(path, key), "text", value)

    def number(self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False) -> None:
        value = self._get(obj, key, optional)
        if optional and value is None:
            return
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise self.fail(_join(path, key), "a number", value)

    def moment(self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False) -> None:
        """A time in seconds since 1970 that can be shown as a date."""
        self.number(obj, key, path, optional)
        value = obj.get(key)
        if value is not None and not 0 <= value <= LATEST_TIME:
            raise WorkspaceError(
                f"{self.where}: damaged ({_join(path, key)}: {value:g} is not a time since 1970 "
                "before the year 10000)"
            )

    def flag(self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False) -> None:
        value = self._get(obj, key, optional)
        if not (isinstance(value, bool) or (optional and value is None)):
            raise self.fail(_join(path, key), "true or false", value)

    def whole(
        self,
        obj: dict[str, Any],
        key: str,
        path: str = "",
        optional: bool = False,
        minimum: int | None = None,
    ) -> None:
        value = self._get(obj, key, optional)
        if optional and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(_join(path, key), "a whole number", value)
        if minimum is not None and value < minimum:
            raise WorkspaceError(
                f"{self.where}: damaged ({_join(path, key)}: {value} is below {minimum})"
            )

    def mapping(
        self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False
    ) -> dict[str, Any]:
        value = self._get(obj, key, optional)
        if optional and value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(_join(path, key), "an object", value)
        return value

    def array(
        self, obj: dict[str, Any], key: str, path: str = "", optional: bool = False
    ) -> list[Any]:
        value = self._get(obj, key, optional)
        if optional and value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(_join(path, key), "a list", value)
        return value

    def session(self, tab: Any, path: str) -> None:
        if not isinstance(tab, dict):
            raise self.fail(path, "an object", tab)
        self.text(tab, "domain", path)
        self.text(tab, "id", path, optional=True)
        self.moment(tab, "created", path, optional=True)
        self.text(tab, "system_prompt", path)
        scenario = self.mapping(tab, "scenario", path)
        for key in ("name", "title", "description", "state"):
            self.text(scenario, key, f"{path}.scenario", optional=True)
        self.mapping(scenario, "extras", f"{path}.scenario", optional=True)
        self.control(tab, path)
        if tab.get("world") is not None:
            from agentworld_tui.world.fictional_world import WorldError, world_from_dict

            try:
                world_from_dict(tab["world"])
            except WorldError as exc:
                raise WorkspaceError(f"{self.where}: damaged ({path}.world: {exc})") from None
        self.turns(self.array(tab, "turns", path, optional=True), f"{path}.turns")
        self.whole(tab, "branch", path, optional=True)
        shown = tab.get("branch", 1)
        ids: set[int] = set()
        for i, branch in enumerate(self.array(tab, "branches", path, optional=True)):
            where = f"{path}.branches[{i}]"
            if not isinstance(branch, dict):
                raise self.fail(where, "an object", branch)
            self.whole(branch, "id", where)
            if branch["id"] in ids:
                raise WorkspaceError(f"{self.where}: damaged ({where}: branch id used twice)")
            ids.add(branch["id"])
            if branch.get("parent") is not None:
                self.whole(branch, "parent", where)
            self.whole(branch, "fork_turn", where, optional=True)
            self.moment(branch, "created", where, optional=True)
            if branch["id"] != shown:
                self.turns(self.array(branch, "turns", where), f"{where}.turns")

    def turns(self, turns: list[Any], path: str) -> None:
        for i, turn in enumerate(turns):
            where = f"{path}[{i}]"
            if not isinstance(turn, dict):
                raise self.fail(where, "an object", turn)
            self.whole(turn, "number", where, minimum=1)
            if turn["number"] != i + 1:
                raise WorkspaceError(
                    f"{self.where}: damaged ({where}.number is {turn['number']}, expected {i + 1})"
                )
            action = self.mapping(turn, "action", where)
            self.text(action, "domain", f"{where}.action")
            if "payload" not in action:
                raise self.fail(f"{where}.action.payload", "a value", _MISSING)
            self.text(action, "label", f"{where}.action", optional=True)
            self.payload(action["payload"], f"{where}.action.payload")
            self.text(turn, "user_message", where)
            for key in ("state", "observation", "reasoning", "note", "raw", "extraction"):
                self.text(turn, key, where, optional=True)
            self.status(turn, where)
            self.stats(turn, where)
            self.whole(turn, "omitted_turns", where, optional=True, minimum=0)
            self.text(turn, "control", where, optional=True)
            self.judgement(turn, where)
            for j, attempt in enumerate(self.array(turn, "attempts", where, optional=True)):
                self.attempt(attempt, f"{where}.attempts[{j}]")

    def status(self, obj: dict[str, Any], path: str) -> None:
        status = obj.get("status", "complete")
        if not isinstance(status, str) or status not in TURN_STATUSES:
            shown = repr(status)[:60] if isinstance(status, str) else type(status).__name__
            raise WorkspaceError(
                f"{self.where}: damaged ({path}.status: {shown} is not one of "
                f"{', '.join(TURN_STATUSES)})"
            )

    def stats(self, obj: dict[str, Any], path: str) -> None:
        """A turn's figures: those the app formats are numbers, the judge's reference is
        text; figures this version does not know are kept as they are."""
        stats = self.mapping(obj, "stats", path, optional=True)
        where = f"{path}.stats"
        for key in stats:
            if key in _STATS_NUMBERS:
                self.number(stats, key, where)
            elif key in _STATS_TEXTS:
                self.text(stats, key, where)

    def attempt(self, attempt: Any, path: str) -> None:
        """An earlier answer to a turn's action; restoring it reads every field below."""
        if not isinstance(attempt, dict):
            raise self.fail(path, "an object", attempt)
        for key in ("observation", "reasoning", "note", "raw", "extraction"):
            self.text(attempt, key, path, optional=True)
        self.status(attempt, path)
        self.stats(attempt, path)

    def judgement(self, turn: dict[str, Any], path: str) -> None:
        """A verdict as ``judge.Verdict.to_dict`` writes it; the app draws its scores."""
        verdict = turn.get("judgement")
        if verdict is None:
            return
        where = f"{path}.judgement"
        if not isinstance(verdict, dict):
            raise self.fail(where, "an object", verdict)
        for key in ("error", "judge", "reference", "answer"):
            self.text(verdict, key, where, optional=True)
        self.flag(verdict, "engine_failed", where, optional=True)
        self.stats(verdict, where)
        found = verdict.get("judgement")
        if found is None:
            return
        inner = f"{where}.judgement"
        if not isinstance(found, dict):
            raise self.fail(inner, "an object", found)
        from agentworld_tui.world.judge import DIMENSIONS

        scores = self.mapping(found, "scores", inner)
        for dimension in DIMENSIONS:
            self.number(scores, dimension, f"{inner}.scores")
        self.number(found, "total", inner)
        self.number(found, "normalised", inner)
        self.text(found, "note", inner, optional=True)
        for key in ("strengths", "weaknesses"):
            for k, item in enumerate(self.array(found, key, inner, optional=True)):
                if not isinstance(item, str):
                    raise self.fail(f"{inner}.{key}[{k}]", "text", item)

    def control(self, tab: dict[str, Any], path: str) -> None:
        """The control instruction for a tab's next turn, checked as the app checks one."""
        control = self.mapping(tab, "control", path, optional=True)
        if not control:
            return
        where = f"{path}.control"
        self.text(control, "text", where)
        self.flag(control, "persistent", where, optional=True)
        self.text(control, "preset", where, optional=True)
        from agentworld_tui.world.perturbation import ControlError, control_instruction

        try:
            control_instruction(control["text"])
        except ControlError as exc:
            raise WorkspaceError(f"{self.where}: damaged ({where}: {exc})") from None

    def payload(self, payload: Any, path: str) -> None:
        """A tool call's payload ({"name", "arguments"}, as MCP, Search, SWE and Web write
        it) has a text name and an object of arguments, which the panes read as such."""
        if not isinstance(payload, dict):
            return
        if "name" in payload:
            self.text(payload, "name", path)
        if "arguments" in payload:
            self.mapping(payload, "arguments", path)


_STATS_NUMBERS = frozenset(
    {
        "prompt_tokens",
        "evaluated_prompt_tokens",
        "generated_tokens",
        "reasoning_tokens",
        "time_to_first_token",
        "tokens_per_second",
        "elapsed",
        "n_ctx",
    }
)
"""``GenerationStats``' numbers, formatted by the app wherever a turn's cost is shown."""
_STATS_TEXTS = frozenset({"stop_reason", "reference"})

_MISSING: Any = object()


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _one_line(text: str) -> str:
    return " ".join(sanitize(text).split())


def _where(path: Path) -> str:
    """A path as messages show it: one line, nothing a terminal would act on."""
    return _one_line(str(path)) or "session file"
