"""Benchmark 7, hostile part (issue 38): ``agentworld env serve`` beside a hostile client,
and after many abandoned sessions.

1. Hostile. 256 OpenEnv sessions over WebSockets (in a process of their own) step in a
   closed loop against ``env serve`` (the real command, in a process of its own), whose
   world model is an OpenAI-compatible server of fixed latency (``tests/slotserver.py``:
   a slot for every request, each answered after ``--latency`` seconds). Their steady
   steps a second alone, then beside one more session that sends, in a closed loop, the
   costliest action its domain still takes:

   - MCP domain, a tool whose schema has ``"pattern": "^(a|aa)+$"``: 80 ``a``s and a
     ``!`` (the check backtracks until its 2 s run out; refused);
   - MCP domain, the same tool's ``"uniqueItems": true`` array: the most distinct objects
     the 200,000-character limit of a call lets through (accepted: a 200 KB turn);
   - terminal domain: the longest keystroke entry list the 200,000-character limit of a
     JSON action lets through, ``["a","a",...]`` (49,999 entries of one keystroke each,
     accepted: each entry becomes ``{"keystrokes": "a", "duration": 1.0}`` in the turn).

   An accepted hostile action is sent on a fresh episode each time (reset, then step), so
   each costs one turn rather than a history that grows to a model's context.
   Printed: the others' steps a second beside it ÷ alone (the same server, run after run;
   alone first and last, the mean of the two the reference).
2. Soak. 1,000 WebSocket sessions opened, reset, stepped once and dropped without a close
   (the client's process ends: its sockets close with no close frame), 50 at a time; then
   1,000 left open and silent by a client that never closes them (an ``EnvClient``
   dropped without ``close()`` keeps its connection and answers pings), until ``env serve
   --session-idle-timeout`` closes them; two rounds. The server's descriptors and resident
   memory (``/proc``) before, after the dropped ones, while the kept ones are open, and
   once the server closed them.

    python bench/env_hostile.py                  # both, ~10 min
    python bench/env_hostile.py --only hostile   # 7 runs of 60 s (~8 min)
    python bench/env_hostile.py --only soak      # 2 rounds (~3 min)
    python bench/env_hostile.py --quick          # ~1 min
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import HOSTILE_TOOLS, machine, verdict  # noqa: E402

# bench/mcp.py has the SDK's package name: this folder must not stand before the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

RATE_TARGET = 0.95
TOOLS = HOSTILE_TOOLS
PLAIN = {
    "mcp": {"name": "read_note", "arguments": {"title": "groceries"}},
    "terminal": "ls -la\n",
}
KINDS = {
    "pattern": ("mcp", "^(a|aa)+$ on 81 characters (refused after 2 s)"),
    "unique": ("mcp", "the most distinct objects under uniqueItems (accepted)"),
    "keystrokes": ("terminal", "49,999 one-key entries (accepted)"),
}


def hostile_action(kind: str) -> Any:
    """The costliest action of ``kind`` that the domain still takes (or, for ``pattern``,
    still spends its whole check on)."""
    if kind == "pattern":
        return {"name": "lookup", "arguments": {"name": "a" * 80 + "!"}}
    if kind == "unique":

        def call(n: int) -> dict[str, Any]:
            rows = [{"i": i, "k": [i, "x"]} for i in range(n)]
            return {"name": "lookup", "arguments": {"rows": rows}}

        low, high = 1, 20_000  # the most rows whose call, as the server writes it, fits
        while low < high:
            middle = (low + high + 1) // 2
            fits = len(json.dumps(call(middle), ensure_ascii=False)) <= 200_000
            low, high = (middle, high) if fits else (low, middle - 1)
        return call(low)
    if kind == "keystrokes":
        entries = (200_000 - 1) // 4  # '["a",' ... '"a"]': 4 characters an entry
        return "[" + ",".join(['"a"'] * entries) + "]"
    raise ValueError(kind)


# -- the processes -------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WorldModel:
    """tests/slotserver.py in a process of its own: ``slots`` requests at once, each
    answered after ``latency`` seconds."""

    def __init__(self, slots: int, latency: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "slotserver.py"), "--slots", str(slots),
             "--latency", str(latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


class EnvServe:
    """``agentworld env serve`` in a process of its own, its figures read from /proc."""

    def __init__(self, world_model: str, domain: str, folder: Path, *flags: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.ws = f"ws://127.0.0.1:{port}/ws"
        self.log = folder / f"env-serve-{port}.txt"
        scenario = folder / "tools.json"
        scenario.write_text(json.dumps(TOOLS), encoding="utf-8")
        here = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AGENTWORLD_CONFIG_DIR": str(folder / "config"),
            "AGENTWORLD_DATA_DIR": str(folder / "data"),
        }
        with self.log.open("w", encoding="utf-8") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "agentworld_tui", "env", "serve", "--server", world_model,
                 "--domain", domain, *(["--scenario", str(scenario)] if domain == "mcp" else []),
                 "--port", str(port), *flags],
                stdout=sink, stderr=subprocess.STDOUT, env=here,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"env serve ended: {self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def resident_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


# -- 1. beside a hostile session -----------------------------------------------------------
SESSIONS = """
import asyncio, json, sys, time
import aiohttp

