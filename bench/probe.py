"""What the crash trial costs a model load: remembered, and the first time.

Before ``LlamaEngine.load`` runs a model in-process it tries the model's first decode in a
child process (``engines/probe.py``), once per build and model; after that the trial is
looked up (the build's library files and the model's head and tail are read). Measured
side by side, alternating, on a generated llama model with random weights, each a whole
``LlamaEngine.load`` then ``unload``:

- without: the trial left out (a probe that passes everything, for this measurement only);
- remembered: the trial passed before, in the cache folder;
- first: a fresh cache folder and nothing remembered in the process: the trial runs.

It prints each median and the ratios remembered / without and first / without.

    python bench/probe.py            # 9 alternating repetitions
    python bench/probe.py --quick    # 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

from figures import machine, summarize, verdict  # noqa: E402

TARGET = 1.05
"""A remembered trial adds at most 5% to a load."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    repetitions = 3 if args.quick else 9

    from ggufgen import write_random_model

    from agentworld_tui.engines import probe
    from agentworld_tui.engines.llama import LlamaEngine

    class Without(probe.CrashProbe):
        def known(self, key: str) -> bool:
            return True

        def check(self, trial: probe.Trial, key: str = "") -> probe.ProbeOutcome:
            return probe.ProbeOutcome(ok=True, remembered=True)

    with tempfile.TemporaryDirectory(prefix="probe-bench-") as folder:
        scratch = Path(folder)
        model = write_random_model(scratch / "random.gguf", n_layer=4)
        size = model.stat().st_size

        def load(trial: probe.CrashProbe) -> None:
            engine = LlamaEngine(model, n_ctx=2048, gpu_layers=0, threads=args.threads, probe=trial)
            engine.load()
            engine.unload()

        def first(repetition: int) -> None:
            probe._PASSED.clear()  # nothing remembered in the process either
            load(probe.CrashProbe(scratch / f"fresh-{repetition}"))

        remembered = probe.CrashProbe(scratch / "remembered")
        load(remembered)  # the trial passes once; later loads look it up
        load(Without())
        times: dict[str, list[float]] = {"without": [], "remembered": [], "first": []}
        for repetition in range(repetitions):
            runs = [
                ("without", lambda: load(Without())),
                ("remembered", lambda: load(remembered)),
                ("first", lambda r=repetition: first(r)),
            ]
            if repetition % 2:
                runs.reverse()
            for name, run in runs:
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)

    print(f"benchmark probe: a model load with the crash trial · {machine()}")
    print(f"model: a random llama model of {size / 2**20:.0f} MiB, {args.threads} threads")
    for name, values in times.items():
        print(f"{name:>10} load  {summarize(values).show(3, ' s')}")
    without = summarize(times["without"]).median
    ratio = summarize(times["remembered"]).median / without
    once = summarize(times["first"]).median / without
    print(f"remembered ÷ without  {ratio:.3f}")
    print(f"first ÷ without  {once:.3f}  (once per build and model)")
    print(f"target remembered ÷ without <= {TARGET}: {verdict(ratio <= TARGET)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
