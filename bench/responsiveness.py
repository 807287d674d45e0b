"""Benchmark 3: key press to the frame that shows it, while tokens stream at full speed.

The real app under ``run_test()`` streams from a random-weight model (it never ends on its
own) on every core. A separate thread plays the terminal's input thread: at random
moments it hands a key to Textual's driver, as the real driver does when the terminal
sends one, noting the time. The key lands in the focused prompt line; the delay ends at
the first screen update (compositor refresh) after the line's value holds the key, which
is the frame that shows it. The same keys are also measured with the app idle, side by
side, alternating idle and streaming rounds.

    python bench/responsiveness.py            # ~100M model, 6 rounds of 25 keys each
    python bench/responsiveness.py --quick    # tiny model, a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, percentile, summarize, verdict
from models import random_model

TARGET_MS = 50.0
LETTERS = "abcdefghijklmnopqrstuvwxyz"


class FrameClock:
    """Times every screen update, and what the prompt line held when it was drawn."""

    def __init__(self, app: Any, line: Any) -> None:
        self.frames: list[tuple[float, str]] = []
        self.line = line
        screen = app.screen
        original = screen._compositor_refresh

        def refresh() -> None:
            original()
            self.frames.append((time.perf_counter(), self.line.value))

        screen._compositor_refresh = refresh


def press_keys(app: Any, keys: str, gap: tuple[float, float], sent: list[float]) -> None:
    """The input thread: each key to the driver at a random moment, its time noted."""
    from textual import events

    rng = random.Random(len(keys))
    for key in keys:
        time.sleep(rng.uniform(*gap))
        sent.append(time.perf_counter())
        app._driver.process_message(events.Key(key, key))


def delays(clock: FrameClock, sent: list[float], start_len: int, keys: str) -> list[float]:
    """For the k-th key: the first frame drawn after it was sent whose line held it."""
    found = []
    for k, at in enumerate(sent):
        want = start_len + k + 1
        for when, value in clock.frames:
            if when >= at and len(value) >= want and value[want - 1] == keys[k]:
                found.append((when - at) * 1000)
                break
    return found


async def round_of_keys(
    app: Any, clock: FrameClock, n: int, gap: tuple[float, float]
) -> list[float]:
    line = clock.line
    line.value = ""
    await asyncio.sleep(0.1)
    clock.frames.clear()
    keys = "".join(random.Random(n).choice(LETTERS) for _ in range(n))
    sent: list[float] = []
    thread = threading.Thread(target=press_keys, args=(app, keys, gap, sent))
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # the last key's frame
    got = delays(clock, sent, 0, keys)
    if len(got) != n:
        raise RuntimeError(f"only {len(got)} of {n} keys reached the screen")
    return got


async def measure(model: Path, args: argparse.Namespace) -> bool:
    from agentworld_tui.config import Settings
    from agentworld_tui.engines.threads import physical_cores
    from agentworld_tui.ui.app import AgentWorldApp

    settings = Settings()
    settings.model.path = str(model)
    settings.model.threads = args.threads or physical_cores()
    settings.model.n_ctx = 8192
    settings.generation.max_tokens = 5000
    settings.generation.seed = 99
    app = AgentWorldApp(settings, offer_models=False, offer_resume=False)
    idle: list[float] = []
    busy: list[float] = []
    p95s: list[float] = []
    rates: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 300)
        pane = app.active_pane
        line = pane.line
        line.focus()
        await pilot.pause()
        clock = FrameClock(app, line)
        for rep in range(args.reps):
            for streaming in (False, True) if rep % 2 == 0 else (True, False):
                if streaming:
                    line.value = "ls"
                    await pilot.press("enter")
                    while pane.status.generated < 8:  # the prompt is read; tokens flow
                        await asyncio.sleep(0.05)
                    got = await round_of_keys(app, clock, args.keys, args.gap)
                    rates.append(pane.status.tokens_per_second)
                    pane.stop()
                    while pane.busy:
                        await asyncio.sleep(0.05)
                    busy += got
                    p95s.append(percentile(got, 95))
                else:
                    idle += await round_of_keys(app, clock, args.keys, args.gap)
        await app.action_quit()
    print(f"\nkey press to frame, ms ({args.reps} rounds of {args.keys} keys each)")
    for label, values in (("idle", idle), ("streaming", busy)):
        print(
            f"  {label:>9}  p50 {percentile(values, 50):6.1f}  p95 {percentile(values, 95):6.1f}"
            f"  max {max(values):6.1f}  n={len(values)}"
        )
    print(f"  per-round p95 while streaming: {summarize(p95s).show(1, ' ms')}")
    print(f"  decode speed during the rounds: {summarize(rates).show(1, ' tok/s')}")
    p95 = percentile(busy, 95)
    ok = p95 < TARGET_MS
    print(f"  target p95 < {TARGET_MS:.0f} ms while streaming: {verdict(ok)} ({p95:.1f} ms)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, few keys")
    parser.add_argument("--reps", type=int, default=0, help="rounds of each kind")
    parser.add_argument("--keys", type=int, default=0, help="keys per round")
    parser.add_argument("--threads", type=int, default=0, help="default: as the app (cores)")
    parser.add_argument("--models-dir", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args.reps = args.reps or (5 if args.quick else 6)
    args.keys = args.keys or (4 if args.quick else 25)
    args.gap = (0.01, 0.04) if args.quick else (0.05, 0.2)
    scratch = tempfile.TemporaryDirectory(prefix="agentworld-bench-")
    os.environ.setdefault("AGENTWORLD_CONFIG_DIR", str(Path(scratch.name) / "config"))
    os.environ.setdefault("AGENTWORLD_DATA_DIR", str(Path(scratch.name) / "data"))
    folder = args.models_dir or Path(scratch.name) / "models"
    print(f"benchmark 3 · responsiveness · {machine()}")
    model = random_model(folder, quick=args.quick)
    asyncio.run(measure(model, args))
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
