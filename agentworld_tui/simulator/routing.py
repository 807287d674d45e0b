"""Routing a session's calls between the world model and a real server, and grounding the
world model in what reality answered before.

A front-end that has reality beside its world model (a real MCP server, routing rules, a
trace store) holds one ``Reality`` and opens a ``RoutedSession`` for each session it
serves. For each call, ``decide`` says where it goes (``reality.routing``: real, sim or
shadow; every call shadow when a twin is given without rules), ``grounding`` picks the
real examples the world model is shown (for a call it answers), and ``send`` starts the
turn:

- ``sim``: the world model answers; nothing reaches the real server.
- ``shadow``: both, at once (``simulator.shadow``); the agent receives the side
  ``deliver`` names.
- ``real``: reality answers alone (``RealRun``): the turn's observation is reality's
  answer, so the world model sees it in the history of later calls. When reality cannot
  answer, the rule's ``on_failure`` has the world model answer instead (the turn says so)
  or the call fail.

Each turn records where it was answered and why (``turn.route``) and the examples it was
shown (``turn.grounding``); a session reopened takes its router up again from them.
Reality's answers go into the trace store as they come (``exchanges`` and ``keep``), so
later calls are grounded in them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.reality.grounding import Grounder, Grounding
from agentworld_tui.reality.observation import RealObservation
from agentworld_tui.reality.routing import Decision, Route, Router, RuleSet, ToolInfo
from agentworld_tui.reality.spec import Deliver, TwinSpec
from agentworld_tui.reality.traces import Exchange, TraceStore, TraceStoreError, call_of
from agentworld_tui.reality.twin import TwinRunner
from agentworld_tui.simulator.real_run import Fallback, RealRun
from agentworld_tui.simulator.run import Home, Saver, TurnRun
from agentworld_tui.simulator.shadow import Shadow
from agentworld_tui.world.action import Action
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from agentworld_tui.simulator.service import Simulator

__all__ = ["Reality", "RoutedSession"]

log = logging.getLogger("agentworld.routing")


@dataclass(frozen=True)
class Reality:
    """What a front-end has of reality beside its world model: a started twin (the real
    server), the side a shadowed call delivers, routing rules (None with a twin: every
    call shadowed), the tools as the server lists them (their annotations are what rules
    read), and grounding in a trace store. Real answers are kept in ``keep_in`` (the
    grounding store, when it is writable) as they come."""

    runner: TwinRunner | None = None
    spec: TwinSpec | None = None
    deliver: Deliver = "real"
    rules: RuleSet | None = None
    tools: tuple[ToolInfo, ...] = ()
    grounder: Grounder | None = None
    keep_in: TraceStore | None = None
    first: RealObservation | None = None
    """The twin's first state, as it started (a terminal's first screen)."""

    @property
    def shadow(self) -> Shadow | None:
        if self.runner is None:
            return None
        return Shadow(self.runner, self.deliver, self.spec)

    def describe(self) -> dict[str, Any] | None:
        """``session.twin`` for a session routed here (None without a twin)."""
        shadow = self.shadow
        if shadow is None:
            return None
        out = shadow.describe()
        if self.rules is not None:
            out["routes"] = self.rules.source
        return out

    def open(self, session: Session) -> RoutedSession:
        return RoutedSession(self, session)

    def close(self) -> None:
        """Close the twin and the trace store (after the front-end stopped)."""
        if self.runner is not None:
            self.runner.close()
        stores = {id(s): s for s in (self.keep_in, self.grounder and self.grounder.store) if s}
        for store in stores.values():
            store.close()


class RoutedSession:
    """One session's calls, routed: its router (taken up again from the decisions its
    turns recorded), and how each call is sent. Lives on the session's thread."""

    def __init__(self, reality: Reality, session: Session) -> None:
        self.reality = reality
        self.session = session
        self.router: Router | None = None
        if reality.runner is not None and reality.rules is not None:
            self.router = Router(reality.rules, reality.tools)
            self.router.restore(
                Decision.from_dict(t.route) for t in session.turns if isinstance(t.route, dict)
            )

    def decide(self, tool: str) -> Decision | None:
        """Where a call of ``tool`` goes (None: no rules; the call is shadowed where there
        is a twin, simulated where there is none)."""
        if self.router is None:
            return None
        return self.router.decide(tool, turn=len(self.session.turns) + 1)

    def route(self, decision: Decision | None) -> Route:
        if decision is not None:
            return decision.route
        return Route.SIM if self.reality.runner is None else Route.SHADOW

    def grounding(self, action: Action, decision: Decision | None) -> Grounding | None:
        """The real examples for a call the world model answers (None: grounding is off,
        or reality answers alone). Reads the store: blocks for a few milliseconds."""
        grounder = self.reality.grounder
        if grounder is None or self.route(decision) is Route.REAL:
            return None
        return grounder.for_action(action)

    def send(
        self,
        simulator: Simulator,
        action: Action,
        decision: Decision | None,
        grounding: Grounding | None = None,
        *,
        params: GenerationParams | None = None,
        owner: str = "",
        save: Saver | None = None,
        home: Home | None = None,
    ) -> TurnRun:
        """Start the call's turn where ``decision`` sends it; raises SimulatorError as
        ``Simulator.send`` does."""
        route = self.route(decision)
        runner = self.reality.runner
        if self.session.twin is None and runner is not None:
            self.session.twin = self.reality.describe()
        recorded = decision.to_dict() if decision is not None else None
        if route is Route.REAL and decision is not None and runner is not None:
            return simulator.send_real(
                self.session,
                action,
                runner,
                fallback=self._fallback(decision),
                params=params,
                owner=owner,
                save=save,
                home=home,
                route=recorded,
            )
        return simulator.send(
            self.session,
            action,
            params=params,
            owner=owner,
            save=save,
            home=home,
            shadow=self.reality.shadow if route is Route.SHADOW else None,
            grounding=grounding,
            route=recorded,
        )

    def _fallback(self, decision: Decision) -> Fallback:
        def fall_back(turn: Turn, real: RealObservation) -> bool:
            why = real.error or f"reality's answer: {real.status.value}"
            fallen = self.router.fall_back(decision, why) if self.router is not None else None
            if fallen is None:
                turn.route = {**decision.to_dict(), "failed": why}
                return False
            turn.route = fallen.to_dict()
            grounding = self.grounding(turn.action, fallen)
            if grounding is not None:
                turn.grounding = grounding.to_dict()
            return True

        return fall_back

    def settle(self, run: TurnRun, decision: Decision | None) -> str:
        """After a shadowed call is recorded: when reality failed where its answer was to
        be delivered, the rule's ``on_failure`` decides. Returns why the agent gets a
        failure instead of the world model's answer ("" when it does not)."""
        turn = run.turn
        reality = turn.reality
        if (
            decision is None
            or decision.route is not Route.SHADOW
            or self.router is None
            or reality is None
            or self.reality.deliver != "real"
        ):
            return ""
        real = RealObservation.from_dict(reality.get("real") or {})
        if real.ok:
            return ""
        why = real.error or f"reality's answer: {real.status.value}"
        fallen = self.router.fall_back(decision, why)
        if fallen is None:
            turn.route = {**decision.to_dict(), "failed": why}
            return why
        turn.route = fallen.to_dict()
        return ""

    def exchanges(self, run: TurnRun) -> list[Exchange]:
        """What reality answered in ``run``'s turn, to keep in the trace store (none when
        there is no store to keep them in, or reality did not answer)."""
        if self.reality.keep_in is None:
            return []
        turn = run.turn
        source = ""
        text = ""
        if isinstance(run, RealRun) and run.real is not None and run.real.ok:
            source, text = "routed", run.real.text
        elif turn.reality is not None:
            real = RealObservation.from_dict(turn.reality.get("real") or {})
            if real.ok and "real" in turn.reality:
                source, text = "twin", real.text
        if not source:
            return []
        domain = self.session.domain.name
        tool, arguments = call_of(domain, turn.action.payload)
        return [Exchange(tool, arguments, text, source, domain=domain)]

    def keep(self, exchanges: Sequence[Exchange]) -> int:
        """Add ``exchanges`` to the trace store (blocks: a write to its file); returns how
        many were added. A store that cannot be written is logged, never raised."""
        store = self.reality.keep_in
        if store is None or not exchanges:
            return 0
        try:
            return store.add_many(exchanges).added
        except TraceStoreError as exc:
            log.warning("reality's answer was not kept: %s", exc)
            return 0