async def session(http, url, action, start, until, stamps, failures):
    await asyncio.sleep(start)
    async with http.ws_connect(url, max_msg_size=0, timeout=aiohttp.ClientWSTimeout(ws_close=10)) as ws:
        await ws.send_json({"type": "reset", "data": {}})
        await ws.receive_json()
        while time.monotonic() < until:
            await ws.send_json({"type": "step", "data": {"action": action}})
            reply = await ws.receive_json()
            if reply.get("type") != "observation" or reply["data"]["observation"]["status"] != "complete":
                failures.append(str(reply)[:300])
            stamps.append(time.monotonic())
        await ws.send_json({"type": "close", "data": {}})

async def main(url, count, seconds, spread, action):
    until = time.monotonic() + seconds
    stamps = [[] for _ in range(count)]
    failures = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        await asyncio.gather(*(
            session(http, url, action, spread * i / count, until, mine, failures)
            for i, mine in enumerate(stamps)
        ))
    print(json.dumps({"stamps": stamps, "failures": failures[:5], "failed": len(failures)}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]),
                 json.loads(sys.argv[5])))
"""

HOSTILE = """
import asyncio, json, sys, time
import aiohttp

async def main(url, seconds, action, fresh):
    until = time.monotonic() + seconds
    calls = refused = 0
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, max_msg_size=0) as ws:
            if not fresh:
                await ws.send_json({"type": "reset", "data": {}})
                await ws.receive_json()
            while time.monotonic() < until:
                if fresh:  # one turn an episode: the hostile turn, never a long history
                    await ws.send_json({"type": "reset", "data": {}})
                    await ws.receive_json()
                await ws.send_json({"type": "step", "data": {"action": action}})
                reply = await ws.receive_json()
                calls += 1
                refused += reply.get("type") != "observation" or (
                    reply["data"]["observation"]["status"] == "refused")
            await ws.send_json({"type": "close", "data": {}})
    print(json.dumps([calls, refused]))

