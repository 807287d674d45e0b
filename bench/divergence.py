"""Benchmark: what the divergence measure costs per step, against the observation's size.

For each size (1 KB to 1 MB) two observations are made the way a step gives them: a real
one (log lines with timestamps, ids, sizes and durations, or a JSON tool result) and a
predicted one with a tenth of its lines or items wrong: "close" copies reality's volatile
parts, "volatile" has its own on every line (what a world model writes, and the case where
everything goes through the masks). Each
pair is measured ``--repeat`` times; printed is the median cost per step in milliseconds,
its spread, and the cost per kilobyte, so that growth with size reads off one column (a
linear measure keeps it flat).

    python bench/divergence.py              # 1 KB .. 1 MB, text and JSON (~1 min)
    python bench/divergence.py --quick      # seconds
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import machine, summarize

from agentworld_tui.reality.divergence import divergence

SIZES = (1_000, 10_000, 100_000, 1_000_000)


def text_line(rng: random.Random, words: tuple[str, str]) -> str:
    return (
        f"2026-07-{rng.randint(1, 28):02d}T12:{rng.randint(0, 59):02d}:07Z worker-{words[0]} "
        f"{words[1]} {words[0]}0 items from /srv/data/part-{words[0]} "
        f"({rng.randint(1, 900)} KB in {rng.random():.2f}s) id={rng.getrandbits(48):012x}"
    )


def text_pair(size: int, rng: random.Random, *, volatile: bool) -> tuple[str, str]:
    """Lines of a log; the prediction has a tenth of them wrong, and (``volatile``) its
    own timestamps, sizes, durations and ids on every line, as a world model writes them."""
    real, predicted = [], []
    n = 0
    while n < size:
        words = (str(rng.randint(1, 99)), "fetched")
        wrong = rng.random() < 0.1
        state = rng.getstate()
        line = text_line(rng, words)
        real.append(line)
        if not volatile:
            rng.setstate(state)
        predicted.append(text_line(rng, (words[0], "skipped" if wrong else words[1])))
        n += len(line) + 1
    return "\n".join(predicted), "\n".join(real)


def json_item(rng: random.Random, title: str) -> dict[str, object]:
    return {
        "id": f"{rng.getrandbits(64):016x}",
        "title": title,
        "created_at": f"2026-07-{rng.randint(1, 28):02d}T10:00:00Z",
        "tags": ["a", "b"],
        "size": rng.randint(1, 10**6),
    }


def json_pair(size: int, rng: random.Random, *, volatile: bool) -> tuple[str, str]:
    real, predicted = [], []
    n = 0
    while n < size:
        title = f"note {rng.randint(1, 10_000)}"
        wrong = rng.random() < 0.1
        state = rng.getstate()
        item = json_item(rng, title)
        real.append(item)
        if not volatile:
            rng.setstate(state)
        predicted.append(json_item(rng, "another note" if wrong else title))
        n += len(json.dumps(item))
    return json.dumps({"notes": predicted}), json.dumps({"notes": real})


def measure(pair: tuple[str, str], repeat: int, domain: str) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        divergence(pair[0], pair[1], domain)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    rng = random.Random(7)
    print(machine())
    print(
        f"{'kind':5} {'prediction':10} {'size':>9}  {'ms per step':>11}  {'ms per KB':>9}  spread  score"
    )
    for kind, make, domain in (("text", text_pair, "terminal"), ("json", json_pair, "mcp")):
        for volatile in (False, True):
            for size in SIZES:
                pair = make(size, rng, volatile=volatile)
                found = divergence(pair[0], pair[1], domain)
                cost = summarize(measure(pair, repeat, domain))
                kb = len(pair[1]) / 1000
                print(
                    f"{kind:5} {'volatile' if volatile else 'close':10} {len(pair[1]):>9,}  "
                    f"{cost.median:>11.2f}  {cost.median / kb:>9.3f}  {100 * cost.spread:5.1f}%  "
                    f"{found.score:.3f}"
                )


if __name__ == "__main__":
    main()
