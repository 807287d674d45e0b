"""Benchmark: what routing adds to each call of a simulated MCP server.

A router with the shipped default rules (and one with a longer rule file: 50 rules of
name patterns before the annotation rules) decides a session's calls in a loop: tools of
a real server's shape (reads, writes, tools without annotations, several servers), a
simulated write now and then so that consistency has changes to check. Each decision is
timed on its own; printed are p50, p95 and p99 per call in milliseconds, against the aim
of 2 ms at p95. The decision record (``Decision.to_dict``, what a turn stores) is timed
with it, since a front-end writes it for every call.

    python bench/routing.py            # 200,000 decisions a rule set
    python bench/routing.py --quick    # seconds
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, percentile, verdict

from agentworld_tui.reality.routing import (
    Router,
    RuleSet,
    ToolHints,
    ToolInfo,
    default_rules,
    parse_rules,
)

AIM_P95_MS = 2.0


def tools(count: int, rng: random.Random) -> list[ToolInfo]:
    """Tools as real servers list them: half reads, a third writes, the rest without
    annotations, spread over three servers."""
    found: list[ToolInfo] = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.5:
            hints = ToolHints.of(read_only=True, open_world=rng.random() < 0.3)
            name = f"read_thing_{i}"
        elif kind < 0.85:
            hints = ToolHints.of(read_only=False, destructive=rng.random() < 0.5)
            name = f"write_thing_{i}"
        else:
            hints = ToolHints()
            name = f"tool_{i}"
        found.append(ToolInfo(name, hints, f"server{i % 3}"))
    return found


def long_rules() -> RuleSet:
    parts = [f'[[rule]]\ntool = ["never_{i}_*", "drop_{i}"]\nroute = "sim"\n' for i in range(50)]
    parts.append('[[rule]]\nreadOnlyHint = true\nroute = "real"\n')
    parts.append('[[rule]]\nroute = "sim"\naffects = ["read_*"]\n')
    return parse_rules("\n".join(parts), "50 rules")


def run(rules: RuleSet, calls: int, session: int, rng: random.Random) -> list[float]:
    """Milliseconds per decision, over sessions of ``session`` calls each."""
    known = tools(60, rng)
    times: list[float] = []
    router = Router(rules, known)
    for n in range(calls):
        if n % session == 0:
            router = Router(rules, known)
        choice = rng.choice(known)
        start = time.perf_counter()
        router.decide(choice, turn=n % session + 1).to_dict()
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--session", type=int, default=50, help="calls a session")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls = 2_000 if args.quick else args.calls
    print(machine())
    print(f"routing's added latency per call, ms ({calls:,} decisions a rule set)")
    rng = random.Random(7)
    worst = 0.0
    for name, rules in (("shipped defaults", default_rules()), ("50 name rules", long_rules())):
        times = run(rules, calls, args.session, rng)
        p50, p95, p99 = (percentile(times, q) for q in (50, 95, 99))
        worst = max(worst, p95)
        print(f"  {name:<18} p50 {p50:.4f}  p95 {p95:.4f}  p99 {p99:.4f}")
    print(f"aim: p95 under {AIM_P95_MS} ms: {verdict(worst < AIM_P95_MS)}")


if __name__ == "__main__":
    main()
