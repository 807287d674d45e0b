"""One model, many conversations: generations run one at a time, in the order asked for.

The engine lives on a single worker thread (llama.cpp contexts are not thread-safe, and a
model load must never block a front-end). Every local model decodes there, a judge's too:
llama.cpp's CPU threads come from OpenMP, which keeps a pool of them for each thread that
starts compute, and a second pool leaves more pool threads than cores, so that each of
them sleeps after a few spins at every barrier (the same model then decodes at a half or
less of its speed). Jobs report through callbacks called on that thread and read only
immutable snapshots: the world's state is never written here.

A model on a server decodes elsewhere: its generations run concurrently, up to
``concurrency`` at once on threads of their own, started in the order they were asked
for; the server does the batching. An in-process engine with several slots (xllamacpp)
is run the same way, up to its slots at once: it decodes on its own thread, which
batches them, and the threads here only wait for its chunks. A model load or switch
waits until they are done.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from agentworld_tui.engines.base import (
    Engine,
    EngineError,
    EngineEvent,
    Finished,
    GenerationControl,
    GenerationParams,
    GenerationStats,
)
from agentworld_tui.simulator.turn import TokenCounts, failed, generate
from agentworld_tui.world.session import Conversation

log = logging.getLogger("agentworld.queue")

EventSink = Callable[[EngineEvent], None]

WORKER_IDLE_S = 30.0
"""How long a thread kept for a server's generations waits for the next before it ends."""
EXIT_WAIT_S = 10.0
"""How long the interpreter's exit waits for an engine's thread to unload its model."""


@dataclass(eq=False)
class GenerationJob:
    """One turn's generation; its events go to ``sink`` from the engine thread."""

    owner: str
    """Who asked (a tab's title, an agent's connection), for the status line."""
    conversation: Conversation
    params: GenerationParams
    sink: EventSink
    control: GenerationControl = field(default_factory=GenerationControl)


@dataclass(eq=False)
class LoadJob:
    """Load the model (or replace the engine), reporting progress from the engine thread."""

    on_progress: Callable[[str], None]
    on_done: Callable[[str | None], None]
    """Called with None on success, else the error message."""
    engine: Engine | None = None
    """A new engine replacing the current one (which is unloaded first)."""


@dataclass(eq=False)
class CallJob:
    """Any other use of the loaded model (a judgement, say), in turn with the rest."""

    call: Callable[[Engine], object]
    on_done: Callable[[object, str | None], None]
    """Called with the result, or with None and the error message."""
    needs_model: bool = True
    """False for a call that brings its own model (a judge's): it runs with none loaded,
    and is handed the queue's engine, whatever its state, or None."""


