"""An environment's real twin, one per episode (docs/reality.md).

An environment given a ``TwinSpec`` starts a fresh twin at every reset: reality cannot be
undone, so no episode inherits another's files or processes. Each step goes to the world
model and to the twin at once (the simulator's shadow mode); the agent receives the side
``deliver`` names. At the episode's end (``end_episode``, the step limit, the next reset,
or close) the check runs in the twin, the episode's figures go into the session, and the
twin is closed. A server bounds how many twins live at once with ``TwinSlots``.

The waits here are plan steps (``plans``): blocking code makes the twin's calls on its own
thread, asyncio code on a worker thread, so an event loop never waits on a sandbox.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.reality.figures import EpisodeFigures
from agentworld_tui.reality.spec import SANDBOX_DOMAINS, TWIN_DOMAINS, Deliver, TwinSpec
from agentworld_tui.reality.spec import TwinStartError as _TwinStartError
from agentworld_tui.reality.twin import TwinRunner
from agentworld_tui.simulator import Saver
from agentworld_tui.simulator.shadow import Shadow, end_episode, end_episode_async, record_episode
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session

__all__ = [
    "MAX_CHECK_CHARS",
    "EpisodeTwin",
    "TwinBusy",
    "TwinError",
    "TwinSlots",
    "check_command",
    "scenario_check",
]

MAX_CHECK_CHARS = 10_000
"""A check is one command line (a script belongs in the seed folder)."""
CLOSE_WAIT = 10.0
"""Seconds a blocking close waits for a step begun on an event loop to be recorded."""


class TwinError(EnvError):
    """An episode's twin that did not start; the message is one line."""


class TwinBusy(TwinError):
    """Every twin a server may keep is in use: the episode is refused, not queued."""


def check_command(value: object, domain: str) -> str:
    """A task's or scenario's check, checked: one command line run by bash in the twin's
    sandbox (never a list, never empty); raises EnvError with what is wrong."""
    if not isinstance(value, str):
        raise EnvError("the check must be text: one command line, run in the twin")
    text = value.strip()
    if not text:
        raise EnvError("the check is empty")
    if "\x00" in text:
        raise EnvError("the check holds a NUL character")
    if len(text) > MAX_CHECK_CHARS:
        raise EnvError(
            f"the check is {len(text):,} characters; at most {MAX_CHECK_CHARS:,} "
            "(put a longer script in the twin's seed folder and run that)"
        )
    if domain not in SANDBOX_DOMAINS:
        if domain in TWIN_DOMAINS:
            raise EnvError(
                f"a check runs in a sandbox twin; the {domain} domain's twin is a server "
                "(there is no place to run one)"
            )
        raise EnvError(f"the {domain} domain has no twin to run a check in")
    return text


def scenario_check(scenario: Scenario, domain: str) -> str:
    """The check a scenario carries (its ``check`` key), checked ("" for none)."""
    value = scenario.extras.get("check")
    if value is None:
        return ""
    try:
        return check_command(value, domain)
    except EnvError as exc:
        raise EnvError(f"the scenario {scenario.name!r}: {exc}") from None


class TwinSlots:
    """The twins a server keeps at once, at most ``most``: one more episode is refused
    in one line (``TwinBusy``) rather than opening sandboxes without end. ``close_all``
    closes what is left when the server stops."""

    def __init__(self, most: int) -> None:
        if most < 1:
            raise EnvError("a server keeps at least one twin")
        self.most = most
        self._live: set[TwinRunner] = set()
        self._taken = 0
        self._lock = threading.Lock()
        self._closing: set[threading.Thread] = set()
        self._stopped = False

    @property
    def in_use(self) -> int:
        with self._lock:
            return self._taken

    def take(self) -> None:
        with self._lock:
            if self._stopped:
                raise TwinBusy("the server is stopping: no new twin starts")
            if self._taken >= self.most:
                raise TwinBusy(
                    f"all {self.most} twins this server keeps are in use: try again when an "
                    "episode ends (the server's --max-twins)"
                )
            self._taken += 1

    def hold(self, runner: TwinRunner) -> None:
        """Keep a started twin among the live ones; one that started while the server
        was stopping is closed at once."""
        with self._lock:
            stopped = self._stopped
            if not stopped:
                self._live.add(runner)
        if stopped:
            runner.close()
            self.give_back(None)
            raise TwinBusy("the server is stopping: no new twin starts")

    def give_back(self, runner: TwinRunner | None) -> None:
        with self._lock:
            if runner is not None:
                self._live.discard(runner)
            self._taken -= 1

    def in_background(self, work: Callable[[], None]) -> None:
        """Run ``work`` (an episode's end and its twin's close) on a thread of its own,
        which ``close_all`` waits for."""

        def run() -> None:
            try:
                work()
            finally:
                with self._lock:
                    self._closing.discard(thread)

        thread = threading.Thread(target=run, name="twin-close", daemon=True)
        with self._lock:
            self._closing.add(thread)
        thread.start()

    def close_all(self, timeout: float = 60.0) -> None:
        """Refuse new twins, wait for the closes under way, close every twin left."""
        with self._lock:
            self._stopped = True
            closing = list(self._closing)
        for thread in closing:
            thread.join(timeout)
        with self._lock:
            live = list(self._live)
        for runner in live:
            runner.close()


