"""Answering a tools/call: a checked call becomes a turn of its connection's session, and
the agent gets that turn's observation as the tool's result.

``observe`` is where an observation comes from: the world model predicts it (asked once
more when it breaks the tool's output schema), or, where the server has a real twin,
reality answers it too or alone, as the routing rules say (``simulator.routing``: every
call shadowed when there are no rules); with a trace store, the world model is shown
similar real answers first. The rest does not care where it came from: it reads the side
the call delivers (``turn.shown_text``), the person steering may hold it, edit it or stop
it, then the agent gets the tool result (``results``) and the turn is recorded and saved.
A client that cancels or goes away stops the generation; the turn is kept, interrupted.

What the session file keeps of a call, besides the turn itself, is in
``turn.stats["agent"]``: the connection, the tool, the call numbers, the schedule's
decisions, ``received`` (exactly what the agent got: ``{"result": ...}``,
``{"error": ...}``, or null for nothing), and ``predicted`` (the turn's own observation,
when the agent got something else: an edit, or nothing). What the agent received as the
tool's output is what later turns build on: ``turn.observation``, or reality's answer
where that went as it was (``turn.reality``, the prediction then staying the turn's
observation); a call the agent never got an answer to keeps an empty observation (its
text stays in ``turn.raw``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from agentworld_tui.agents.mcp.checking import CallChecker
from agentworld_tui.agents.mcp.connections import Connections
from agentworld_tui.agents.mcp.results import (
    error_result,
    observation_result,
    output_problem,
    real_result,
    result_record,
    unfit_result,
)
from agentworld_tui.agents.mcp.steering import (
    HOLD_EVERY,
    AgentCall,
    AgentConnection,
    CallAnswered,
    CallRefused,
    HeldObservation,
    Listeners,
    ObservationHeld,
    TurnStarted,
)
from agentworld_tui.agents.mcp.toolset import Toolset, UnknownTool
from agentworld_tui.agents.schedule import Schedule, joined_control
from agentworld_tui.simulator import Simulator, SimulatorError, TurnRun, home_on
from agentworld_tui.simulator.routing import Reality, RoutedSession
from agentworld_tui.world.action import Action, ActionError
from agentworld_tui.world.session import Turn

log = logging.getLogger("agentworld.mcp")

T = TypeVar("T")
ClientLeft = Callable[[], Awaitable[bool]]
"""Whether the agent's client went away (its HTTP connection closed)."""

DISCONNECT_POLL_SECONDS = 1.0
"""How often a waiting call looks whether its HTTP client is still there."""
OUTPUT_ASKS = 2
"""How many times the model is asked for a result that fits a tool's output schema."""
INTERRUPTED = "The tool call was interrupted before it finished."
CANCELLED_NOTE = "the agent's client cancelled the call; it received nothing"
GONE_NOTE = "the agent's client went away during the call; it received nothing"
ENDED_NOTE = "the server stopped before the world model answered; the agent received nothing"
STOPPED_NOTE = "stopped before the agent received it"
EDITED_NOTE = "edited before the agent received it"


class ClientGone(Exception):
    """The agent's client went away while its call waited: it gets nothing more."""


