"""An environment's steps routed between the world model and its episode's twin, and the
world model grounded in recorded reality: what ``mcp serve`` does for a server's calls
(``simulator.routing``), for every episode of an environment (docs/reality.md).

An environment given ``routes`` (a rule file, ``"default"`` for the shipped rules, or a
``RuleSet``) sends each step where the rules say: ``real`` (its episode's twin answers
alone), ``sim`` (the world model answers; nothing reaches the twin) or ``shadow`` (both).
The rules read the MCP annotations of the scenario's tool definitions, and keep one
consistent world: after a simulated write, what could observe it is simulated too. One
given ``traces`` (a trace store, or its path) shows the world model the most similar
earlier real answers before it answers a step, and adds its twin's answers to the store.
Without rules, a twin shadows every step as it always did.

``EpisodeRouting`` is what an environment, its forks and a pool's environments share; at
each reset it opens a ``RoutedSession`` for the new episode, beside that episode's twin.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.agents.env.twins import EpisodeTwin
from agentworld_tui.domains.json_schema import read_json
from agentworld_tui.reality.grounding import DEFAULT_BUDGET, Grounder, Grounding
from agentworld_tui.reality.routing import (
    RuleFileError,
    RuleSet,
    ToolInfo,
    default_rules,
    load_rules,
)
from agentworld_tui.reality.traces import Exchange, TraceStore, TraceStoreError, open_store
from agentworld_tui.simulator.routing import Reality, RoutedSession
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session

__all__ = [
    "MAX_BUDGET",
    "MIN_BUDGET",
    "SHIPPED_RULES",
    "EpisodeRouting",
    "Grounded",
    "Kept",
    "RoutesInput",
    "TracesInput",
    "keep_later",
    "scenario_tool_infos",
]

log = logging.getLogger("agentworld.env")

SHIPPED_RULES = "default"
"""``routes="default"``: the shipped rule set (reads real, everything else simulated)."""
MIN_BUDGET = 100
MAX_BUDGET = 200_000
"""The grounding budget's bounds, in tokens (the command line's ``--grounding-budget``)."""

RoutesInput = RuleSet | str | Path
TracesInput = TraceStore | str | Path


class EpisodeRouting:
    """The rules and the trace store of an environment's episodes, shared by the
    environment, its forks and a pool's environments. A store opened here from a path is
    closed with the last of them; one given as a ``TraceStore`` is its giver's."""

    def __init__(
        self,
        rules: RuleSet | None,
        store: TraceStore | None,
        *,
        budget: int = DEFAULT_BUDGET,
        owned: bool = False,
    ) -> None:
        self.rules = rules
        self.store = store
        self.grounder = Grounder(store, budget=budget) if store is not None else None
        self.keep_in = store if store is not None and store.writable else None
        """Where the twin's answers are kept (None: no store, or one this user cannot
        write: it grounds and keeps nothing)."""
        self._owned = owned
        self._users = 1
        self._lock = threading.Lock()

    @classmethod
    def of(
        cls,
        routes: RoutesInput | None,
        traces: TracesInput | None,
        grounding_budget: int | None,
        *,
        twinned: bool,
    ) -> EpisodeRouting | None:
        """The routing an environment's arguments ask for (None: neither rules nor a
        store); an EnvError of one line for any mistake (a rule file's with its line)."""
        if routes is not None and not twinned:
            raise EnvError(
                "routes go with a twin: the calls they send to reality need one "
                "(give twin=TwinSpec(...))"
            )
        if grounding_budget is not None:
            if traces is None:
                raise EnvError("grounding_budget goes with traces (a trace store)")
            if isinstance(grounding_budget, bool) or not isinstance(grounding_budget, int):
                raise EnvError("grounding_budget must be a whole number of tokens")
            if not MIN_BUDGET <= grounding_budget <= MAX_BUDGET:
                raise EnvError(
                    f"grounding_budget must be from {MIN_BUDGET} to {MAX_BUDGET:,} tokens"
                )
        rules = _rules(routes)
        if rules is None and traces is None:
            return None
        store, owned = _store(traces)
        return cls(rules, store, budget=grounding_budget or DEFAULT_BUDGET, owned=owned)

    @property
    def source(self) -> str:
        """Where the rules came from ("" without rules)."""
        return self.rules.source if self.rules is not None else ""

    def join(self) -> EpisodeRouting:
        with self._lock:
            self._users += 1
        return self

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last and self._owned and self.store is not None:
            self.store.close()

    def open(self, session: Session, scenario: Scenario, twin: EpisodeTwin | None) -> RoutedSession:
        """The routing of one episode: beside its twin (the rules apply only there; without
        one every step is simulated, grounded where there is a store)."""
        shadow = twin.shadow if twin is not None else None
        reality = Reality(
            runner=shadow.runner if shadow is not None else None,
            spec=shadow.spec if shadow is not None else None,
            deliver=shadow.deliver if shadow is not None else "real",
            rules=self.rules if shadow is not None else None,
            tools=scenario_tool_infos(scenario),
            grounder=self.grounder,
            keep_in=self.keep_in,
            first=shadow.first if shadow is not None else None,
        )
        return reality.open(session)


