"""Which calls reach reality: routing rules, and one consistent world for the agent.

A rule file (TOML) says, per tool name pattern or per the tool's MCP annotations, whether
a call goes ``real`` (the real server answers), ``sim`` (the world model answers; nothing
reaches the real server) or ``shadow`` (both run; the agent gets the real answer and the
world model's is kept beside it). The first rule that matches decides; a call no rule
matches takes the file's ``default`` (``sim`` unless the file says otherwise).

Annotations are hints a server gives, not guarantees, and a tool may give none. A hint
that is absent (or not a boolean) takes the MCP specification's default, which is also the
cautious value: ``readOnlyHint`` false, ``destructiveHint`` true, ``idempotentHint`` false,
``openWorldHint`` true. So a rule written for read-only tools never matches a tool that did
not say it is one.

Consistency: once a call was simulated that may have changed state (routed ``sim``, its
tool not read-only), the real server no longer holds the world the agent was told about.
Every later call that could observe that state is answered by the world model, whatever
its rule said, so no real read contradicts a simulated write. Which tools could observe it
is the matching rule's ``affects`` (glob patterns); by default every tool of the same
server. The ``Router`` keeps that state for one session, and each ``Decision`` says where a
call was answered and why, for the turn's record.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agentworld_tui.world.folders import shipped
from agentworld_tui.world.sanitize import sanitize

RULES_FILE = "routing.toml"
"""The shipped default rule set, in ``prompts/mcp/``."""
MAX_RULES_BYTES = 1_000_000
MAX_RULES = 1000
MAX_PATTERN_CHARS = 500


class Route(StrEnum):
    """Where a call goes."""

    REAL = "real"
    SIM = "sim"
    SHADOW = "shadow"


Fallback = Literal["sim", "fail"]
"""What a call routed to reality does when reality cannot answer (the server is gone, it
timed out): ``sim`` answers it by the world model and says so on the turn, ``fail`` gives
the agent the failure."""

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
HINT_DEFAULTS: dict[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
"""The MCP specification's value of each hint when a tool does not give it."""
ABSENT = "absent"
"""A condition on a hint that matches only a tool that did not give it."""


class RuleFileError(ValueError):
    """A rule file that cannot be used. ``problems`` holds every problem found, each as
    ``(line, text)`` (line 0: not tied to a line); the message is the first, with the file
    and line, and how many more there are."""

    def __init__(self, where: str, problems: list[tuple[int, str]]) -> None:
        self.where = where
        self.problems = problems
        line, text = problems[0]
        at = f"{where}:{line}" if line else where
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(f"{at}: {text}{more}")


# -- a tool as the router sees it -----------------------------------------------------------
@dataclass(frozen=True)
class ToolHints:
    """A tool's MCP annotations as its server gave them; None where a hint is absent."""

    given: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def from_annotations(cls, annotations: object) -> ToolHints:
        """From a tool definition's ``annotations`` object; anything that is not a boolean
        counts as absent (a server's hints are not trusted to be well formed)."""
        if not isinstance(annotations, Mapping):
            return cls()
        return cls(
            tuple((h, annotations[h]) for h in HINTS if isinstance(annotations.get(h), bool))
        )

    @classmethod
    def of(
        cls,
        *,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
    ) -> ToolHints:
        values = (read_only, destructive, idempotent, open_world)
        return cls(tuple((h, v) for h, v in zip(HINTS, values, strict=True) if v is not None))

    def get(self, hint: str) -> bool | None:
        """The hint as given, or None."""
        return next((v for h, v in self.given if h == hint), None)

    def value(self, hint: str) -> bool:
        """The hint as given, else the specification's default."""
        given = self.get(hint)
        return HINT_DEFAULTS[hint] if given is None else given

    @property
    def annotated(self) -> bool:
        return bool(self.given)

    @property
    def read_only(self) -> bool:
        return self.value("readOnlyHint")

    def to_dict(self) -> dict[str, bool]:
        return dict(self.given)


