"""Repeated measurements reduced to a median and a spread, printed the same way by every
benchmark."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        """(max - min) / median: how much the repetitions disagree."""
        return (self.high - self.low) / self.median if self.median else 0.0

    def show(self, digits: int = 3, unit: str = "") -> str:
        f = f"{{:.{digits}f}}"
        return (
            f"median {f.format(self.median)}{unit}  "
            f"[{f.format(self.low)} .. {f.format(self.high)}]  "
            f"spread {100 * self.spread:.1f}%  n={self.n}"
        )


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no measurements")
    return Summary(statistics.median(values), min(values), max(values), len(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no measurements")
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def machine() -> str:
    """One line about where the figures come from."""
    try:
        with open("/proc/meminfo") as handle:
            kib = int(handle.readline().split()[1])
        memory = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "? GiB"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return f"{os.cpu_count()} CPUs ({cpu}), {memory}, load {load:.1f}, Python {platform.python_version()}"


def verdict(ok: bool) -> str:
    return "meets the target" if ok else "MISSES the target"


HOSTILE_TOOLS = [
    {
        "name": "read_note",
        "description": "Read one note of the notebook by its title.",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
        },
    },
    {
        "name": "lookup",
        "description": "Look names up.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^(a|aa)+$"},
                "rows": {"type": "array", "uniqueItems": True},
            },
        },
    },
]
"""The tools the MCP and OpenEnv hostile-client benchmarks serve: a plain read, and one whose
schema a hostile client makes costly to check (a backtracking pattern, uniqueItems)."""