class Answering:
    """Answers the calls of every connection; a connection's calls one after another."""

    def __init__(
        self,
        simulator: Simulator,
        toolset: Toolset,
        connections: Connections,
        listeners: Listeners,
        checker: CallChecker,
        schedule: Schedule | None = None,
        reality: Reality | None = None,
    ) -> None:
        self.simulator = simulator
        self.toolset = toolset
        self.connections = connections
        self.checker = checker
        self.schedule = schedule
        self.reality = reality
        """A real twin, routing rules and a trace store, where the server has them."""
        self._listeners = listeners
        self._calls: set[AgentCall] = set()
        """The calls whose turn is not recorded yet."""
        self._keeping: set[asyncio.Future[int]] = set()
        """Reality's answers on their way into the trace store."""

    async def call(
        self,
        connection: AgentConnection,
        tool: str,
        arguments: Mapping[str, Any] | None,
        left: ClientLeft | None = None,
    ) -> types.CallToolResult:
        """Answer a tools/call. A call of a tool not listed is a protocol error, and bad
        arguments get the error result a real server gives; both cost no model time.
        ``left`` tells whether the client went away (None: it cannot, over stdio)."""
        try:
            action = await self.checker.action(connection, tool, arguments)
        except UnknownTool as exc:
            self._refused(connection, tool, str(exc))
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except ActionError as exc:
            message = f"Input validation error: {exc}"
            self._refused(connection, tool, message)
            return error_result(message)
        async with connection.turn_lock:
            try:
                return await self._answer(connection, tool, action, left)
            except ClientGone:
                return error_result(INTERRUPTED)

    async def observe(
        self, connection: AgentConnection, tool: str, action: Action, left: ClientLeft | None
    ) -> AgentCall:
        """Turn a checked call into an observation: the call becomes a turn of the
        connection's session, whose delivered side (``turn.shown_text``, when its status
        is "complete") is the tool's output. Where the routing rules send it (every call
        shadowed with a twin and no rules; simulated without a twin), the world model
        predicts it, with the schedule's instructions for this call and real examples
        from the trace store, and reality answers it too or alone. A simulated answer
        that breaks the tool's output schema is asked for again (up to ``OUTPUT_ASKS``);
        reality's answer is what it is. Raises ClientGone (the turn kept, interrupted)
        when the agent's client cancels or goes away."""
        session = connection.session
        number, tool_call = connection.calls + 1, connection.per_tool[tool] + 1
        decisions = self.schedule.decide(tool, number, tool_call) if self.schedule else []
        routed = self._routed(connection)
        decision = routed.decide(tool) if routed is not None else None
        grounding = None
        if routed is not None and routed.reality.grounder is not None:
            grounding = await asyncio.to_thread(routed.grounding, action, decision)
        own = session.control
        scheduled = joined_control(own, decisions)
        if scheduled is not None:
            session.control = scheduled
        home = home_on(asyncio.get_running_loop())
        try:
            if routed is None:
                run = self.simulator.send(session, action, owner=connection.id, home=home)
            else:
                run = routed.send(
                    self.simulator, action, decision, grounding, owner=connection.id, home=home
                )
        except SimulatorError as exc:
            session.control = own
            raise MCPError(types.INTERNAL_ERROR, f"the world model cannot answer: {exc}") from None
        if scheduled is not None:
            session.control = own if own is not None and own.persistent else None
        connection.calls, connection.per_tool[tool] = number, tool_call
        call = AgentCall(connection, tool, number, tool_call, run, decisions)
        connection.call = call
        self._calls.add(call)
        await self._generated(call, run, left)
        if routed is not None:
            call.failure = routed.settle(run, decision)
            self._keep(routed, run)
        declared = self.toolset.tool(tool)
        while (
            call.turn.status == "complete"
            and _simulated(call.turn)
            and call.asked < OUTPUT_ASKS
            and not self.connections.closing
            and output_problem(call.turn.observation, declared)
        ):
            call.asked += 1  # a result that breaks the output schema: ask once more
            try:
                retried = self.simulator.retry(
                    session, owner=connection.id, home=home_on(asyncio.get_running_loop())
                )
            except SimulatorError:
                break
            await self._generated(call, retried, left)
        return call

    def _routed(self, connection: AgentConnection) -> RoutedSession | None:
        """The connection's routing (made at its first call, from its session's recorded
        turns: a session reopened takes up its router again), or its store's own."""
        own = connection.opened.routing
        if own is not None:
            return own()
        if self.reality is None:
            return None
        if connection.routed is None:
            connection.routed = self.reality.open(connection.session)
        return connection.routed

    def _keep(self, routed: RoutedSession, run: TurnRun) -> None:
        """Add reality's answer to the trace store, off the loop, without the agent
        waiting for the write."""
        found = routed.exchanges(run)
        if not found:
            return
        keeping = asyncio.ensure_future(asyncio.to_thread(routed.keep, found))
        self._keeping.add(keeping)
        keeping.add_done_callback(self._keeping.discard)

    async def settle_all(self, grace: float) -> None:
        """Stop every call in flight, give the engine ``grace`` seconds to record each,
        and record (interrupted) and save those it did not."""
        if self._keeping:
            await asyncio.wait(list(self._keeping), timeout=grace)
        calls = list(self._calls)
        for call in calls:
            if call.held is not None:
                call.held.stop()
            call.run.stop()
        pending = [asyncio.ensure_future(c.settled.wait()) for c in calls]
        if pending:
            _done, late = await asyncio.wait(pending, timeout=grace)
            for task in late:
                task.cancel()
        for call in calls:
            if not call.settled.is_set():
                self._record_unfinished(call, ENDED_NOTE)

    async def _answer(
        self, connection: AgentConnection, tool: str, action: Action, left: ClientLeft | None
    ) -> types.CallToolResult:
        last = connection.call
        if last is not None and not last.settled.is_set():
            await last.settled.wait()  # a cancelled call ends a moment after its client left
        self.connections.ensure_serving()
        call = await self.observe(connection, tool, action, left)
        turn = call.turn
        if turn.status == "interrupted":
            return self._deliver(call, error_result(INTERRUPTED), observation="")
        if call.failure:
            problem = types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the real server could not answer: {call.failure}",
            )
            self._deliver(call, problem, observation="")
            raise MCPError.from_error_data(problem)
        edited: str | None = None
        if connection.hold and not self.connections.closing:
            edited = await self._held(call, left)
            if call.held is not None and call.held.stopped:
                turn.status, turn.note = "interrupted", STOPPED_NOTE
                return self._deliver(call, error_result(INTERRUPTED), observation="")
        if edited is not None:
            turn.status, turn.note = "complete", EDITED_NOTE
            outcome = observation_result(edited, self.toolset.tool(tool))
            return self._deliver(call, outcome, observation=edited)
        if turn.status != "complete":
            who = "the world model" if _simulated(turn) else "the real server"
            problem = types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"{who} could not answer: {turn.note or turn.status}",
            )
            self._deliver(call, problem, observation="")
            raise MCPError.from_error_data(problem)
        declared = self.toolset.tool(tool)
        if not _simulated(turn):
            tool_error = _tool_error(turn)
            unfit_because = "" if tool_error else output_problem(turn.shown_text, declared)
            if unfit_because:
                turn.note = (
                    f"reality's result did not fit the tool's output schema: {unfit_because}"
                )
            outcome = real_result(turn.shown_text, declared, tool_error=tool_error)
            return self._deliver(call, outcome, observation=turn.shown_text)
        unfit_because = output_problem(turn.observation, declared)
        if unfit_because:
            turn.note = (
                f"the world model's result did not fit the tool's output schema "
                f"(asked {call.asked} times): {unfit_because}"
            )
            outcome = unfit_result(turn.observation, unfit_because, call.asked)
        else:
            outcome = observation_result(turn.observation, declared)
        return self._deliver(call, outcome, observation=turn.observation)

    async def _generated(self, call: AgentCall, run: TurnRun, left: ClientLeft | None) -> None:
        """``run`` is the call's turn now: wait until the engine is done with it."""
        call.run = run
        self._listeners.emit(TurnStarted(call.connection, call))
        await self._for_agent(call, run.result(), left)

    async def _held(self, call: AgentCall, left: ClientLeft | None) -> str | None:
        """Hold the observation for the person: their edit, or None (released as
        predicted, or stopped: ``call.held.stopped``)."""
        connection = call.connection
        if connection.hold != HOLD_EVERY:
            connection.hold -= 1
        connection.save()  # the prediction is on disk while the person decides
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        call.held = HeldObservation(call, call.turn.shown_text, answer)
        call.state = "held"
        self._listeners.emit(ObservationHeld(connection, call.held))
        return await self._for_agent(call, answer, left)

    async def _for_agent(self, call: AgentCall, waited: Awaitable[T], left: ClientLeft | None) -> T:
        """Wait for ``waited`` while the agent waits; a client that cancels or goes away
        first gets nothing, and the call is kept as interrupted."""
        try:
            return await _until_gone(waited, left)
        except ClientGone:
            self._abandon(call, GONE_NOTE)
            raise
        except BaseException:
            self._abandon(call, CANCELLED_NOTE)
            raise

    def _refused(self, connection: AgentConnection, tool: str, message: str) -> None:
        connection.refused += 1
        connection.last_refusal = message
        log.info("%s: refused a call of %s: %s", connection.id, tool[:100], message[:300])
        self._listeners.emit(CallRefused(connection, tool, message))

    def _deliver(
        self,
        call: AgentCall,
        outcome: types.CallToolResult | types.ErrorData,
        *,
        observation: str,
    ) -> types.CallToolResult:
        predicted = call.predicted
        _received(call.turn, observation)
        call.received = result_record(outcome)
        self._finish(call, predicted)
        if isinstance(outcome, types.ErrorData):
            return error_result(outcome.message)
        return outcome

    def _abandon(self, call: AgentCall, note: str) -> None:
        """The agent will get nothing: stop the turn, and once it is recorded, keep it as
        interrupted with an empty observation."""
        call.run.stop()
        if call.run.completed:
            self._record_unfinished(call, note)
        else:
            call.run.on_complete.append(lambda _run: self._record_unfinished(call, note))

    def _record_unfinished(self, call: AgentCall, note: str) -> None:
        """Keep a call the engine has not finished as interrupted, with what it had
        streamed, and save it now (a later end of its run changes nothing)."""
        predicted = call.predicted
        turn = call.turn
        _received(turn, "")
        turn.status, turn.note = "interrupted", note
        call.received = None
        self._finish(call, predicted)

    def _finish(self, call: AgentCall, predicted: str) -> None:
        if call.settled.is_set():
            return  # recorded already (the server stopping did not wait for the engine)
        turn = call.turn
        record: dict[str, Any] = {
            "connection": call.connection.id,
            "client": call.connection.client,
            "tool": call.tool,
            "call": call.number,
            "tool_call": call.tool_call,
            "received": call.received,
        }
        if call.decisions:
            record["schedule"] = [d.to_dict() for d in call.decisions]
        if predicted != turn.observation:
            record["predicted"] = predicted
        turn.stats = {**turn.stats, "agent": record}
        call.state = "answered" if call.received is not None else "undelivered"
        call.connection.save()
        self._calls.discard(call)
        call.settled.set()
        self._listeners.emit(CallAnswered(call.connection, call))
        if not call.connection.connected:
            self.connections.close(call.connection)