@dataclass(frozen=True)
class ToolInfo:
    """A tool: its name, its hints, and the server it belongs to ("" for the one server)."""

    name: str
    hints: ToolHints = field(default_factory=ToolHints)
    server: str = ""

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any], server: str = "") -> ToolInfo:
        """From a tool definition in the MCP spelling (``name``, ``annotations``), as
        ``tools/list`` gives it and captured tool lists keep it."""
        name = definition.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a tool definition needs a name")
        return cls(name.strip(), ToolHints.from_annotations(definition.get("annotations")), server)


# -- the rule file ----------------------------------------------------------------------------
def _patterns(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ValueError('must be a pattern or a list of patterns, such as "read_*"')
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError("must not hold an empty pattern")
        if len(item) > MAX_PATTERN_CHARS:
            raise ValueError(f"must hold patterns of at most {MAX_PATTERN_CHARS} characters")
    return tuple(items)


def _optional_patterns(value: Any) -> tuple[str, ...] | None:
    return None if value is None else _patterns(value)


def _affects(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and not value:
        return ()
    return _optional_patterns(value)


def _hint(value: Any) -> bool | str | None:
    if value is None or isinstance(value, bool) or value == ABSENT:
        return value  # type: ignore[no-any-return]
    raise ValueError(f'must be true, false or "{ABSENT}"')


def _flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError("must be true or false")


def _text(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise ValueError("must be a text of at most 200 characters")
    return value


def _choice(*options: str, optional: bool = False) -> Any:
    def check(value: Any) -> str | None:
        if (optional and value is None) or (isinstance(value, str) and value in options):
            return value
        raise ValueError(f"must be one of {', '.join(options)}")

    return BeforeValidator(check)


def _version(value: Any) -> int:
    if value == 1 and not isinstance(value, bool):
        return 1
    raise ValueError("must be 1, the version of rule files this program reads")


def _rules(value: Any) -> Any:
    if not isinstance(value, list):
        raise ValueError("must be written as [[rule]] tables")
    if len(value) > MAX_RULES:
        raise ValueError(f"must be at most {MAX_RULES:,} rules, not {len(value):,}")
    return value


_Patterns = Annotated[tuple[str, ...] | None, BeforeValidator(_optional_patterns)]
_Hint = Annotated[bool | str | None, BeforeValidator(_hint)]
_Route = Annotated[str, _choice(*Route)]
_Fallback = Annotated[str, _choice("sim", "fail")]


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, BeforeValidator(_text)] = ""
    tool: _Patterns = None
    server: _Patterns = None
    read_only: _Hint = Field(None, alias="readOnlyHint")
    destructive: _Hint = Field(None, alias="destructiveHint")
    idempotent: _Hint = Field(None, alias="idempotentHint")
    open_world: _Hint = Field(None, alias="openWorldHint")
    annotated: Annotated[bool | None, BeforeValidator(_flag)] = None
    route: _Route
    affects: Annotated[tuple[str, ...] | None, BeforeValidator(_affects)] = None
    on_failure: Annotated[str | None, _choice("sim", "fail", optional=True)] = None


class _FileModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Annotated[int, BeforeValidator(_version)] = 1
    default: _Route = "sim"
    on_failure: _Fallback = "sim"
    rule: Annotated[list[_RuleModel], BeforeValidator(_rules)] = Field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    """One rule: conditions (all must hold) and where a matching call goes."""

    number: int
    """1-based position in the file: the first rule that matches decides."""
    route: Route
    name: str = ""
    tools: tuple[str, ...] = ()
    """Glob patterns on the tool's name (case-sensitive); empty: any tool."""
    servers: tuple[str, ...] = ()
    hints: tuple[tuple[str, bool | None], ...] = ()
    """Conditions on hints: (hint, True/False) compares the hint's value, the
    specification's default where absent; (hint, None) matches only an absent hint."""
    annotated: bool | None = None
    """True: the tool gave at least one hint; False: it gave none."""
    affects: tuple[str, ...] | None = None
    """When a call this rule matched is simulated and may change state: the patterns of
    the tools (of the same server) that could observe the change. None: all of them."""
    on_failure: Fallback = "sim"
    line: int = 0

    def matches(self, tool: ToolInfo) -> bool:
        if self.tools and not any(_glob(p).match(tool.name) for p in self.tools):
            return False
        if self.servers and not any(_glob(p).match(tool.server) for p in self.servers):
            return False
        if self.annotated is not None and tool.hints.annotated != self.annotated:
            return False
        for hint, wanted in self.hints:
            if wanted is None:
                if tool.hints.get(hint) is not None:
                    return False
            elif tool.hints.value(hint) != wanted:
                return False
        return True

    def reason(self, tool: ToolInfo) -> str:
        """``rule 3 (reads): readOnlyHint=true``: what made it match."""
        said: list[str] = []
        if self.tools:
            said.append(f"tool {tool.name} matches {' or '.join(self.tools)}")
        if self.servers:
            said.append(f"server {tool.server or '(unnamed)'}")
        if self.annotated is not None:
            said.append("annotated" if self.annotated else "no annotations")
        for hint, wanted in self.hints:
            if wanted is None:
                said.append(f"no {hint}")
            else:
                given = tool.hints.get(hint)
                default = " (absent: the MCP default)" if given is None else ""
                said.append(f"{hint}={str(wanted).lower()}{default}")
        title = f"rule {self.number}" + (f" ({self.name})" if self.name else "")
        return f"{title}: {', '.join(said) or 'any tool'}"


@dataclass(frozen=True)
class RuleSet:
    """A parsed rule file."""

    rules: tuple[Rule, ...]
    default: Route = Route.SIM
    on_failure: Fallback = "sim"
    source: str = ""
    """Where the rules came from, for messages."""

    def match(self, tool: ToolInfo) -> Rule | None:
        return next((r for r in self.rules if r.matches(tool)), None)


def parse_rules(text: str, where: str = "rules") -> RuleSet:
    """Rules from a rule file's text; raises RuleFileError with the line and the problem."""
    if len(text) > MAX_RULES_BYTES:
        raise RuleFileError(where, [(0, f"{len(text):,} characters (at most {MAX_RULES_BYTES:,})")])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(where, [_toml_problem(str(exc))]) from None
    lines = _Lines(text)
    try:
        model = _FileModel.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(error, lines) for error in exc.errors()]
        problems.sort(key=lambda p: (p[0] == 0, p[0]))
        raise RuleFileError(where, problems) from None
    rules = tuple(
        Rule(
            number=i,
            route=Route(r.route),
            name=r.name,
            tools=r.tool or (),
            servers=r.server or (),
            hints=tuple(
                (hint, None if wanted == ABSENT else bool(wanted))
                for hint, wanted in zip(
                    HINTS, (r.read_only, r.destructive, r.idempotent, r.open_world), strict=True
                )
                if wanted is not None
            ),
            annotated=r.annotated,
            affects=r.affects,
            on_failure=_fallback(r.on_failure or model.on_failure),
            line=lines.table(i),
        )
        for i, r in enumerate(model.rule, 1)
    )
    return RuleSet(rules, Route(model.default), _fallback(model.on_failure), where)


def load_rules(path: Path) -> RuleSet:
    """Rules from a file; raises RuleFileError (a missing or unreadable file included)."""
    where = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_RULES_BYTES + 1)
    except OSError as exc:
        raise RuleFileError(where, [(0, f"cannot read ({exc.strerror or exc})")]) from None
    if len(raw) > MAX_RULES_BYTES:
        raise RuleFileError(where, [(0, f"larger than {MAX_RULES_BYTES:,} bytes")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RuleFileError(where, [(line, "not UTF-8 text")]) from None
    return parse_rules(text, where)


def default_rules() -> RuleSet:
    """The shipped rule set (``prompts/mcp/routing.toml``): reads real, everything else
    simulated."""
    text = shipped("prompts").joinpath("mcp", RULES_FILE).read_text(encoding="utf-8")
    return parse_rules(text, f"shipped:mcp/{RULES_FILE}")


SHIPPED_RULES = "default"
"""The name that picks the shipped rule set where a rule file's path is asked for."""


def rules_named(wanted: str) -> RuleSet:
    """The rules a front-end's choice names: ``"default"`` (the shipped set) or a rule
    file's path (``~`` expanded); raises RuleFileError, for an empty choice too."""
    wanted = wanted.strip()
    if not wanted:
        raise RuleFileError("rules", [(0, f"empty: give a rule file, or {SHIPPED_RULES!r}")])
    if wanted == SHIPPED_RULES:
        return default_rules()
    return load_rules(Path(wanted).expanduser())


def _fallback(value: str) -> Fallback:
    return "fail" if value == "fail" else "sim"


_GLOBS: dict[str, re.Pattern[str]] = {}


def _glob(pattern: str) -> re.Pattern[str]:
    compiled = _GLOBS.get(pattern)
    if compiled is None:
        if len(_GLOBS) > 4096:
            _GLOBS.clear()
        compiled = _GLOBS[pattern] = re.compile(fnmatch.translate(pattern), re.DOTALL)
    return compiled


_TOML_AT = re.compile(r"\s*\(at line (\d+), column \d+\)\s*$")


def _toml_problem(message: str) -> tuple[int, str]:
    found = _TOML_AT.search(message)
    if found is None:
        return 0, f"not valid TOML: {message}"
    return int(found.group(1)), f"not valid TOML: {message[: found.start()]}"


def _problem(error: Any, lines: _Lines) -> tuple[int, str]:
    loc = list(error["loc"])
    rule: int | None = None
    key = ""
    if len(loc) >= 2 and loc[0] == "rule" and isinstance(loc[1], int):
        rule, rest = loc[1] + 1, loc[2:]
        key = str(rest[0]) if rest else ""
    elif loc:
        key = str(loc[0])
    kind = error["type"]
    if kind == "extra_forbidden":
        model = _RuleModel if rule is not None else _FileModel
        known = sorted(f.alias or n for n, f in model.model_fields.items())
        text = f"unknown key {_shown(key)} (known: {', '.join(known)})"
    elif kind == "missing":
        text = f"{key} is missing"
    else:
        message = str(error["msg"]).removeprefix("Value error, ")
        text = f"{key} {message}" if key else message
        if "input" in error and kind != "missing":
            text += f" (got {_shown(error['input'])})"
    if rule is not None:
        line = lines.key(rule, key) if kind not in ("missing",) else lines.table(rule)
        return line, f"rule {rule}: {text}"
    return lines.top(key), text


def _shown(value: Any) -> str:
    text = sanitize(repr(value))
    return text if len(text) <= 60 else text[:59] + "…"


_HEADER = re.compile(r"^\s*\[\[\s*rule\s*\]\]\s*(?:#.*)?$")
_TABLE = re.compile(r"^\s*\[")


class _Lines:
    """Where the rule tables and their keys are in the file's text (tomllib keeps no
    positions), so a problem found after parsing is still reported with its line."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [i for i, line in enumerate(self.lines, 1) if _HEADER.match(line)]
        self.first_table = next(
            (i for i, line in enumerate(self.lines, 1) if _TABLE.match(line)), len(self.lines) + 1
        )

    def table(self, rule: int) -> int:
        return self.headers[rule - 1] if 0 < rule <= len(self.headers) else 0

    def key(self, rule: int, key: str) -> int:
        start = self.table(rule)
        if not start:
            return 0
        end = next(
            (i for i in range(start + 1, len(self.lines) + 1) if _TABLE.match(self.lines[i - 1])),
            len(self.lines) + 1,
        )
        return self._find(key, start + 1, end) or start

    def top(self, key: str) -> int:
        """A top-level key's line, or the header of a table of that name."""
        if not key:
            return 0
        table = re.compile(rf"^\s*\[{{1,2}}\s*{re.escape(key)}\s*\]")
        found = self._find(key, 1, self.first_table)
        return found or next((i for i, t in enumerate(self.lines, 1) if table.match(t)), 0)

    def _find(self, key: str, start: int, end: int) -> int:
        if not key:
            return 0
        pattern = re.compile(
            rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*="
        )
        return next((i for i in range(start, end) if pattern.match(self.lines[i - 1])), 0)


# -- the router -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """A simulated call that may have changed state the real server does not have."""

    tool: str
    turn: int
    server: str = ""
    affects: tuple[str, ...] | None = None
    """Patterns of the tools that could observe it; None: every tool of the server."""

    def observed_by(self, tool: ToolInfo) -> bool:
        if tool.server != self.server:
            return False
        if self.affects is None:
            return True
        return any(_glob(p).match(tool.name) for p in self.affects)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "turn": self.turn,
            "server": self.server,
            "affects": None if self.affects is None else list(self.affects),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        affects = data.get("affects")
        return cls(
            tool=str(data.get("tool", "")),
            turn=_whole(data.get("turn")),
            server=str(data.get("server") or ""),
            affects=None
            if not isinstance(affects, list)
            else tuple(str(p) for p in affects if isinstance(p, str)),
        )


@dataclass(frozen=True)
class Decision:
    """Where one call was answered, and why: what a turn records."""

    tool: str
    turn: int
    route: Route
    """Where the call goes: ``real`` and ``shadow`` reach the real server, ``sim`` never."""
    ruled: Route
    """What the rules said, before consistency (and a fallback) had their say."""
    rule: int
    """The rule that matched (1-based); 0: none did, the file's default applied."""
    reason: str
    server: str = ""
    on_failure: Fallback = "sim"
    changes_state: bool = False
    """A simulated call of a tool that is not read-only: later calls it affects are
    simulated too."""
    affects: tuple[str, ...] | None = None
    forced_by: Change | None = None
    """The simulated change that kept this call from reality."""
    fallback: str = ""
    """Why reality did not answer a call routed to it, so the world model did."""

    @property
    def reaches_reality(self) -> bool:
        return self.route is not Route.SIM

    @property
    def answered(self) -> Literal["real", "sim", "both"]:
        """Where the answer came from: ``both`` for shadow (the agent gets the real one)."""
        if self.route is Route.SHADOW:
            return "both"
        return "real" if self.route is Route.REAL else "sim"

    @property
    def delivered(self) -> Literal["real", "sim"]:
        """The side whose answer the agent receives."""
        return "sim" if self.route is Route.SIM else "real"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool": self.tool,
            "turn": self.turn,
            "route": self.route.value,
            "ruled": self.ruled.value,
            "rule": self.rule,
            "reason": self.reason,
            "answered": self.answered,
            "on_failure": self.on_failure,
        }
        if self.server:
            data["server"] = self.server
        if self.changes_state:
            data["changes_state"] = True
            data["affects"] = None if self.affects is None else list(self.affects)
        if self.forced_by is not None:
            data["forced_by"] = self.forced_by.to_dict()
        if self.fallback:
            data["fallback"] = self.fallback
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """A recorded decision (from a session file: anything odd becomes the cautious
        reading, never an exception for a mapping)."""
        route, ruled = _route(data.get("route")), _route(data.get("ruled"))
        affects = data.get("affects")
        forced = data.get("forced_by")
        return cls(
            tool=str(data.get("tool", "")),
            turn=_whole(data.get("turn")),
            route=route,
            ruled=ruled,
            rule=_whole(data.get("rule")),
            reason=str(data.get("reason", "")),
            server=str(data.get("server") or ""),
            on_failure=_fallback(str(data.get("on_failure", "sim"))),
            changes_state=data.get("changes_state") is True,
            affects=None
            if not isinstance(affects, list)
            else tuple(str(p) for p in affects if isinstance(p, str)),
            forced_by=Change.from_dict(forced) if isinstance(forced, Mapping) else None,
            fallback=str(data.get("fallback") or ""),
        )

    def change(self) -> Change | None:
        """The change this call made to the simulated world, if it may have made one."""
        if not self.changes_state:
            return None
        return Change(self.tool, self.turn, self.server, self.affects)


def _may_change(tool: ToolInfo, affects: tuple[str, ...] | None) -> bool:
    """Whether simulating a call of ``tool`` may change what later calls observe."""
    return not tool.hints.read_only and affects != ()


def _route(value: Any) -> Route:
    return Route(value) if value in tuple(Route) else Route.SIM


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class Router:
    """Decides each call of one session, and remembers what the session's simulated calls
    may have changed. Not thread-safe: one session's calls are decided in order."""

    def __init__(self, rules: RuleSet, tools: Iterable[ToolInfo] = ()) -> None:
        self.rules = rules
        self._tools = {(t.server, t.name): t for t in tools}
        self._changes: list[Change] = []

    @property
    def changes(self) -> tuple[Change, ...]:
        """The simulated changes so far, oldest first (one per tool and scope)."""
        return tuple(self._changes)

    def tool(self, name: str, server: str = "") -> ToolInfo:
        """The tool as the server listed it; an unknown tool has no hints."""
        return self._tools.get((server, name)) or ToolInfo(name, ToolHints(), server)

    def decide(self, tool: ToolInfo | str, *, turn: int) -> Decision:
        """Where the call of ``tool`` at ``turn`` goes, and why. A decision to simulate a
        call that may change state is remembered at once (cautiously: even if its answer
        then fails, the agent may believe it happened)."""
        info = self.tool(tool) if isinstance(tool, str) else tool
        rule = self.rules.match(info)
        if rule is None:
            ruled = self.rules.default
            reason = f"no rule matched: the default, {ruled.value}"
            number, affects, on_failure = 0, None, self.rules.on_failure
        else:
            ruled, reason = rule.route, rule.reason(info)
            number, affects, on_failure = rule.number, rule.affects, rule.on_failure
        route, forced = ruled, None
        if ruled is not Route.SIM:
            forced = next((c for c in self._changes if c.observed_by(info)), None)
            if forced is not None:
                route = Route.SIM
                reason = (
                    f"sim: {forced.tool} was simulated at turn {forced.turn}, "
                    f"{info.name} may observe it ({ruled.value} by {reason})"
                )
        decision = Decision(
            tool=info.name,
            turn=turn,
            route=route,
            ruled=ruled,
            rule=number,
            reason=reason,
            server=info.server,
            on_failure=on_failure,
            changes_state=route is Route.SIM and _may_change(info, affects),
            affects=affects,
            forced_by=forced,
        )
        self._remember(decision)
        return decision

    def fall_back(self, decision: Decision, why: str) -> Decision | None:
        """Reality could not answer ``decision``'s call (``why``: one line). With the rule's
        ``on_failure = "sim"`` the call is answered by the world model: the decision for
        that, remembered like any simulated call. With ``"fail"``: None, and the caller
        gives the agent the failure."""
        if decision.route is Route.SIM or decision.on_failure == "fail":
            return None
        info = self.tool(decision.tool, decision.server)
        fallen = replace(
            decision,
            route=Route.SIM,
            reason=f"sim: reality failed ({why}); {decision.reason}",
            changes_state=_may_change(info, decision.affects),
            fallback=why,
        )
        self._remember(fallen)
        return fallen

    def restore(self, decisions: Iterable[Decision]) -> None:
        """Take up a session from its recorded decisions (a session reopened, a branch
        switched to): the changes they made, and nothing else, are remembered."""
        self._changes = []
        for decision in decisions:
            self._remember(decision)

    def _remember(self, decision: Decision) -> None:
        change = decision.change()
        if change is None:
            return
        same = (change.tool, change.server, change.affects)
        if not any((c.tool, c.server, c.affects) == same for c in self._changes):
            self._changes.append(change)
