"""Benchmark 7: the simulator as an environment for agents (issue 30).

1. Step overhead: the same turns through ``Environment.step`` and through the simulator
   service directly (``Simulator.send`` then ``TurnRun.wait``), on the same engine, the two
   sides alternating turn by turn over equal histories; the figure is the median of the
   paired differences, in ms. Engines: a scripted qwen2 GGUF in llama.cpp, and a server
   that answers at once (tests/slotserver.py).
2. Many environments against a server of fixed latency: a server with S slots that
   answers each request after L seconds (so at most S / L steps a second), and N
   environments (256) each stepping as fast as its answers come, all through one
   simulator (asyncio, ``Environment.astep``). Steps a second ÷ the server's limit, and
   the memory each environment adds (resident set size after the run, less before the
   environments were made, over N). The control: the same requests from a bare asyncio
   client that does nothing else, the most any Python client gets from this server here.
3. Forks on recurrent models: an episode of a few turns on a scripted mamba and a jamba
   (hybrid) model, forked K times; each fork's first step's evaluated prompt tokens ÷ the
   tokens of its own turn (the prompt after the history it shares).

    python bench/env.py            # ~1 min
    python bench/env.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, summarize, verdict
from models import TESTS, recurrent_model, scripted_model

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from slotserver import SlotServer

from agentworld_tui.agents.env import Environment, open_simulator
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.world.session import new_session

GREEDY = GenerationParams(temperature=0.0, max_tokens=256)
THROUGHPUT_TARGET = 0.95
FORK_TARGET = 1.1


# -- 1. step overhead ----------------------------------------------------------------------
def step_overhead(engine: object, turns: int, rounds: int) -> list[float]:
    """Paired differences (API − simulator) in ms, one per turn. The two sides are two
    conversations of equal length (their actions differ in one letter), so a local model
    reads as much for either."""
    simulator = open_simulator(engine, params=GREEDY, concurrency=1)  # type: ignore[arg-type]
    env = Environment("terminal", simulator=simulator, params=GREEDY)
    differences: list[float] = []
    try:
        for _ in range(rounds):
            env.reset()
            session, _problems = new_session(env.domain, env.scenario)
            for n in range(turns):
                pair = []
                for side in ("simulator", "api") if n % 2 else ("api", "simulator"):
                    gc.collect()
                    started = time.perf_counter()
                    if side == "api":
                        env.step(f"echo a{n}\n")
                    else:
                        made = env.domain.parse_action(f"echo b{n}\n", session.scenario)
                        simulator.send(session, made, params=GREEDY).wait()
                    pair.append((side, time.perf_counter() - started))
                took = dict(pair)
                differences.append((took["api"] - took["simulator"]) * 1000)
    finally:
        env.close()
        simulator.close()
    return differences


# -- 2. many environments against a server ---------------------------------------------------
def resident_kib() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class ServerProcess:
    """tests/slotserver.py in a process of its own, so that the server's work does not
    share the benchmark's interpreter (a real server runs elsewhere)."""

    def __init__(self, slots: int, latency: float) -> None:
        self.limit = slots / latency
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "slotserver.py"), "--slots", str(slots),
             "--latency", str(latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def stats(self) -> dict[str, int]:
        import json
        import urllib.request

        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats", timeout=10) as reply:
            data: dict[str, int] = json.loads(reply.read())
        return data

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def throughput(
    size: int, slots: int, latency: float, steps: int
) -> tuple[float, float, float, int]:
    """(steps a second, the server's limit, KiB per environment, the most in flight)."""
    server = ServerProcess(slots, latency)
    try:
        gc.collect()
        before = resident_kib()
        simulator = open_simulator(server.url, concurrency=size)
        envs = [Environment("terminal", simulator=simulator) for _ in range(size)]

        async def play() -> float:
            for env in envs:
                await env.areset()
            await envs[0].astep("true\n")  # the first request's set-up, outside the timing

            async def episode(env: Environment) -> None:
                for n in range(steps):
                    await env.astep(f"echo {n}\n")

            started = time.perf_counter()
            await asyncio.gather(*(episode(env) for env in envs))
            return time.perf_counter() - started

        try:
            elapsed = asyncio.run(play())
            gc.collect()
            grown = resident_kib() - before
        finally:
            for env in envs:
                env.close()
            simulator.close()
        in_flight = server.stats()["max_in_flight"]
    finally:
        server.close()
    return size * steps / elapsed, server.limit, grown / size, in_flight


def bare_client(size: int, slots: int, latency: float, steps: int) -> float:
    """The control for 2: the same requests from a bare asyncio client (one connection a
    request, the answer read whole and its events parsed, nothing else), as a fraction of
    the server's limit. What this machine and this server allow any Python client."""
    import json
    from urllib.parse import urlsplit

    server = ServerProcess(slots, latency)
    try:
        where = urlsplit(server.url)
        host, port = where.hostname or "127.0.0.1", where.port or 80
        body = json.dumps(
            {"model": "slot-model", "stream": True,
             "messages": [{"role": "user", "content": "echo 1"}]}
        ).encode()  # fmt: skip
        head = (
            f"POST {where.path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()

        async def request() -> None:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(head + body)
            await writer.drain()
            for line in (await reader.read()).split(b"\n"):
                if line.startswith(b"data: {"):
                    json.loads(line[6:])
            writer.close()

        async def play() -> float:
            async def episode() -> None:
                for _ in range(steps):
                    await request()

            started = time.perf_counter()
            await asyncio.gather(*(episode() for _ in range(size)))
            return time.perf_counter() - started

        elapsed = asyncio.run(play())
        return size * steps / elapsed / server.limit
    finally:
        server.close()


# -- 3. forks on recurrent models ----------------------------------------------------------------
def fork_ratios(path: Path, history: int, forks: int) -> list[float]:
    """Each fork's first step: evaluated prompt tokens ÷ the tokens of its prompt that the
    model never read (those after the parent's last prompt: the parent's last observation,
    which the model generated but never read as history, and the fork's own turn)."""
    import numpy as np
    from test_engine_llama import rendered, tokenizer

    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.engines.prefix import common_prefix

    tokenize = tokenizer(path)
    engine = LlamaEngine(path, n_ctx=8192, threads=1)
    engine.load()
    env = Environment("terminal", engine=engine, params=GREEDY)

    def prompt(of: Environment) -> list[int]:
        return tokenize(rendered(of.session.prompt(of.session.turns[-1]).messages))

    ratios: list[float] = []
    try:
        env.reset()
        for n in range(history):
            env.step(f"cat notes-{n}.txt\n")
        read = np.asarray(prompt(env))
        group = [env.fork() for _ in range(forks)]
        for i, fork in enumerate(group):
            step = fork.step(f"echo fork-{i}\n")
            now = np.asarray(prompt(fork))
            new = len(now) - common_prefix(now, read)
            ratios.append(step.cost.evaluated_prompt_tokens / new)
            fork.close()
    finally:
        env.close()
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--slots", type=int, default=256)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--steps", type=int, default=5, help="steps per environment")
    args = parser.parse_args()
    if args.quick:
        args.envs, args.slots, args.latency, args.steps = 16, 16, 0.2, 2
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as folder:
        models = Path(folder)
        turns, rounds = (4, 1) if args.quick else (10, 6)
        from agentworld_tui.engines.llama import LlamaEngine

        local = LlamaEngine(scripted_model(models), n_ctx=8192, threads=1)
        local.load()
        overhead = summarize(step_overhead(local, turns, rounds))
        print(
            f"1. step overhead, scripted qwen2 (local)  median {overhead.median:.3f} ms  "
            f"[{overhead.low:.3f} .. {overhead.high:.3f}] over {overhead.n} paired turns"
        )
        with SlotServer(slots=1, latency=0.0) as server:
            remote = summarize(step_overhead(server.url, turns, rounds))
        print(
            f"   step overhead, server answering at once  median {remote.median:.3f} ms  "
            f"[{remote.low:.3f} .. {remote.high:.3f}] over {remote.n} paired turns"
        )

        configs = [(args.slots, args.latency)]
        if not args.quick:
            configs.append((64, 0.5))  # fewer slots than environments: the server queues
        for slots, latency in configs:
            rate, limit, kib, in_flight = throughput(args.envs, slots, latency, args.steps)
            fraction = rate / limit
            print(
                f"2. {args.envs} environments, server of {slots} slots x {latency:g} s: "
                f"{rate:.1f} steps/s of {limit:.1f}  fraction {fraction:.3f}  "
                f"({verdict(fraction >= THROUGHPUT_TARGET)} {THROUGHPUT_TARGET})"
            )
            print(
                f"   requests in flight at most {in_flight}; memory per environment {kib:.1f} KiB"
            )
            control = bare_client(args.envs, slots, latency, args.steps)
            print(
                f"   control: a bare asyncio client, the same requests: fraction {control:.3f} "
                f"(the environments reach {fraction / control:.3f} of it)"
            )

        history, forks = (2, 2) if args.quick else (4, 8)
        for kind, path in (
            ("mamba", recurrent_model(models)),
            ("jamba", _jamba(models)),
        ):
            ratios = fork_ratios(path, history, forks)
            worst = max(ratios)
            print(
                f"3. forks of a {kind} episode ({history} turns, {forks} forks): evaluated ÷ new "
                f"median {statistics.median(ratios):.3f}  max {worst:.3f}  "
                f"({verdict(worst <= FORK_TARGET)} {FORK_TARGET})"
            )
    return 0


def _jamba(folder: Path) -> Path:
    from ggufgen import write_recurrent_model
    from models import turn_script

    path = folder / "scripted-jamba.gguf"
    if not path.exists():
        write_recurrent_model(path, turn_script(), hybrid=True, n_layer=4, n_ctx_train=32768)
    return path


if __name__ == "__main__":
    sys.exit(main())
