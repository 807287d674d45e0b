"""What every twin does, and the one way front-ends drive a twin.

A twin is the real counterpart of a simulated environment. Its calls block (a shell runs,
a server answers), so every front-end drives it through a ``TwinRunner``: the twin lives on
a thread of its own, calls are serialized there, and each comes back within the action's
own bound plus a grace period, as a value, whatever the twin does. The app and the MCP
server await the ``*_async`` methods; environments and the rollout's threads call the
blocking ones; shadow mode submits an action and collects the future when the world model
has answered too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from agentworld_tui.reality.observation import CheckResult, RealObservation, TwinStatus, failed
from agentworld_tui.world.action import Action

CHECK_SECONDS = 120.0
"""How long a task's check may run by default."""
HANG_GRACE = 30.0
"""Seconds past a call's own bound before its twin is taken as hung and stopped."""
START_BOUND = 120.0
CLOSE_BOUND = 30.0

T = TypeVar("T")


class Twin(Protocol):
    """A real environment. No method raises: a failure is a value (``RealObservation``
    with a status other than ok, or a failed ``CheckResult``)."""

    domain: str
    """The domain it is the twin of ("terminal", "swe", "mcp")."""

    def start(self) -> RealObservation:
        """Bring the twin up; the observation is its first state (a terminal's screen)."""
        ...

    def act(self, action: Action) -> RealObservation:
        """Carry out an action its domain validated, for real."""
        ...

    def check(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        """Run a task's check in the twin: exit status 0 is success."""
        ...

    def time_limit(self, action: Action) -> float:
        """The most seconds ``act(action)`` takes when the twin works."""
        ...

    def kill(self) -> None:
        """Stop everything at once; safe from any thread, while another call runs."""
        ...

    def close(self) -> None:
        """Stop the twin in order and remove what it made."""
        ...


class TwinRunner:
    """A twin on a thread of its own, with every call bounded in time.

    A call that overruns its bound (the twin hung) gives a ``crashed`` observation, the twin
    is killed, and every later call answers ``crashed`` at once with the same reason.
    """

    def __init__(self, twin: Twin, *, grace: float = HANG_GRACE) -> None:
        self.twin = twin
        self.grace = grace
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"twin-{twin.domain}"
        )
        self._lock = threading.Lock()
        self._broken = ""
        self._closed = False

    @property
    def domain(self) -> str:
        return self.twin.domain

    @property
    def broken(self) -> str:
        """Why the twin was given up ("" while it is in use)."""
        return self._broken

    # -- futures: for shadow mode, which runs the world model meanwhile -------------------

    def submit_start(self) -> concurrent.futures.Future[RealObservation]:
        return self._submit(self.twin.start, START_BOUND, self._failed_observation)

    def submit_act(self, action: Action) -> concurrent.futures.Future[RealObservation]:
        return self._submit(
            lambda: self.twin.act(action), self._bound(action), self._failed_observation
        )

    def submit_check(
        self, command: str, timeout: float = CHECK_SECONDS
    ) -> concurrent.futures.Future[CheckResult]:
        return self._submit(
            lambda: self.twin.check(command, timeout), timeout + 10.0, self._failed_check
        )

    # -- blocking: environments and the rollout's threads ----------------------------------

    def start(self) -> RealObservation:
        return self.submit_start().result()

    def act(self, action: Action) -> RealObservation:
        return self.submit_act(action).result()

    def check(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        return self.submit_check(command, timeout).result()

    def close(self) -> None:
        """Close the twin (kill it if it does not close in time) and end the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._broken:  # its thread may still be stuck: no orderly close to wait for
            self._kill_quietly()
        else:
            done = self._pool.submit(self._close_quietly)
            try:
                done.result(CLOSE_BOUND)
            except concurrent.futures.TimeoutError:
                self._kill_quietly()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- asyncio: the app and the MCP server -----------------------------------------------

    async def start_async(self) -> RealObservation:
        return await asyncio.wrap_future(self.submit_start())

    async def act_async(self, action: Action) -> RealObservation:
        return await asyncio.wrap_future(self.submit_act(action))

    async def check_async(self, command: str, timeout: float = CHECK_SECONDS) -> CheckResult:
        return await asyncio.wrap_future(self.submit_check(command, timeout))

    async def close_async(self) -> None:
        await asyncio.to_thread(self.close)

    # -- the machinery -----------------------------------------------------------------

    def _bound(self, action: Action) -> float:
        try:
            return float(self.twin.time_limit(action))
        except Exception:  # a twin's own bug: fall back to the largest bound
            return START_BOUND

    def _submit(
        self, call: Callable[[], T], bound: float, failure: Callable[[TwinStatus, str], T]
    ) -> concurrent.futures.Future[T]:
        """A future that is always resolved within ``bound`` + grace, with a value."""
        out: concurrent.futures.Future[T] = concurrent.futures.Future()
        out.set_running_or_notify_cancel()
        if self._broken or self._closed:
            out.set_result(failure(TwinStatus.CRASHED, self._broken or "the twin was closed"))
            return out

        def guarded() -> T:
            if self._broken:
                return failure(TwinStatus.CRASHED, self._broken)
            try:
                return call()
            except Exception as exc:  # a twin's own bug must not reach the caller
                return failure(TwinStatus.CRASHED, f"the twin failed: {type(exc).__name__}: {exc}")

        try:
            inner = self._pool.submit(guarded)
        except RuntimeError:
            out.set_result(failure(TwinStatus.CRASHED, "the twin was closed"))
            return out
        limit = bound + self.grace

        def settle(done: concurrent.futures.Future[T]) -> None:
            if out.done():
                return
            try:
                value = done.result()
            except BaseException as exc:  # cancelled at shutdown
                value = failure(
                    TwinStatus.CRASHED, f"the twin's call was dropped ({type(exc).__name__})"
                )
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                out.set_result(value)

        inner.add_done_callback(settle)

        def watch() -> None:
            try:
                inner.result(limit)
            except concurrent.futures.TimeoutError:
                self._broken = f"the twin did not answer within {limit:g} seconds and was stopped"
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    out.set_result(failure(TwinStatus.CRASHED, self._broken))
                self._kill_quietly()
            except BaseException:  # settled by the callback
                return

        threading.Thread(target=watch, name="twin-watch", daemon=True).start()
        return out

    def _failed_observation(self, status: TwinStatus, error: str) -> RealObservation:
        return failed(status, error)

    def _failed_check(self, status: TwinStatus, error: str) -> CheckResult:
        return CheckResult(False, None, "", status=status, error=error)

    def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.twin.close()

    def _kill_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.twin.kill()