def _simulated(turn: Turn) -> bool:
    """Whether the agent's answer to this turn is the world model's (no twin, routed to
    simulation, a shadowed call delivering the prediction, or reality failed and the
    world model answered instead), not reality's."""
    if turn.delivered_real:
        return False
    return not isinstance(turn.route, dict) or turn.route.get("route") != "real"


def _tool_error(turn: Turn) -> bool:
    """Whether reality's answer to this turn was an error of the tool's own."""
    if turn.reality is not None:
        said = turn.reality.get("real") or {}
    else:
        said = turn.stats.get("real") or {}
    return isinstance(said, dict) and said.get("tool_error") is True


def _received(turn: Turn, text: str) -> None:
    """Make ``text``, what the agent received, what later turns build on. Reality's
    answer that went as it was stays in ``turn.reality`` (the turn's observation keeps
    the prediction); anything else becomes the turn's observation, and a record that
    said reality's answer was delivered says it was not."""
    if turn.delivered_real:
        if text == turn.shown_text:
            return
        assert turn.reality is not None
        turn.reality = {**turn.reality, "delivered": "sim"}
    elif (
        text
        and text != turn.observation
        and isinstance(turn.route, dict)
        and turn.route.get("answered") == "real"
    ):
        turn.route = {**turn.route, "edited": True}
    turn.observation = text


async def _until_gone(waited: Awaitable[T], left: ClientLeft | None) -> T:
    """``await waited``; raises ClientGone when the client went away first. The client is
    looked at only while the wait lasts, every poll interval."""
    if left is None:
        return await waited
    task = asyncio.ensure_future(waited)
    try:
        while True:
            await asyncio.wait((task,), timeout=DISCONNECT_POLL_SECONDS)
            if task.done():
                return task.result()
            if await left():
                task.cancel()
                raise ClientGone
    except BaseException:
        task.cancel()
        raise
