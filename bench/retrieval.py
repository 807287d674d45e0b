"""Benchmark: what finding grounding examples costs per call, against the trace store's size.

One store (a real SQLite file in a temporary folder) grows through 10, 100, 1,000,
10,000 and 100,000 exchanges by bulk insert. The traffic is made to look like an MCP
server's: 25 tools, arguments built from words of a Zipf-like vocabulary (paths, queries,
ids, so some words are in most calls and most words in few), results of a few hundred to
a few thousand characters. At each size, calls made the same way but never stored are
looked up (``TraceStore.similar``, 3 examples, what a grounded turn asks) and each lookup
is timed; printed are p50, p95 and p99 in milliseconds and how the examples were found
(``bm25``: ranked by BM25; ``word``: every word of the call was too common to rank by,
the most recent holding its rarest word; ``recent``: the tool's most recent). A second
line times the whole grounding step (``ground``: the lookup and the prompt section, within
the default budget). The aim: under 20 ms per call at 100,000 exchanges.

    python bench/retrieval.py            # up to 100,000 exchanges, 500 calls a size
    python bench/retrieval.py --tools 1  # every exchange of one tool: the worst case
    python bench/retrieval.py --quick    # up to 1,000, seconds
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, percentile, verdict

from agentworld_tui.reality.grounding import ground
from agentworld_tui.reality.traces import Exchange, TraceStore

AIM_MS = 20.0
SIZES = (10, 100, 1_000, 10_000, 100_000)
TOOLS = 25


class Traffic:
    """Calls and results in the shape of one MCP server's traffic."""

    def __init__(self, seed: int, tools: int = TOOLS) -> None:
        self.rng = random.Random(seed)
        self.tools = tools
        self.words = [f"{stem}{i}" for i, stem in enumerate(_STEMS * 400)]

    def word(self) -> str:
        rank = int(self.rng.paretovariate(1.05)) - 1
        return self.words[min(rank, len(self.words) - 1)]

    def call(self) -> tuple[str, dict[str, object]]:
        tool = self.rng.randrange(self.tools)
        kind = tool % 5
        if kind == 0:
            arguments: dict[str, object] = {
                "path": "/".join(self.word() for _ in range(self.rng.randint(2, 4))) + ".py"
            }
        elif kind == 1:
            arguments = {"query": " ".join(self.word() for _ in range(self.rng.randint(1, 6)))}
        elif kind == 2:
            arguments = {"id": self.rng.randint(1, 50_000), "fields": [self.word(), self.word()]}
        elif kind == 3:
            arguments = {"repo": f"{self.word()}/{self.word()}", "issue": self.rng.randint(1, 900)}
        else:
            arguments = {"sql": f"SELECT * FROM {self.word()} WHERE {self.word()} = 1"}
        return f"tool_{tool}", arguments

    def exchanges(self, count: int) -> Iterator[Exchange]:
        for _ in range(count):
            tool, arguments = self.call()
            size = self.rng.randint(30, 300)
            result = " ".join(self.word() for _ in range(size))
            yield Exchange(tool, arguments, result, "bench")


_STEMS = ("src", "user", "order", "note", "lib", "test", "doc", "item", "main", "data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="lookups at each size")
    parser.add_argument(
        "--tools", type=int, default=TOOLS, help="tools the traffic is spread over (1: worst)"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = SIZES[:3] if args.quick else SIZES
    calls = 50 if args.quick else args.calls
    print(machine())
    print(
        f"retrieval cost per call, ms ({calls} calls at each size, 3 examples a call, "
        f"{args.tools} tools)"
    )
    print(f"{'exchanges':>10}  {'p50':>7} {'p95':>7} {'p99':>7}  {'ground p95':>10}  found by")
    stored = Traffic(1, args.tools)
    asked = Traffic(2, args.tools)
    at_largest = 0.0
    with tempfile.TemporaryDirectory() as folder:
        store = TraceStore(Path(folder) / "traces.db", create=True)
        have = 0
        for size in sizes:
            start = time.perf_counter()
            added = size - have
            store.add_many(stored.exchanges(added))
            build = time.perf_counter() - start
            have = size
            lookups: list[float] = []
            grounding: list[float] = []
            how: Counter[str] = Counter()
            answered = 0
            for _ in range(calls):
                tool, arguments = asked.call()
                start = time.perf_counter()
                found = store.similar("mcp", tool, arguments, limit=3)
                lookups.append((time.perf_counter() - start) * 1000)
                how.update(m.how for m in found.matches)
                answered += bool(found.matches)
                start = time.perf_counter()
                ground(store, "mcp", tool, arguments)
                grounding.append((time.perf_counter() - start) * 1000)
            p50, p95, p99 = (percentile(lookups, q) for q in (50, 95, 99))
            total = sum(how.values()) or 1
            print(
                f"{size:>10,}  {p50:7.2f} {p95:7.2f} {p99:7.2f}  {percentile(grounding, 95):10.2f}"
                f"  bm25 {100 * how['bm25'] / total:.0f}%, word {100 * how['word'] / total:.0f}%,"
                f" recent {100 * how['recent'] / total:.0f}%"
                f" of examples; {100 * answered / calls:.0f}% of calls had one"
                f"  (added at {added / max(build, 1e-9):,.0f}/s)"
            )
            at_largest = p95
        store.close()
    largest = sizes[-1]
    print(f"aim: under {AIM_MS} ms a call (p95) at {largest:,}: {verdict(at_largest < AIM_MS)}")


if __name__ == "__main__":
    main()
