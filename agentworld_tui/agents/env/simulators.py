"""The simulator an environment steps on: made from an engine spec (a server's wrapped so
that its transient failures are asked again), loaded once, and shared by environments and
their forks, closed with the last of them when it was made for them."""

from __future__ import annotations

import asyncio
import threading

from agentworld_tui.agents.env.results import EnvError
from agentworld_tui.agents.env.retry import RetryingEngine, RetryPolicy
from agentworld_tui.engines.base import Engine, EngineError, GenerationParams
from agentworld_tui.engines.factory import EngineSpec, make_engine
from agentworld_tui.simulator import Simulator

__all__ = [
    "EngineInput",
    "Loaded",
    "SharedSimulator",
    "aload_simulator",
    "engine_spec",
    "load_simulator",
    "open_simulator",
    "simulator_ready",
]

EngineInput = EngineSpec | str | Engine
"""A GGUF path, a server URL (``http://host:8000/v1``), an ``EngineSpec``, or an engine."""


def engine_spec(
    engine: EngineSpec | str, *, model: str = "", api_key_env: str = "", n_ctx: int = 0
) -> EngineSpec:
    """The spec a path or URL stands for (``http(s)://`` is a server)."""
    if isinstance(engine, EngineSpec):
        return engine
    text = engine.strip()
    if text.startswith(("http://", "https://")):
        return EngineSpec(server=text, model=model, api_key_env=api_key_env, n_ctx=n_ctx)
    return EngineSpec(model_path=text, n_ctx=n_ctx)


def open_simulator(
    engine: EngineInput,
    *,
    params: GenerationParams | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
) -> Simulator:
    """A simulator over ``engine`` (not loaded yet: the first step loads it). A server's
    engine is wrapped so that its transient failures are asked again (``retry``)."""
    if isinstance(engine, EngineSpec | str):
        try:
            made: Engine = make_engine(engine_spec(engine))
        except EngineError as exc:
            raise EnvError(str(exc)) from None
    else:
        made = engine
    if made.info.remote and not isinstance(made, RetryingEngine):
        made = RetryingEngine(made, retry)
    return Simulator(made, params, concurrency=concurrency)


_LOADING = threading.Lock()


def simulator_ready(simulator: Simulator) -> bool:
    """Whether the simulator's engine is loaded and usable (no load needed)."""
    engine = simulator.engine
    return engine is not None and engine.loaded and not simulator.engine_error


def load_simulator(simulator: Simulator) -> None:
    """Load the simulator's engine unless it is loaded; raises EnvError with the reason."""
    with _LOADING:
        if simulator_ready(simulator):
            return
        if simulator.engine is None:
            raise EnvError(simulator.problem() or "no model is configured")
        error = simulator.load_and_wait()
    if error:
        raise EnvError(error)


async def aload_simulator(simulator: Simulator) -> None:
    """``load_simulator`` for asyncio code: a load runs on a thread of its own."""
    if not simulator_ready(simulator):
        await asyncio.to_thread(load_simulator, simulator)


class Loaded:
    """A plan's wait for the simulator's engine to be loaded (``plans``)."""

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator

    def block(self) -> None:
        if not simulator_ready(self.simulator):
            load_simulator(self.simulator)

    async def wait(self) -> None:
        await aload_simulator(self.simulator)


class SharedSimulator:
    """A simulator and the environments that use it: the last owner to close closes it."""

    def __init__(self, simulator: Simulator, *, owned: bool) -> None:
        self.simulator = simulator
        self.owned = owned
        self.users = 1
        self._lock = threading.Lock()

    def join(self) -> SharedSimulator:
        with self._lock:
            self.users += 1
        return self

    def leave(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users == 0
        if last and self.owned:
            self.simulator.close()