class EngineQueue:
    def __init__(self, engine: Engine | None, *, concurrency: int = 8) -> None:
        self.engine = engine
        self.concurrency = max(1, concurrency)
        """Generations in flight at once on a server (an in-process engine runs as many as
        it has slots)."""
        self._jobs: queue.Queue[GenerationJob | LoadJob | CallJob | None] = queue.Queue()
        self._waiting: list[GenerationJob] = []
        self._running: list[GenerationJob] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._counts = TokenCounts()
        self._handed: queue.SimpleQueue[GenerationJob] = queue.SimpleQueue()
        """A server's generations on their way to a thread kept for them."""
        self._idle_workers = 0
        """Threads kept for a server's generations, waiting, none promised a job."""
        self._thread = threading.Thread(target=self._work, name="engine", daemon=True)
        self._thread.start()
        _OPEN.add(self)

    @property
    def running(self) -> GenerationJob | None:
        """The generation running (the first, when a server runs several)."""
        with self._lock:
            return self._running[0] if self._running else None

    def in_flight(self) -> int:
        with self._lock:
            return len(self._running)

    # -- asking ---------------------------------------------------------------------------
    def load(
        self, on_progress: Callable[[str], None], on_done: Callable[[str | None], None]
    ) -> None:
        self._jobs.put(LoadJob(on_progress, on_done))

    def switch(
        self,
        engine: Engine,
        on_progress: Callable[[str], None],
        on_done: Callable[[str | None], None],
    ) -> None:
        """Use another model from now on: generations already asked for finish on the old."""
        self._jobs.put(LoadJob(on_progress, on_done, engine))

    def call(self, job: CallJob) -> None:
        self._jobs.put(job)

    def submit(self, job: GenerationJob) -> None:
        with self._lock:
            self._waiting.append(job)
        self._jobs.put(job)

    def waiting(self) -> list[GenerationJob]:
        with self._lock:
            return list(self._waiting)

    def close(self) -> None:
        """Stop every generation, running or waiting, and end the worker."""
        with self._lock:
            for job in self._running + self._waiting:
                job.control.cancel()
        self._jobs.put(None)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker to end after ``close`` (the model unloaded)."""
        self._thread.join(timeout)

    # -- the worker -----------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            if isinstance(job, LoadJob):
                self._drain()
                self._load(job)
                continue
            if isinstance(job, CallJob):
                self._drain()
                self._call(job)
                continue
            limit = self.limit(self.engine)
            with self._idle:
                if limit > 1:  # a free slot first: they start in the order asked for
                    self._idle.wait_for(partial(self._room, limit))
                if job in self._waiting:
                    self._waiting.remove(job)
                self._running.append(job)
            if limit > 1:
                self._hand_out(job)
            else:
                self._run_one(job)
        self._drain()
        if self.engine is not None and self.engine.loaded:
            self.engine.unload()

    def _room(self, limit: int) -> bool:
        return len(self._running) < limit

    def limit(self, engine: Engine | None) -> int:
        """Generations ``engine`` runs at once: a server's ``concurrency``, an in-process
        engine's slots (one for llama-cpp-python)."""
        if engine is None:
            return 1
        info = engine.info
        return self.concurrency if info.remote else max(1, getattr(info, "parallel", 1))

    def _hand_out(self, job: GenerationJob) -> None:
        """Run a generation on a thread of its own (a server's, or one of an in-process
        engine's slots): an idle one kept from an earlier generation, or a new one
        (starting a thread costs more than a step's own work on a server that answers at
        once)."""
        with self._lock:
            spawn = self._idle_workers == 0
            if not spawn:
                self._idle_workers -= 1
        self._handed.put(job)
        if spawn:
            threading.Thread(target=self._serve_jobs, name="engine-remote", daemon=True).start()

    def _serve_jobs(self) -> None:
        """A server's generations, one after another, until none came for ``WORKER_IDLE_S``."""
        while True:
            try:
                job = self._handed.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle_workers > 0:  # none was promised to this thread: retire
                        self._idle_workers -= 1
                        return
                continue
            self._run_one(job)
            del job  # a thread waiting for work keeps no finished turn, nor its session
            with self._lock:
                self._idle_workers += 1

    def _run_one(self, job: GenerationJob) -> None:
        try:
            self._run(job)
        finally:
            with self._idle:
                self._running.remove(job)
                self._idle.notify_all()

    def _drain(self) -> None:
        """Wait until no generation runs (before a load, a call, or the end)."""
        with self._idle:
            self._idle.wait_for(lambda: not self._running)

    def _load(self, job: LoadJob) -> None:
        if job.engine is not None:
            if self.engine is not None and self.engine.loaded:
                self.engine.unload()
            self.engine = job.engine
            self._counts = TokenCounts()  # another tokenizer
        if self.engine is None:
            job.on_done("no model configured")
            return
        try:
            self.engine.load(job.on_progress)
        except EngineError as exc:
            job.on_done(str(exc))
        except Exception as exc:  # never let the worker die: report it instead
            log.exception("model load failed")
            job.on_done(f"could not load the model: {exc}")
        else:
            job.on_done(None)

    def _call(self, job: CallJob) -> None:
        if job.needs_model and (self.engine is None or not self.engine.loaded):
            job.on_done(None, "no model is loaded")
            return
        try:
            result = job.call(self.engine)  # type: ignore[arg-type]  # None: needs_model off
        except Exception as exc:  # reported, never fatal to the worker
            log.exception("engine call failed")
            job.on_done(None, str(exc))
        else:
            job.on_done(result, None)

    def _run(self, job: GenerationJob) -> None:
        if job.control.cancelled:
            job.sink(Finished("", "", False, GenerationStats(stop_reason="cancelled")))
            return
        if self.engine is None or not self.engine.loaded:
            job.sink(failed("no model is loaded"))
            return
        try:
            for event in generate(
                self.engine, job.conversation, job.params, job.control, self._counts
            ):
                job.sink(event)
        except Exception as exc:  # a bug must not kill the worker or lose the turn
            log.exception("turn failed")
            job.sink(failed(f"internal error: {exc}"))


_OPEN: weakref.WeakSet[EngineQueue] = weakref.WeakSet()


@atexit.register
def _unload_at_exit() -> None:
    """Let every engine's thread end before the process does. A model unloading on that
    thread while the process exits (``predict`` closes its simulator and returns at once)
    frees llama.cpp's objects as its own teardown runs: ggml then aborts, and asks gdb
    for a backtrace on stderr."""
    for engine_queue in list(_OPEN):
        engine_queue.close()
        engine_queue.join(EXIT_WAIT_S)
