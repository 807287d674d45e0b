"""Benchmark: what the simulated MCP server adds to a turn, and how many calls a second
it serves against a model server of fixed latency.

1. Added latency. The same turn (same tool call, same answer from the same engine) runs
   through the simulator directly (``Simulator.send``, saved to a session file as the app
   saves it) and through the MCP server (the official SDK's client calling over
   streamable HTTP, in this process), alternating, each in a session of ``--block``
   calls. The engine is an OpenAI-compatible server this script starts, answering at
   once. Printed: p50 and p95 of each side and of the paired difference, in ms.
2. Throughput. 1, 8 and 64 SDK clients (in a process of their own, starting spread over
   one engine latency, as agents that did not all start at the same instant) call in a
   closed loop against the server, whose engine answers every request after
   ``--latency`` seconds, however many run at once. The engine's limit with N clients is N / latency calls a
   second; printed is each client's steady rate summed over clients, and its ratio to
   that limit.

    python bench/mcp.py                     # both (~7 min)
    python bench/mcp.py --only latency      # 300 paired calls, two ways (~3 min)
    python bench/mcp.py --only throughput   # 1, 8, 64 clients, 60 s each at 5 s (~3 min)
    python bench/mcp.py --quick             # seconds
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from figures import HOSTILE_TOOLS, machine, percentile, verdict  # noqa: E402

# This file's name is the SDK's package name: its folder must not stand before the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]

LATENCY_TARGET_MS = 5.0
RATE_TARGET = 0.95
TOOLS = HOSTILE_TOOLS
CALL = ("read_note", {"title": "groceries"})
OBSERVATION = "groceries.md\n- milk\n- eggs\n- 2 lemons"


# -- the engine: an OpenAI-compatible server of fixed latency -----------------------------
def engine_server(port: int, delay: float) -> None:
    """Serve until killed: every chat request is answered ``delay`` seconds after it came."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            # A client that writes its headers and body apart waits for the first to be
            # acknowledged (Nagle); acknowledging at once keeps the delayed ACK's 40 ms out.
            import socket

            if hasattr(socket, "TCP_QUICKACK"):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

        def do_GET(self) -> None:
            self._send_json({"object": "list", "data": [{"id": "bench", "max_model_len": 1 << 20}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            time.sleep(delay)
            answer = f"<predicted_observation>{OBSERVATION}</predicted_observation>"
            events = []
            for delta, finish in (
                ({"role": "assistant", "content": ""}, None),
                ({"reasoning_content": "The note exists."}, None),
                ({"content": answer}, None),
                ({}, "stop"),
            ):
                chunk = {
                    "id": "bench",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "bench",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                events.append(f"data: {json.dumps(chunk)}\n\n")
            events.append("data: [DONE]\n\n")
            body = "".join(events).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)  # one write: no small packets for Nagle to hold back
            self.wfile.flush()
            self.close_connection = True

        def _send_json(self, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024  # read by listen(), so it must be set before it runs

    Server(("127.0.0.1", port), Handler).serve_forever()


class Engine:
    """The engine server in a process of its own (its threads never take this one's GIL)."""

    def __init__(self, delay: float) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--engine-server", str(self.port), str(delay)]
        )
        self.url = f"http://127.0.0.1:{self.port}/v1"
        import urllib.request

        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/models", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def simulator_on(engine: Engine, concurrency: int) -> Any:
    from agentworld_tui.engines.remote import RemoteEngine
    from agentworld_tui.simulator import Simulator

    simulator = Simulator(RemoteEngine(engine.url), concurrency=concurrency)
    error = simulator.load_and_wait()
    if error:
        raise SystemExit(f"the engine did not load: {error}")
    return simulator


def toolset() -> Any:
    from agentworld_tui.agents.mcp.toolset import from_definitions

    return from_definitions(TOOLS, "bench")


# -- 1. added latency --------------------------------------------------------------------
AGENT = """
import asyncio, json, sys, time
from contextlib import AsyncExitStack
from mcp import Client

async def main(url):
    loop = asyncio.get_running_loop()
    stack = AsyncExitStack()
    client = None
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line == "open":
            await stack.aclose()
            client = await stack.enter_async_context(Client(url))
            await client.list_tools()
            print("ready", flush=True)
        elif line == "call":
            began = time.perf_counter()
            result = await client.call_tool("read_note", {"title": "groceries"})
            took = time.perf_counter() - began
            print(json.dumps([took, result.content[0].text]), flush=True)
        else:
            break
    await stack.aclose()

asyncio.run(main(sys.argv[1]))
"""


class Agent:
    """An MCP client in a process of its own, calling when told (as an agent would)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, url: str) -> Agent:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", AGENT, url,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,  # not bench/, whose mcp.py would stand in for the SDK
        )  # fmt: skip
        return cls(process)

    async def say(self, word: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{word}\n".encode())
        await self.process.stdin.drain()
        return (await self.process.stdout.readline()).decode()

    async def call(self) -> tuple[float, str]:
        took, text = json.loads(await self.say("call"))
        return float(took), str(text)

    async def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"quit\n")
        await self.process.stdin.drain()
        await self.process.wait()


def bare_sdk_server() -> Any:
    """The SDK's low-level server answering the call at once with the same observation:
    what any MCP server costs, before a world model or a session is involved."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    listed = [types.Tool.model_validate(t) for t in TOOLS]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(_ctx: Any, _params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=OBSERVATION)])

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


async def start_bare() -> tuple[str, Any, asyncio.Task[None]]:
    from agentworld_tui.agents.mcp.http import EmbeddedServer, bind, uvicorn_config

    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn_config(bare_sdk_server().streamable_http_app()))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", server, task


async def added_latency(
    calls: int, block: int, folder: Path, *, in_loop: bool, pause: float
) -> dict[str, list[float]]:
    """Times of the same turn directly and through MCP, and of a bare SDK server's answer,
    the three taking turns; the agent calls from a process of its own, or (``in_loop``)
    from this process's loop."""
    from mcp import Client

    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.sessions import SessionFolder
    from agentworld_tui.simulator import home_on
    from agentworld_tui.world.library import SessionLibrary
    from agentworld_tui.world.session import new_session
    from agentworld_tui.world.workspace import WorkspaceError

    engine = Engine(0.0)
    simulator = simulator_on(engine, 8)
    tools = toolset()
    server = AgentServer(simulator, tools, sessions=SessionFolder(folder / "mcp"))
    library = SessionLibrary(folder / "direct")
    action = tools.action(*CALL)
    loop = asyncio.get_running_loop()
    sides = ("direct", "mcp", "sdk")
    times: dict[str, list[float]] = {side: [] for side in sides}
    agents: dict[str, Agent] = {}
    bare_url, bare, bare_task = await start_bare()
    try:
        urls = {"mcp": await server.start(), "sdk": bare_url}
        if not in_loop:
            agents = {side: await Agent.start(url) for side, url in urls.items()}
        for start in range(0, calls, block):
            session, _problems = new_session(tools.domain, tools.scenario)
            workspace = library.new("bench")
            workspace.tabs.append(session)

            def save(_session: Any, workspace: Any = workspace) -> str | None:
                try:
                    workspace.save()
                except WorkspaceError as exc:
                    return str(exc)
                return None

            async with contextlib.AsyncExitStack() as stack:
                clients: dict[str, Any] = {}
                for side, url in urls.items():
                    if agents:
                        await agents[side].say("open")
                    else:
                        clients[side] = await stack.enter_async_context(Client(url))
                        await clients[side].list_tools()
                for index in range(start, min(start + block, calls)):
                    order = sides[index % 3 :] + sides[: index % 3]
                    for side in order if index % 2 else tuple(reversed(order)):
                        await asyncio.sleep(pause)  # the last turn's engine thread winds down
                        began = time.perf_counter()
                        if side == "direct":
                            run = simulator.send(session, action, save=save, home=home_on(loop))
                            await run.result()
                            took, text = time.perf_counter() - began, run.turn.observation
                        elif clients:
                            result = await clients[side].call_tool(*CALL)
                            took = time.perf_counter() - began
                            text = result.content[0].text
                        else:
                            took, text = await agents[side].call()
                        times[side].append(took)
                        assert text == OBSERVATION, text
            workspace.close()
    finally:
        for agent in agents.values():
            await agent.stop()
        await server.stop()
        bare.should_exit = True
        await bare_task
        simulator.close()
        engine.close()
    return times


# -- 2. throughput -------------------------------------------------------------------------
CLIENTS = """
import asyncio, json, sys, time
from mcp import Client

async def client(url, start, until, stamps):
    await asyncio.sleep(start)
    async with Client(url) as session:
        await session.list_tools()
        while time.monotonic() < until:
            await session.call_tool("read_note", {"title": "groceries"})
            stamps.append(time.monotonic())

async def main(url, count, seconds, spread):
    until = time.monotonic() + seconds
    stamps = [[] for _ in range(count)]
    starts = [spread * i / count for i in range(count)]
    await asyncio.gather(*(client(url, s, until, t) for s, t in zip(starts, stamps)))
    print(json.dumps(stamps))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])))
"""


HOSTILE = """
import asyncio, json, sys, time
from mcp import Client
from mcp.shared.exceptions import MCPError

async def main(url, seconds, kind):
    until = time.monotonic() + seconds
    if kind == "pattern":  # refused once the check's time runs out
        arguments = {"name": "a" * 80 + "!"}
    else:  # the largest array of distinct objects the size limit lets through, accepted
        arguments = {"name": "a", "rows": [{"i": i, "k": [i, "x"]} for i in range(6500)]}
    calls = refused = 0
    while time.monotonic() < until:
        # A session a call: each call costs one turn, not a history that grows to the limit.
        async with Client(url) as client:
            try:
                result = await client.call_tool("lookup", arguments)
                refused += bool(result.is_error)
            except MCPError:
                refused += 1
            calls += 1
    print(json.dumps([calls, refused]))

asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3]))
"""


def steady_rate(stamps: list[list[float]], skip: float) -> float:
    """Each client's calls a second between its completions after ``skip`` seconds from
    the first, summed over the clients (no client's start or end is counted)."""
    total = 0.0
    for mine in stamps:
        kept = [t for t in mine if t >= mine[0] + skip] if mine else []
        if len(kept) >= 2:
            total += (len(kept) - 1) / (kept[-1] - kept[0])
    return total


async def throughput(
    clients: list[int], delay: float, seconds: float, folder: Path
) -> list[tuple[int, float, float]]:
    """For each client count: the steady calls a second, and this process's CPU time per
    call (the server's: the SDK, the checks, the session saves, the remote engine)."""
    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.sessions import SessionFolder

    engine = Engine(delay)
    simulator = simulator_on(engine, max(clients))
    server = AgentServer(simulator, toolset(), sessions=SessionFolder(folder / "rate"))
    rows: list[tuple[int, float, float]] = []
    try:
        url = await server.start()
        for count in clients:
            cpu = time.process_time()
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CLIENTS, url, str(count), str(seconds), str(delay),
                stdout=asyncio.subprocess.PIPE, cwd=ROOT,
            )  # fmt: skip
            out, _ = await process.communicate()
            stamps = json.loads(out)
            cpu = time.process_time() - cpu
            calls = sum(len(mine) for mine in stamps)
            rows.append((count, steady_rate(stamps, 2 * delay), cpu / max(calls, 1)))
    finally:
        await server.stop()
        simulator.close()
        engine.close()
    return rows


async def beside_a_hostile_client(
    count: int, delay: float, seconds: float, folder: Path, kinds: list[str]
) -> list[tuple[str, float, str]]:
    """The steady calls a second of ``count`` clients alone, then beside one client that
    sends the costliest argument of each kind in a closed loop, in one server."""
    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.sessions import SessionFolder

    engine = Engine(delay)
    simulator = simulator_on(engine, count + 1)
    server = AgentServer(simulator, toolset(), sessions=SessionFolder(folder / "hostile"))
    rows: list[tuple[str, float, str]] = []
    try:
        url = await server.start()
        for kind in ["none", *kinds]:
            clients = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CLIENTS, url, str(count), str(seconds), str(delay),
                stdout=asyncio.subprocess.PIPE, cwd=ROOT,
            )  # fmt: skip
            hostile = None
            if kind != "none":
                hostile = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", HOSTILE, url, str(seconds), kind,
                    stdout=asyncio.subprocess.PIPE, cwd=ROOT,
                )  # fmt: skip
            out, _ = await clients.communicate()
            said = ""
            if hostile is not None:
                calls, refused = json.loads((await hostile.communicate())[0])
                said = f"{calls} hostile calls, {refused} refused"
            rows.append((kind, steady_rate(json.loads(out), 2 * delay), said))
    finally:
        await server.stop()
        simulator.close()
        engine.close()
    return rows


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def resident_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def abandoned_sessions(count: int, idle: float, folder: Path) -> dict[str, float]:
    """Descriptors and memory of the server's process before ``count`` sessions that are
    opened, called once and left without a DELETE, at their peak, and once they expired."""
    import gc
    import tracemalloc

    import httpx2

    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.sessions import SessionFolder

    engine = Engine(0.0)
    simulator = simulator_on(engine, 32)
    server = AgentServer(
        simulator, toolset(), sessions=SessionFolder(folder / "soak"), idle_seconds=idle,
        max_sessions=count + 100,
    )  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    opening = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "careless", "version": "1"}},
    }  # fmt: skip
    calling = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": CALL[0], "arguments": CALL[1]},
    }  # fmt: skip

    async def one(http: Any, url: str) -> None:
        opened = await http.post(url, json=opening, headers=accept)
        session = {**accept, "mcp-session-id": opened.headers["mcp-session-id"]}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=session)  # fmt: skip
        await http.post(url, json=calling, headers=session)

    figures: dict[str, float] = {}
    try:
        url = await server.start()
        async with httpx2.AsyncClient(timeout=60) as http:
            await asyncio.gather(*(one(http, url) for _ in range(20)))  # warm-up
        while server.connections():
            await asyncio.sleep(0.1)
        gc.collect()
        tracemalloc.start()
        figures.update(fds_before=descriptors(), rss_before=resident_kib(),
                       traced_before=tracemalloc.get_traced_memory()[0])  # fmt: skip
        for start in range(0, count, 50):
            async with httpx2.AsyncClient(timeout=60) as http:
                await asyncio.gather(*(one(http, url) for _ in range(min(50, count - start))))
        figures.update(fds_peak=descriptors(), open_peak=len(server.connections()))
        while server.connections():
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        gc.collect()
        figures.update(fds_after=descriptors(), rss_after=resident_kib(),
                       traced_after=tracemalloc.get_traced_memory()[0])  # fmt: skip
        tracemalloc.stop()
    finally:
        await server.stop()
        simulator.close()
        engine.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, tiny counts")
    parser.add_argument("--calls", type=int, default=300, help="paired calls for the latency")
    parser.add_argument("--block", type=int, default=20, help="calls per session")
    parser.add_argument(
        "--pause", type=float, default=0.05, help="seconds between calls (an agent thinks)"
    )
    parser.add_argument("--latency", type=float, default=5.0, help="the engine's seconds a request")
    parser.add_argument("--seconds", type=float, default=60.0, help="each throughput run's length")
    parser.add_argument("--clients", default="1,8,64", help="client counts, comma separated")
    parser.add_argument(
        "--only",
        choices=("latency", "throughput", "hostile", "soak"),
        help="run one part: latency, throughput, hostile (64 clients beside one sending the "
        "costliest argument) or soak (1,000 abandoned sessions)",
    )
    parser.add_argument("--sessions", type=int, default=1000, help="abandoned sessions (soak)")
    parser.add_argument(
        "--engine-server", nargs=2, metavar=("PORT", "DELAY"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.engine_server:
        engine_server(int(args.engine_server[0]), float(args.engine_server[1]))
        return
    if args.quick:
        args.calls, args.block, args.latency, args.seconds = 12, 6, 0.3, 3.0
        args.clients, args.sessions = "1,4", 60
    counts = [int(c) for c in args.clients.split(",")]
    os.environ.setdefault("AGENTWORLD_DATA_DIR", tempfile.mkdtemp(prefix="agentworld-bench-"))
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.only in (None, "latency"):
            report_latency(args, folder)
        if args.only in (None, "throughput"):
            report_throughput(args, counts, folder)
        if args.only in (None, "hostile"):
            report_hostile(args, counts, folder)
        if args.only in (None, "soak"):
            report_soak(args, folder)


def report_latency(args: argparse.Namespace, folder: Path) -> None:
    print(
        f"\n1. added latency per call, {args.calls} paired calls, engine answering at once "
        f"(sessions of {args.block} calls, saved after each, {args.pause:g} s between calls)"
    )
    met = True
    for in_loop, how in ((False, "agent in its own process"), (True, "agent in this loop")):
        times = asyncio.run(
            added_latency(args.calls, args.block, folder, in_loop=in_loop, pause=args.pause)
        )
        direct, mcp, sdk = ([t * 1000 for t in times[side]] for side in ("direct", "mcp", "sdk"))
        added = [m - d for m, d in zip(mcp, direct, strict=True)]
        beyond = [a - b for a, b in zip(added, sdk, strict=True)]
        print(f"   {how}:")
        for name, values in (
            ("simulator directly", direct),
            ("through MCP (HTTP)", mcp),
            ("added by MCP", added),
            ("a bare SDK server", sdk),
            ("added beyond the SDK", beyond),
        ):
            print(
                f"     {name:<22} p50 {percentile(values, 50):7.2f} ms   "
                f"p95 {percentile(values, 95):7.2f} ms"
            )
        if not in_loop:
            met = percentile(added, 50) < LATENCY_TARGET_MS
    print(f"   target < {LATENCY_TARGET_MS:g} ms (p50, agent in its own process): {verdict(met)}")


def report_throughput(args: argparse.Namespace, counts: list[int], folder: Path) -> None:
    if True:
        rows = asyncio.run(throughput(counts, args.latency, args.seconds, folder))
        print(
            f"\n2. calls a second against an engine of {args.latency:g} s a request "
            f"({args.seconds:g} s a run, the first {2 * args.latency:g} s of each client left out)"
        )
        print("   clients   calls/s   engine limit   ratio   server CPU a call")
        worst = 1.0
        for count, rate, cpu in rows:
            limit = count / args.latency
            worst = min(worst, rate / limit)
            print(
                f"   {count:>7}   {rate:7.2f}   {limit:12.2f}   {rate / limit:5.3f}"
                f"   {cpu * 1000:8.1f} ms"
            )
        print(f"   target ≥ {RATE_TARGET:g} (every row): {verdict(worst >= RATE_TARGET)}")


def report_hostile(args: argparse.Namespace, counts: list[int], folder: Path) -> None:
    count = max(counts)
    rows = asyncio.run(
        beside_a_hostile_client(count, args.latency, args.seconds, folder, ["pattern", "unique"])
    )
    print(
        f"\n3. {count} clients beside one sending the costliest argument, engine of "
        f"{args.latency:g} s a request, {args.seconds:g} s a run"
    )
    alone = rows[0][1]
    worst = 1.0
    for kind, rate, said in rows:
        ratio = rate / alone if alone else 0.0
        if kind != "none":
            worst = min(worst, ratio)
        name = {"none": "alone", "pattern": "beside ^(a|aa)+$ on 81 characters",
                "unique": "beside 6,500 distinct objects, uniqueItems"}[kind]  # fmt: skip
        print(f"   {name:<44} {rate:7.2f} calls/s   {ratio:5.3f}   {said}")
    print(f"   target ≥ {RATE_TARGET:g} of the rate alone: {verdict(worst >= RATE_TARGET)}")


def report_soak(args: argparse.Namespace, folder: Path) -> None:
    idle = 2.0 if args.quick else 120.0  # longer than the run: every session open at its end
    figures = asyncio.run(abandoned_sessions(args.sessions, idle, folder))
    print(
        f"\n4. {args.sessions:,} sessions opened, called once and abandoned (no DELETE), "
        f"idle timeout {idle:g} s"
    )
    print(
        f"   descriptors: {figures['fds_before']:.0f} before, {figures['fds_peak']:.0f} at the "
        f"end of the run ({figures['open_peak']:.0f} sessions open), "
        f"{figures['fds_after']:.0f} once they expired"
    )
    print(
        f"   memory: resident {figures['rss_before'] / 1024:.1f} MiB before, "
        f"{figures['rss_after'] / 1024:.1f} MiB after; traced by Python "
        f"{figures['traced_before'] / 2**20:.2f} MiB before, "
        f"{figures['traced_after'] / 2**20:.2f} MiB after"
    )


if __name__ == "__main__":
    main()