def _rules(routes: RoutesInput | None) -> RuleSet | None:
    if routes is None or isinstance(routes, RuleSet):
        return routes
    if not isinstance(routes, str | Path):
        raise EnvError(
            f"routes is a rule file, {SHIPPED_RULES!r} or a RuleSet; got {type(routes).__name__}"
        )
    try:
        if isinstance(routes, str):
            wanted = routes.strip()
            if not wanted:
                raise EnvError(f"routes is empty: give a rule file, or {SHIPPED_RULES!r}")
            if wanted == SHIPPED_RULES:
                return default_rules()
            return load_rules(Path(wanted).expanduser())
        return load_rules(routes.expanduser())
    except RuleFileError as exc:
        raise EnvError(f"routes: {exc}") from None


def _store(traces: TracesInput | None) -> tuple[TraceStore | None, bool]:
    """The store, and whether it was opened here (and so is closed here)."""
    if traces is None or isinstance(traces, TraceStore):
        return traces, False
    if not isinstance(traces, str | Path) or not str(traces).strip():
        raise EnvError("traces is a trace store or the path of one")
    try:
        return open_store(Path(traces).expanduser()), True
    except TraceStoreError as exc:
        raise EnvError(f"traces: {exc}") from None


def scenario_tool_infos(scenario: Scenario) -> tuple[ToolInfo, ...]:
    """The scenario's tools as routing rules see them: their names and the MCP
    annotations their definitions give (a tool list captured from the real server keeps
    them). A scenario without a tool list has none: every tool is unknown."""
    raw: Any = scenario.extras.get("tools")
    if isinstance(raw, str):
        try:
            raw = read_json(raw)
        except (ValueError, RecursionError):
            return ()
    if isinstance(raw, Mapping):
        listed = raw.get("result") if isinstance(raw.get("result"), Mapping) else raw
        raw = listed.get("tools") if isinstance(listed, Mapping) else None
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return ()
    infos: list[ToolInfo] = []
    for definition in raw:
        if isinstance(definition, Mapping):
            try:
                infos.append(ToolInfo.from_definition(definition))
            except ValueError:
                continue
    return tuple(infos)


# -- plan steps (``plans``): the store is read and written off any event loop -----------------
class Grounded:
    """A plan's wait for a step's grounding examples (a trace store lookup)."""

    def __init__(self, grounder: Grounder, action: Action) -> None:
        self.grounder, self.action = grounder, action

    def block(self) -> Grounding:
        return self.grounder.for_action(self.action)

    async def wait(self) -> Grounding:
        return await asyncio.to_thread(self.grounder.for_action, self.action)


_keeper: concurrent.futures.ThreadPoolExecutor | None = None
_keeper_lock = threading.Lock()


def keep_later(routed: RoutedSession, found: Sequence[Exchange]) -> concurrent.futures.Future[int]:
    """Add ``found`` to the trace store on a thread of its own (one: the store's writes
    come in the order the steps ended), so that no caller blocks on a file's write."""
    global _keeper
    with _keeper_lock:
        if _keeper is None:
            _keeper = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="trace-keep"
            )
        pool = _keeper
    try:
        return pool.submit(_keep, routed, list(found))
    except RuntimeError:  # the interpreter is shutting down: keep it here
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        done.set_result(_keep(routed, list(found)))
        return done


def _keep(routed: RoutedSession, found: list[Exchange]) -> int:
    try:
        return routed.keep(found)
    except Exception:  # a store closed meanwhile: the step is not to fail for it
        log.exception("a real answer was not kept in the trace store")
        return 0


class Kept:
    """A plan's wait for a step's real answers to be in the trace store, so that the
    next step is grounded in them."""

    def __init__(self, keeping: concurrent.futures.Future[int]) -> None:
        self.keeping = keeping

    def block(self) -> int:
        return self.keeping.result()

    async def wait(self) -> int:
        return await asyncio.wrap_future(self.keeping)
