"""Benchmark 5: process start to first frame, agentworld (no model) ÷ a minimal Textual app.

Each child runs on its own pseudo-terminal with Textual's real terminal driver, so the
first frame is really written; the clock runs from just before the process is spawned to
the moment the child reports Textual's Ready event (sent once the first frame is drawn).
Runs alternate between the two apps, the order flipping each repetition. Then it checks
that ``agentworld --version`` and ``--help`` import neither Textual nor llama.cpp.

    python bench/startup.py                   # 21 alternating repetitions
    python bench/startup.py --quick           # 5, the same measurement
    python bench/startup.py --instructions    # also count instructions (valgrind)

With ``--instructions`` it also runs each app under valgrind's cachegrind, up to its first
frame, and counts the instructions it executes: the same work in CPU instructions, which a
busy machine does not change (the times above vary by a third between runs here).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, summarize, verdict

TARGET = 1.5
FIRST_FRAME = Path(__file__).resolve().parent / "first_frame.py"
ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60.0
HEAVY = ("textual", "llama_cpp")


def child_env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AGENTWORLD_CONFIG_DIR=str(scratch / "config"),
        AGENTWORLD_DATA_DIR=str(scratch / "data"),
        HF_HUB_OFFLINE="1",
        TERM="xterm-256color",
        COLUMNS="120",
        LINES="36",
        # Installed apps run from compiled bytecode (pip writes it at install time). Where
        # bytecode writing is off, as on this project's machines, the warm-up run writes
        # it here for both apps, so neither compiles its sources on every start.
        PYTHONPYCACHEPREFIX=str(scratch / "pycache"),
    )
    env.pop("TEXTUAL_DRIVER", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def first_frame_seconds(which: str, env: dict[str, str], wrapper: Sequence[str] = ()) -> float:
    """Spawn the child on a fresh pty (under ``wrapper``, a command that runs it); seconds
    from spawn to its first frame."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    ready_read, ready_write = os.pipe()
    done = threading.Event()

    def drain_terminal() -> None:  # the terminal's reader: keep the child's writes flowing
        while not done.is_set():
            readable, _, _ = select.select([master], [], [], 0.1)
            if readable:
                try:
                    os.read(master, 65536)
                except OSError:
                    return

    reader = threading.Thread(target=drain_terminal, daemon=True)
    reader.start()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*wrapper, sys.executable, str(FIRST_FRAME), which],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        pass_fds=(ready_write,),
        env={**env, "BENCH_READY_FD": str(ready_write)},
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    os.close(ready_write)
    try:
        readable, _, _ = select.select([ready_read], [], [], TIMEOUT)
        elapsed = time.perf_counter() - start
        if not readable or not os.read(ready_read, 1):
            raise RuntimeError(f"{which}: no first frame within {TIMEOUT:.0f}s")
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        done.set()
        reader.join()
        os.close(master)
        os.close(ready_read)
    return elapsed


def first_frame_instructions(which: str, env: dict[str, str], scratch: Path) -> float:
    """Millions of instructions the child executes from its start to its first frame."""
    log = scratch / f"cachegrind-{which}.log"
    wrapper = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        f"--log-file={log}",
    ]
    first_frame_seconds(which, {**env, "BENCH_EXIT_AT_READY": "1"}, wrapper)
    found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text())
    if found is None:
        raise RuntimeError(f"{which}: no instruction count in valgrind's log {log}")
    return int(found.group(1).replace(",", "")) / 1e6


def instructions(env: dict[str, str], scratch: Path, reps: int) -> None:
    """Print the instructions to the first frame of each app, and their ratio."""
    print("\ninstructions from process start to first frame (valgrind cachegrind)")
    if shutil.which("valgrind") is None:
        print("  valgrind is not installed: no instruction counts")
        return
    # A count does not depend on what else the machine runs: no need to alternate.
    counts = {
        which: [first_frame_instructions(which, env, scratch) for _ in range(reps)]
        for which in ("agentworld", "minimal")
    }
    for which, values in counts.items():
        print(f"  {which:>10}  {summarize(values).show(1, ' M')}")
    ratios = [a / m for a, m in zip(counts["agentworld"], counts["minimal"], strict=True)]
    print(f"  agentworld ÷ minimal  {summarize(ratios).show()}")


IMPORT_PROBE = """
import sys
from agentworld_tui.cli import main
try:
    main([{flag!r}])
except SystemExit:
    pass
print("HEAVY", *[name for name in {heavy!r} if name in sys.modules], file=sys.stderr)
"""


def light_commands(env: dict[str, str]) -> bool:
    """``--version`` and ``--help`` must not import Textual or llama.cpp; print what they do."""
    ok = True
    for flag in ("--version", "--help"):
        code = IMPORT_PROBE.format(flag=flag, heavy=HEAVY)
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
        )
        elapsed = time.perf_counter() - start
        line = [x for x in run.stderr.splitlines() if x.startswith("HEAVY")]
        imported = line[-1].split()[1:] if line else ["(probe failed)"]
        ok = ok and run.returncode == 0 and not imported
        shown = ", ".join(imported) if imported else "neither textual nor llama_cpp"
        print(f"  agentworld {flag:<9} {elapsed * 1000:6.0f} ms, imports {shown}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 repetitions")
    parser.add_argument("--reps", type=int, default=0)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind)"
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    reps = args.reps or (5 if args.quick else 21)
    print(f"benchmark 5 · start-up · {machine()}")
    with tempfile.TemporaryDirectory(prefix="agentworld-bench-") as scratch:
        env = child_env(Path(scratch))
        for which in ("agentworld", "minimal"):  # warm the page cache and .pyc files
            first_frame_seconds(which, env)
        times: dict[str, list[float]] = {"agentworld": [], "minimal": []}
        ratios: list[float] = []
        for rep in range(reps):
            order = ("agentworld", "minimal") if rep % 2 == 0 else ("minimal", "agentworld")
            got = {which: first_frame_seconds(which, env) for which in order}
            for which, seconds in got.items():
                times[which].append(seconds)
            ratios.append(got["agentworld"] / got["minimal"])
        print("\nprocess start to first frame (120x36 pty, real terminal driver)")
        for which, values in times.items():
            print(f"  {which:>10}  {summarize([v * 1000 for v in values]).show(0, ' ms')}")
        ratio = summarize(ratios)
        print(f"  agentworld ÷ minimal  {ratio.show()}")
        print(f"  target <= {TARGET}: {verdict(ratio.median <= TARGET)}")
        if args.instructions:
            instructions(env, Path(scratch), 3)
        print("\ncommands that must stay light")
        light = light_commands(env)
        print(f"  --version and --help stay light: {verdict(light)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
