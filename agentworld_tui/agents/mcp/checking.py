"""A call's arguments are checked before any model time is spent on it, off the event
loop and in bounded time: a hostile argument (a pattern that backtracks, a deep value)
costs its own connection's time, never the loop's, and its agent is refused within
``seconds``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentworld_tui.agents.mcp.steering import AgentConnection
from agentworld_tui.agents.mcp.toolset import Toolset
from agentworld_tui.domains.json_schema import CHECK_SECONDS, CheckTimeout, checking_within
from agentworld_tui.domains.tool_call import too_costly
from agentworld_tui.world.action import Action, ActionError

CHECK_THREADS = 4
"""Calls whose arguments are checked at once, off the event loop."""
LATE_SECONDS = 0.2
"""How long past ``seconds`` a check's worker may answer before the agent is refused."""


class CallChecker:
    """``Toolset.action`` on worker threads, one call at a time per connection."""

    def __init__(self, toolset: Toolset, seconds: float = CHECK_SECONDS) -> None:
        self.toolset = toolset
        self.seconds = seconds
        """How long checking one call's arguments may take (then the call is refused)."""
        self._workers: ThreadPoolExecutor | None = None

    async def action(
        self, connection: AgentConnection, name: str, arguments: Mapping[str, Any] | None
    ) -> Action:
        """The action the call stands for, or UnknownTool / ActionError as
        ``Toolset.action`` raises them. The agent has its answer within ``seconds`` of
        wall-clock time; the check itself ends by then too, or, on a machine so busy that
        the pattern engine (which counts CPU time) has not had that much CPU yet, once it
        has. A connection's calls are checked one at a time, so one connection never
        holds more than one worker."""
        if self._workers is None:
            self._workers = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="mcp-check")
        check = functools.partial(_check, self.toolset, name, arguments, self.seconds)
        await connection.check_lock.acquire()
        future = asyncio.get_running_loop().run_in_executor(self._workers, check)

        def checked(done: asyncio.Future[Action]) -> None:
            connection.check_lock.release()
            if not done.cancelled():
                done.exception()  # seen here when the agent was answered without it

        future.add_done_callback(checked)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.seconds + LATE_SECONDS)
        except TimeoutError:
            raise ActionError(too_costly(name, self.seconds), field="arguments") from None

    def close(self) -> None:
        """Let the workers go; checks still queued are dropped."""
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)
            self._workers = None


def _check(
    toolset: Toolset, name: str, arguments: Mapping[str, Any] | None, seconds: float
) -> Action:
    try:
        with checking_within(seconds):
            return toolset.action(name, arguments)
    except CheckTimeout:
        raise ActionError(too_costly(name, seconds), field="arguments") from None