asyncio.run(main(sys.argv[1], float(sys.argv[2]), json.load(sys.stdin), sys.argv[3] == "1"))
"""


def steady_rate(stamps: list[list[float]], skip: float) -> float:
    """Each session's steps a second between its answers after ``skip`` seconds from its
    first, summed over the sessions (no session's start or end is counted)."""
    total = 0.0
    for mine in stamps:
        kept = [t for t in mine if t >= mine[0] + skip] if mine else []
        if len(kept) >= 2:
            total += (len(kept) - 1) / (kept[-1] - kept[0])
    return total


@dataclass
class Run:
    kind: str
    rate: float
    failed: int
    hostile: str


def beside_a_hostile_session(
    domain: str, kinds: list[str], count: int, latency: float, seconds: float, folder: Path
) -> list[Run]:
    """The sessions' steady rate alone, then beside each hostile kind, in one server."""
    world = WorldModel(count + 8, latency)
    served = EnvServe(
        world.url, domain, folder,
        "--max-sessions", str(count + 8), "--concurrency", str(count + 8),
    )  # fmt: skip
    runs: list[Run] = []
    try:
        plain = json.dumps(PLAIN[domain])
        for kind in ["alone", *kinds, "alone"]:  # alone first and last: the drift shows
            sessions = subprocess.Popen(
                [sys.executable, "-c", SESSIONS, served.ws, str(count), str(seconds),
                 str(latency), plain],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            hostile = None
            if kind != "alone":
                fresh = "0" if kind == "pattern" else "1"
                hostile = subprocess.Popen(
                    [sys.executable, "-c", HOSTILE, served.ws, str(seconds), fresh],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                assert hostile.stdin is not None
                hostile.stdin.write(json.dumps(hostile_action(kind)))
                hostile.stdin.close()
            out, _ = sessions.communicate()
            said = ""
            if hostile is not None:
                assert hostile.stdout is not None
                calls, refused = json.loads(hostile.stdout.read())
                hostile.wait(30)
                said = f"{calls} hostile steps, {refused} refused"
            got = json.loads(out)
            rate = steady_rate(got["stamps"], 2 * latency)
            runs.append(Run(kind, rate, got["failed"], said))
            for failure in got["failures"]:
                print(f"   (a failed step: {failure})")
    finally:
        served.close()
        world.close()
    return runs


# -- 2. abandoned sessions -----------------------------------------------------------------
DROPPED = """
import asyncio, json, os, sys
import aiohttp

HELD = []  # every connection stays referenced (aiohttp closes one it collects)

async def one(http, url, action):
    ws = await http.ws_connect(url, max_msg_size=0)
    HELD.append(ws)
    await ws.send_json({"type": "reset", "data": {}})
    await ws.receive_json()
    await ws.send_json({"type": "step", "data": {"action": action}})
    reply = await ws.receive_json()
    return reply.get("type") == "observation"

async def main(url, count, action, keep):
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    done = await asyncio.gather(*(one(http, url, action) for _ in range(count)),
                                return_exceptions=True)
    print(json.dumps([d is True for d in done]), flush=True)
    if keep:  # silent until told (stdin closes), reading as a client library's task does
        readers = [asyncio.ensure_future(ws.receive()) for ws in HELD]
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    os._exit(0)  # no close frame, no close message: the sockets just go

asyncio.run(main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4] == "1"))
"""


def settle(served: EnvServe, below: int, seconds: float) -> int:
    """The server's descriptors once they fall to ``below`` or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while (now := served.descriptors()) > below and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def abandoned_sessions(
    count: int, kept: int, idle: float, rounds: int, folder: Path, batch: int = 50
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The server's descriptors and resident memory (KiB) before, then for each round:
    after ``count`` sessions dropped without a close, while ``kept`` more are open and
    silent, and once their idle time closed them. Memory a leak held would grow round by
    round; the allocator's arenas, kept once grown, do not."""
    world = WorldModel(batch + 8, 0.0)
    served = EnvServe(
        world.url, "terminal", folder, "--concurrency", str(batch + 8),
        "--max-sessions", str(max(kept, batch) + 8), "--session-idle-timeout", f"{idle:g}",
    )  # fmt: skip
    plain = json.dumps(PLAIN["terminal"])

    def sessions(n: int, keep: bool) -> tuple[subprocess.Popen[str], list[bool]]:
        process = subprocess.Popen(
            [sys.executable, "-c", DROPPED, served.ws, str(n), plain, "1" if keep else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stdout is not None
        return process, json.loads(process.stdout.readline())

    rows: list[dict[str, Any]] = []
    try:
        warm, _ = sessions(20, False)
        warm.wait(60)
        start = settle(served, 0, 3)
        before = {"fds": start, "rss": served.resident_kib()}
        for _round in range(rounds):
            row: dict[str, Any] = {"stepped": 0}
            for first in range(0, count, batch):
                process, done = sessions(min(batch, count - first), False)
                process.wait(60)
                row["stepped"] += sum(done)
            row.update(fds_dropped=settle(served, start, 10), rss_dropped=served.resident_kib())
            if kept:
                holder, done = sessions(kept, True)
                row.update(
                    kept_stepped=sum(done),
                    fds_kept=served.descriptors(),
                    rss_kept=served.resident_kib(),
                )
                began = time.monotonic()
                row["fds_expired"] = settle(served, start, idle * 3 + 30)
                row["expired_after"] = time.monotonic() - began
                row["rss_expired"] = served.resident_kib()
                assert holder.stdin is not None
                holder.stdin.close()
                holder.wait(30)
            rows.append(row)
    finally:
        served.close()
        world.close()
    return before, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, tiny counts")
    parser.add_argument("--only", choices=("hostile", "soak"), help="run one part")
    parser.add_argument("--sessions", type=int, default=256, help="sessions stepping (hostile)")
    parser.add_argument("--latency", type=float, default=5.0, help="the world model's seconds")
    parser.add_argument("--seconds", type=float, default=60.0, help="each run's length")
    parser.add_argument(
        "--kinds", default="pattern,unique,keystrokes", help="hostile kinds, comma separated"
    )
    parser.add_argument("--abandoned", type=int, default=1000, help="dropped sessions (soak)")
    parser.add_argument("--kept", type=int, default=1000, help="sessions left open (soak)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the soak")
    parser.add_argument(
        "--idle", type=float, default=30.0, help="env serve's --session-idle-timeout (soak)"
    )
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.latency, args.seconds = 8, 0.3, 3.0
        args.abandoned, args.kept, args.idle, args.rounds = 60, 10, 1.0, 1
    kinds = [k for k in args.kinds.split(",") if k]
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.only in (None, "hostile"):
            report_hostile(args, kinds, folder)
        if args.only in (None, "soak"):
            report_soak(args, folder)
    print(machine())


def report_hostile(args: argparse.Namespace, kinds: list[str], folder: Path) -> None:
    print(
        f"\n1. {args.sessions} OpenEnv sessions beside one sending the costliest action, "
        f"world model of {args.latency:g} s a request, {args.seconds:g} s a run"
    )
    worst = 1.0
    for domain in ("mcp", "terminal"):
        mine = [k for k in kinds if KINDS[k][0] == domain]
        if not mine:
            continue
        runs = beside_a_hostile_session(
            domain, mine, args.sessions, args.latency, args.seconds, folder
        )
        alone = (runs[0].rate + runs[-1].rate) / 2
        limit = args.sessions / args.latency
        for run in runs:
            ratio = run.rate / alone if alone else 0.0
            if run.kind != "alone":
                worst = min(worst, ratio)
            name = f"{domain}, " + ("alone" if run.kind == "alone" else KINDS[run.kind][1])
            print(
                f"   {name:<64} {run.rate:7.2f} steps/s ({run.rate / limit:.3f} of the limit)"
                f"   {ratio:5.3f}   {run.failed} failed   {run.hostile}"
            )
    print(
        f"   target ≥ {RATE_TARGET:g} of the rate alone (the mean of the runs alone before "
        f"and after): {verdict(worst >= RATE_TARGET)}"
    )


def report_soak(args: argparse.Namespace, folder: Path) -> None:
    before, rows = abandoned_sessions(args.abandoned, args.kept, args.idle, args.rounds, folder)
    print(
        f"\n2. {args.rounds} rounds of {args.abandoned:,} sessions opened, reset, stepped once "
        f"and dropped without a close, then {args.kept:,} left open and silent until "
        f"--session-idle-timeout {args.idle:g} closed them"
    )
    print(f"   before: descriptors {before['fds']}, resident {before['rss'] / 1024:.1f} MiB")
    for n, row in enumerate(rows, 1):
        print(
            f"   round {n}: {row['stepped']} stepped and dropped: descriptors "
            f"{row['fds_dropped']}, resident {row['rss_dropped'] / 1024:.1f} MiB"
        )
        if args.kept:
            print(
                f"            {row['kept_stepped']} stepped and left open: descriptors "
                f"{row['fds_kept']}, resident {row['rss_kept'] / 1024:.1f} MiB; "
                f"{row['expired_after']:.1f} s later: descriptors {row['fds_expired']}, "
                f"resident {row['rss_expired'] / 1024:.1f} MiB"
            )


if __name__ == "__main__":
    main()
