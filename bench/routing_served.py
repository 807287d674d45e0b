"""Benchmark: what a simulated MCP server adds to a call it routes to the real server.

A real MCP server (tests/twinserver.py, over stdio) is the twin. Side by side in one run,
in interleaved rounds:

- ``twin alone``: the twin's own round trip, a call handed to its ``TwinRunner`` (the
  official SDK's client, on the twin's thread) and answered;
- ``served, routed real``: the same call made by an agent (the SDK's client over
  streamable HTTP, in this process) to ``AgentServer`` with the shipped routing rules,
  which send it to the same twin: the agent's hop to the simulated server, the routing
  decision, the turn begun, reality's answer recorded and the session file saved;
- ``served, simulated``: the same call to the same server without a twin, answered by a
  world model on an OpenAI-compatible server that answers at once (tests/faultserver.py):
  what serving costs any call, for reference.

Printed: p50 and p95 per call in milliseconds, and what the served path adds to the
twin's own round trip (the difference of each percentile).

    python bench/routing_served.py             # 300 calls each
    python bench/routing_served.py --quick     # 40 calls each
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
# bench/mcp.py has the SDK's package name: this folder must not stand before the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path += [str(ROOT), str(BENCH), str(ROOT / "tests")]

from faultserver import FaultServer, Reply  # noqa: E402
from figures import machine, percentile  # noqa: E402
from twinserver import TOOLS  # noqa: E402

from agentworld_tui.agents.mcp import toolset as toolsets  # noqa: E402
from agentworld_tui.agents.mcp.server import AgentServer  # noqa: E402
from agentworld_tui.agents.mcp.sessions import SessionFolder  # noqa: E402
from agentworld_tui.reality.routing import default_rules  # noqa: E402
from agentworld_tui.reality.spec import TwinSpec  # noqa: E402
from agentworld_tui.simulator import Simulator  # noqa: E402
from agentworld_tui.simulator.routing import Reality  # noqa: E402
from agentworld_tui.world.action import Action  # noqa: E402

SERVER = str(ROOT / "tests" / "twinserver.py")


async def served(
    reality: Reality | None, toolset: toolsets.Toolset, folder: Path, calls: int, engine: str
) -> list[float]:
    """Milliseconds per call of an agent to the simulated server: routed to the twin
    (with ``reality``), or answered by the world model at ``engine`` (without)."""
    from mcp import Client

    from agentworld_tui.engines.remote import RemoteEngine

    simulator = Simulator(RemoteEngine(engine) if reality is None else None)
    if reality is None:
        assert simulator.load_and_wait() is None
    server = AgentServer(simulator, toolset, sessions=SessionFolder(folder), reality=reality)
    url = await server.start()
    times: list[float] = []
    try:
        async with Client(url) as client:
            await client.call_tool("read_note", {"name": "plan"})  # warm-up
            for _ in range(calls):
                start = time.perf_counter()
                result = await client.call_tool("read_note", {"name": "plan"})
                times.append((time.perf_counter() - start) * 1000)
                assert not result.is_error
    finally:
        await server.stop()
        simulator.close()
    return times


def alone(reality: Reality, calls: int) -> list[float]:
    assert reality.runner is not None
    action = Action("mcp", {"name": "read_note", "arguments": {"name": "plan"}}, "read_note")
    reality.runner.act(action)  # warm-up
    times: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        seen = reality.runner.act(action)
        times.append((time.perf_counter() - start) * 1000)
        assert seen.ok
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls = 40 if args.quick else args.calls
    print(machine())
    answer = Reply(content=["<predicted_observation>ship it</predicted_observation>"])
    with tempfile.TemporaryDirectory() as scratch, FaultServer(default=answer) as engine:
        notebook = Path(scratch) / "notebook"
        (notebook / "notes").mkdir(parents=True)
        (notebook / "notes" / "plan").write_text("ship it")
        tools = Path(scratch) / "tools.json"
        tools.write_text(json.dumps({"tools": TOOLS}))
        toolset = toolsets.from_file(tools)
        spec = TwinSpec("mcp", command=(sys.executable, SERVER, "stdio", str(notebook)))
        runner, _first = spec.start()
        reality = Reality(runner, spec, rules=default_rules(), tools=toolsets.tool_infos(toolset))
        direct: list[float] = []
        routed: list[float] = []
        simulated: list[float] = []
        rounds = 4
        try:  # interleaved rounds, so that the machine's load falls on every side alike
            for n in range(rounds):
                direct += alone(reality, calls // rounds)
                folder = Path(scratch) / f"routed{n}"
                routed += asyncio.run(served(reality, toolset, folder, calls // rounds, ""))
                folder = Path(scratch) / f"simulated{n}"
                simulated += asyncio.run(served(None, toolset, folder, calls // rounds, engine.url))
        finally:
            reality.close()
    print(f"a call of read_note, ms ({len(direct)} calls each)")
    rows = (
        ("twin alone", direct),
        ("served, routed real", routed),
        ("served, simulated", simulated),
    )
    for name, times in rows:
        p50, p95 = percentile(times, 50), percentile(times, 95)
        print(f"  {name:<24} p50 {p50:7.2f}  p95 {p95:7.2f}")
    added50 = percentile(routed, 50) - percentile(direct, 50)
    added95 = percentile(routed, 95) - percentile(direct, 95)
    print(f"  {'served adds to the twin':<24} p50 {added50:7.2f}  p95 {added95:7.2f}")


if __name__ == "__main__":
    main()
