"""How many threads llama.cpp should run: one per physical core."""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Physical core count (llama.cpp runs best with one thread per physical core)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return max(1, (os.cpu_count() or 2) // 2)
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
            cores.add((phys, core))
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(len(cores) or (usable or 1), usable or 1))
