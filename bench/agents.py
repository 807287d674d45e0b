"""Benchmark 9: many agents on one machine (issue 43).

1. Throughput: N environments (1, 4, 8, 16) step at once through one simulator
   (``Environment.astep``), each for a few steps of exactly ``--tokens`` generated tokens
   (a random-weight model that never ends on its own). Aggregate generated tokens a second
   on four engines, one after the other in one run, on the same F32 model (F32: the
   native llama-cpp-python build crashes on quantized models on this AMX CPU):
   xllamacpp in-process (``--slots`` slots, continuous batching), llama-cpp-python
   in-process (one generation at a time, the others queued), ``python -m
   llama_cpp.server`` and xllamacpp's HTTP server as remote engines. Ratios against
   llama-cpp-python queued at the same N.
2. History read twice: evaluated ÷ new prompt tokens (the engines' own counters) on each
   in-process engine, transformer (qwen2) and hybrid (qwen35moe) scripted models: turns
   2..10; each turn after a switch between two conversations; a fork's first turn and the
   branches' turns after it; a retry (evaluated ÷ the generation prompt, the least a retry
   reads); and successive ``agentworld predict --session`` calls (real processes), with
   the state file and without it.

    python bench/agents.py --quick                       # small sizes, a minute or two
    python bench/agents.py                               # 100M model, N = 1, 4, 8, 16
    python bench/agents.py --size 1b --gpu-layers -1     # on a GPU (bench/gpu.sh)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, verdict
from models import TESTS, random_model

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from agentworld_tui.agents.env import Environment, open_simulator
from agentworld_tui.engines.base import GenerationParams

SPEEDUP_TARGET = 2.0
"""xllamacpp against llama-cpp-python queued, at 4 environments."""
RATIO_TARGET = 1.1
ENGINES = ("xllamacpp", "llama-cpp-python", "llama_cpp.server", "xllamacpp server")


# -- 1. throughput ---------------------------------------------------------------------------
def local_engine(kind: str, model: Path, args: argparse.Namespace) -> Any:
    if kind == "xllamacpp":
        from agentworld_tui.engines.xllamacpp import XLlamaEngine

        return XLlamaEngine(
            model, n_ctx=args.ctx, threads=args.threads, slots=args.slots,
            gpu_layers=args.gpu_layers,
        )  # fmt: skip
    from agentworld_tui.engines.llama import LlamaEngine

    return LlamaEngine(model, n_ctx=args.ctx, threads=args.threads, gpu_layers=args.gpu_layers)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RemoteServer:
    """A server process on 127.0.0.1, stopped on close."""

    def __init__(self, kind: str, model: Path, args: argparse.Namespace) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        if kind == "llama_cpp.server":
            port = free_port()
            command = [
                sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(args.ctx),
                "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
                "--n_gpu_layers", str(args.gpu_layers), "--interrupt_requests", "False", "--cache", "True",
            ]  # fmt: skip
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=self.log, stderr=self.log
            )
            self.url = f"http://127.0.0.1:{port}/v1"
        else:
            command = [
                sys.executable, str(Path(__file__).with_name("xllama_server.py")), str(model),
                "--slots", str(args.slots), "--threads", str(args.threads),
                "--ctx", str(args.ctx), "--gpu-layers", str(args.gpu_layers),
            ]  # fmt: skip
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
            )
            assert self.process.stdout is not None
            self.url = self.process.stdout.readline().strip()
        self._wait()

    def _wait(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"the server ended: {self.log.read()[-2000:]!r}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=5):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("the server did not start")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(30)
        self.log.close()


def run_environments(
    engine: Any, sizes: list[int], args: argparse.Namespace, concurrency: int = 0
) -> dict[int, float]:
    """Aggregate generated tokens a second for each number of environments (the
    simulator sends at most ``concurrency`` requests at once; 0: one per environment)."""
    # Sampled, not greedy: a random model's most likely token can be one that prints
    # nothing, and a server then sends no text at all.
    params = GenerationParams(
        temperature=1.0, top_p=1.0, top_k=40, seed=7, max_tokens=args.tokens,
        enable_thinking=False,
    )  # fmt: skip
    simulator = open_simulator(engine, params=params, concurrency=concurrency or max(sizes))
    rates: dict[int, float] = {}
    try:
        warm = Environment("terminal", simulator=simulator, params=params)
        warm.reset()
        if warm.step("true\n").failed:  # the load, outside the timing
            raise RuntimeError(f"the engine failed: {simulator.engine_error}")
        warm.close()
        for size in sizes:
            envs = [
                Environment("terminal", simulator=simulator, params=params) for _ in range(size)
            ]

            async def play(envs: list[Environment] = envs) -> tuple[int, float]:
                for env in envs:
                    await env.areset()

                async def episode(env: Environment, index: int, steps: int) -> int:
                    made = 0
                    for n in range(steps):
                        step = await env.astep(f"echo {index}-{n}\n")
                        if step.failed:
                            raise RuntimeError(f"a step failed: {step.observation.text[:200]!r}")
                        # A server that streams text, not tokens, is counted by its
                        # stop: the model never ends, so a step at its limit made them all.
                        at_limit = step.note.startswith("the answer reached the token limit")
                        made += args.tokens if at_limit else step.cost.generated_tokens
                    return made

                # Each reads the domain's system prompt once, outside the timing: what is
                # timed is an agent's loop, its action read and the observation generated.
                await asyncio.gather(*(episode(env, i, 1) for i, env in enumerate(envs)))
                started = time.perf_counter()
                made = await asyncio.gather(
                    *(episode(env, i, args.steps) for i, env in enumerate(envs))
                )
                return sum(made), time.perf_counter() - started

            try:
                generated, elapsed = asyncio.run(play())
            finally:
                for env in envs:
                    env.close()
            expected = size * args.steps * args.tokens
            if generated != expected:
                print(f"   note: {generated} tokens generated of {expected} asked")
            rates[size] = generated / elapsed
    finally:
        simulator.close()
    return rates


def throughput(model: Path, args: argparse.Namespace) -> None:
    sizes = [int(n) for n in args.envs.split(",")]
    table: dict[str, dict[int, float]] = {}
    for kind in args.engines.split(","):
        started = time.perf_counter()
        if kind in ("xllamacpp", "llama-cpp-python"):
            table[kind] = run_environments(local_engine(kind, model, args), sizes, args)
        else:
            server = RemoteServer(kind, model, args)
            # llama_cpp.server answers one request at a time, and several streams sent at
            # once fail there (UnboundLocalError in the server): they queue here instead.
            one_at_a_time = 1 if kind == "llama_cpp.server" else 0
            try:
                table[kind] = run_environments(server.url, sizes, args, one_at_a_time)
            finally:
                server.close()
        took = time.perf_counter() - started
        rates = "  ".join(f"{n}: {table[kind][n]:7.1f}" for n in sizes)
        print(f"   {kind:18} tokens/s  {rates}   ({took:.0f} s)", flush=True)
    base = table.get("llama-cpp-python")
    if base is None:
        return
    print("   ratio to llama-cpp-python queued, by environments:")
    for kind, rates in table.items():
        if kind == "llama-cpp-python":
            continue
        ratios = "  ".join(f"{n}: {rates[n] / base[n]:6.2f}x" for n in sizes)
        print(f"   {kind:18} {ratios}")
    if "xllamacpp" in table and 4 in sizes:
        speedup = table["xllamacpp"][4] / base[4]
        print(
            f"   xllamacpp at 4 environments: {speedup:.2f}x "
            f"({verdict(speedup >= SPEEDUP_TARGET)} {SPEEDUP_TARGET}x)"
        )


def bare_decode(model: Path, sizes: list[int], args: argparse.Namespace) -> None:
    """The control for 1: xllamacpp's server alone, N requests at once with one-token
    prompts, so that only decoding is timed (no simulator, no prompt to read): what
    batching itself gives on this model and machine."""
    import threading

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_parallel = max(sizes)
    params.n_ctx = 512 * max(sizes)
    params.kv_unified = False
    params.n_gpu_layers = args.gpu_layers
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames, params.port, params.warmup, params.verbosity = ["127.0.0.1"], 0, False, 0
    server = xllamacpp.Server(params)
    rates = {}
    for size in sizes:

        def one(i: int, size: int = size) -> None:
            body = {"prompt": [i + 1], "id_slot": i, "max_tokens": args.tokens,
                    "temperature": 1.0, "seed": i, "cache_prompt": False}  # fmt: skip
            server.handle_completions(body, lambda _chunk: False)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(size)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rates[size] = size * args.tokens / (time.perf_counter() - started)
    shown = "  ".join(f"{n}: {rates[n]:7.1f}" for n in sizes)
    ratios = "  ".join(f"{n}: {rates[n] / rates[sizes[0]]:5.2f}x" for n in sizes)
    print(f"   control: xllamacpp's server alone, decoding only: tokens/s  {shown}")
    print(f"   {'':9}against one stream  {ratios}")


# -- 2. history read twice ---------------------------------------------------------------------
def scripted(kind: str, folder: Path) -> Path:
    from ggufgen import write_qwen35moe_model, write_scripted_model
    from test_engine_llama import SCRIPT

    path = folder / f"scripted-{kind}.gguf"
    if not path.exists():
        (write_qwen35moe_model if kind == "qwen35moe" else write_scripted_model)(path, SCRIPT)
    return path


def loaded(kind: str, path: Path, slots: int = 2) -> Any:
    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.engines.xllamacpp import XLlamaEngine

    if kind == "xllamacpp":
        engine: Any = XLlamaEngine(path, n_ctx=8192, threads=1, slots=slots)
    else:
        engine = LlamaEngine(path, n_ctx=8192, threads=1)
    engine.load()
    return engine


def history_ratios(engine_kind: str, path: Path) -> dict[str, str]:
    import numpy as np
    from test_conversation_states import history_text, ratio, ratio_since_branch_prompt
    from test_engine_llama import DOMAIN, SCENARIO
    from test_hybrid_checkpoints import Player

    from agentworld_tui.engines.prefix import common_prefix

    found: dict[str, str] = {}
    engine = loaded(engine_kind, path)
    try:
        player = Player(engine)
        turns = []
        for n in range(10):
            player.action(f"cat notes-{n}.txt")
            if n:
                turns.append(ratio(player))
        found["turns 2..10"] = f"max {max(turns):.3f}"
        done = player.play(player.session.regenerate())
        found["retry"] = (
            f"{done.stats.evaluated_prompt_tokens} of gen. prompt {player.generation_prompt()}"
        )
        first, second = Player(engine), Player(engine)
        switches = []
        for n in range(4):
            for who, action in ((first, f"cat notes-{n}.txt"), (second, f"ls -la folder-{n}")):
                who.action(action)
                if n:
                    switches.append(ratio(who))
        found["tab switch"] = f"max {max(switches):.3f}"
        player = Player(engine)
        for n in range(3):
            player.action(f"cat notes-{n}.txt")
        session = player.session
        base = session.branch_id
        player.action("ls -la")
        done = player.play(session.fork(len(session.turns), DOMAIN.parse_action("pwd", SCENARIO)))
        branch = session.branch_id
        prompt = np.asarray(player.prompts[-1])
        history = np.asarray(player.tokenize(history_text(player.texts[-1])))
        new = len(prompt) - common_prefix(prompt, history)
        branches = []
        for n in range(3):
            for which in (base, branch):
                session.switch_branch(which)
                player.action(f"echo {which}-{n}")
                branches.append(ratio_since_branch_prompt(player, which))
        found["fork"] = (
            f"first turn {done.stats.evaluated_prompt_tokens / new:.3f}, "
            f"branch turns max {max(branches):.3f}"
        )
    finally:
        engine.unload()
    return found


def predict_ratios(engine_kind: str, path: Path, calls: int, keep: bool) -> list[float]:
    """Successive ``agentworld predict --session`` calls, each a process of its own."""
    import numpy as np
    from test_engine_llama import rendered, tokenizer

    from agentworld_tui.engines.prefix import common_prefix
    from agentworld_tui.engines.state_file import state_path
    from agentworld_tui.world.workspace import open_or_new

    with tempfile.TemporaryDirectory() as folder:
        session = Path(folder) / "run.json"
        env = {**os.environ, "AGENTWORLD_CONFIG_DIR": folder + "/config",
               "AGENTWORLD_DATA_DIR": folder + "/data", "HF_HUB_OFFLINE": "1"}  # fmt: skip
        evaluated = []
        for n in range(calls):
            if not keep:
                state_path(session).unlink(missing_ok=True)
            result = subprocess.run(
                [sys.executable, "-m", "agentworld_tui", "predict", "--model", str(path),
                 "--engine", engine_kind, "--threads", "1", "--ctx", "8192",
                 "--temperature", "0", "--json", "--session", str(session),
                 f"cat notes-{n}.txt"],
                capture_output=True, text=True, env=env, check=False, timeout=300,
            )  # fmt: skip
            if result.returncode:
                raise RuntimeError(result.stderr)
            evaluated.append(json.loads(result.stdout)["stats"]["evaluated_prompt_tokens"])
        played = open_or_new(session, hold=False).tab_for("terminal")
        assert played is not None
        tokenize = tokenizer(path)
        prompts = [np.asarray(tokenize(rendered(played.prompt(t).messages))) for t in played.turns]
    return [
        evaluated[n] / (len(prompts[n]) - common_prefix(prompts[n], prompts[n - 1]))
        for n in range(1, calls)
    ]


def history(args: argparse.Namespace, folder: Path) -> None:
    for kind in ("qwen2", "qwen35moe"):
        path = scripted(kind, folder)
        for engine_kind in ("llama-cpp-python", "xllamacpp"):
            found = history_ratios(engine_kind, path)
            with_file = predict_ratios(engine_kind, path, args.calls, keep=True)
            without = predict_ratios(engine_kind, path, args.calls, keep=False)
            parts = "; ".join(f"{k} {v}" for k, v in found.items())
            print(f"   {kind:9} {engine_kind:16} {parts}")
            print(
                f"   {'':9} {'':16} predict --session calls 2..{args.calls}: with the state "
                f"file max {max(with_file):.3f}, without {statistics.median(without):.2f} "
                f"({verdict(max(with_file) <= RATIO_TARGET)} {RATIO_TARGET})"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--size", default="100m", help="random model: tiny, 100m or 1b")
    parser.add_argument("--envs", default="1,4,8,16")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--steps", type=int, default=2, help="steps per environment")
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated a step")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--slots", type=int, default=16, help="xllamacpp's slots")
    parser.add_argument("--ctx", type=int, default=4096, help="context of each conversation")
    parser.add_argument("--gpu-layers", type=int, default=0)
    parser.add_argument("--calls", type=int, default=4, help="predict --session calls")
    parser.add_argument("--models", type=Path, help="where generated models are kept")
    parser.add_argument("--skip", default="", help="throughput or history")
    args = parser.parse_args()
    if args.quick:
        args.size, args.envs, args.steps, args.tokens, args.calls = "tiny", "1,4", 1, 16, 3
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.models or Path(scratch)
        if "throughput" not in args.skip:
            model = random_model(folder, size=args.size, f32=True)
            print(
                f"1. aggregate generated tokens/s, {args.size} F32 random model, "
                f"{args.steps} steps x {args.tokens} tokens per environment, "
                f"{args.threads} threads, gpu layers {args.gpu_layers}, xllamacpp "
                f"{args.slots} slots",
                flush=True,
            )
            throughput(model, args)
            bare_decode(model, [int(n) for n in args.envs.split(",")], args)
        if "history" not in args.skip:
            print("2. evaluated / new prompt tokens (engines' own counters)", flush=True)
            history(args, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