class EpisodeTwin:
    """One episode's twin: started at reset, ended once (the check and the figures),
    then closed."""

    def __init__(self, shadow: Shadow, slots: TwinSlots | None) -> None:
        self.shadow = shadow
        self.slots = slots
        self.figures: EpisodeFigures | None = None
        """The episode's figures, once it ended."""
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def start(
        cls, spec: TwinSpec, deliver: Deliver, check: str, slots: TwinSlots | None
    ) -> EpisodeTwin:
        """Start a twin (blocking); a TwinError in one line when it cannot."""
        if slots is not None:
            slots.take()
        try:
            runner, first = spec.start()
        except _TwinStartError as exc:
            if slots is not None:
                slots.give_back(None)
            reason = str(exc).removeprefix("the twin did not start: ")
            raise TwinError(f"the {spec.domain} twin did not start: {reason}") from None
        except BaseException:
            if slots is not None:
                slots.give_back(None)
            raise
        if slots is not None:
            slots.hold(runner)
        return cls(Shadow(runner, deliver, spec, check=check, first=first), slots)

    @property
    def first_state(self) -> str:
        """The twin's first state (a terminal's first screen; "" where it has none)."""
        first = self.shadow.first
        return first.text if first is not None and first.ok else ""

    @property
    def ended(self) -> bool:
        return self.figures is not None

    def end(
        self, session: Session, claimed_done: bool | None, save: Saver | None
    ) -> EpisodeFigures:
        """Run the check in the twin and record the figures (blocking, on the thread that
        owns the session); once."""
        if self.figures is None:
            self.figures = end_episode(session, self.shadow, claimed_done=claimed_done, save=save)
        return self.figures

    async def aend(
        self, session: Session, claimed_done: bool | None, save: Saver | None
    ) -> EpisodeFigures:
        if self.figures is None:
            self.figures = await end_episode_async(
                session, self.shadow, claimed_done=claimed_done, save=save
            )
        return self.figures

    def end_unchecked(self, session: Session, save: Saver | None) -> EpisodeFigures:
        """Record the figures without running the check (a step was still in flight when
        the environment closed): the check is kept with no result."""
        if self.figures is None:
            self.figures = record_episode(session, command=self.shadow.check, save=save)
        return self.figures

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        runner = self.shadow.runner
        try:
            runner.close()
        finally:
            if self.slots is not None:
                self.slots.give_back(runner)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


# -- plan steps ------------------------------------------------------------------------------
class TwinStarted:
    """A plan's wait for an episode's twin to start."""

    def __init__(
        self, spec: TwinSpec, deliver: Deliver, check: str, slots: TwinSlots | None
    ) -> None:
        self.args = (spec, deliver, check, slots)

    def block(self) -> EpisodeTwin:
        return EpisodeTwin.start(*self.args)

    async def wait(self) -> EpisodeTwin:
        return await asyncio.to_thread(EpisodeTwin.start, *self.args)


class EpisodeEnded:
    """A plan's wait for the check to run in the twin and the figures to be recorded."""

    def __init__(
        self, twin: EpisodeTwin, session: Session, claimed_done: bool | None, save: Saver | None
    ) -> None:
        self.twin, self.session, self.claimed_done, self.save = twin, session, claimed_done, save

    def block(self) -> EpisodeFigures:
        return self.twin.end(self.session, self.claimed_done, self.save)

    async def wait(self) -> EpisodeFigures:
        return await self.twin.aend(self.session, self.claimed_done, self.save)


class TwinClosed:
    """A plan's wait for a twin to close."""

    def __init__(self, twin: EpisodeTwin) -> None:
        self.twin = twin

    def block(self) -> None:
        self.twin.close()

    async def wait(self) -> None:
        await self.twin.aclose()
