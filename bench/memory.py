"""Benchmark 6: the app's resident memory beyond the model's own mapping, over a 50-turn session.

The real app under ``run_test()`` plays a terminal session on a scripted model whose every
answer is a 40-line screen (so the history grows, and the oldest turns leave the context as
they would), saving the session after each turn as the app does. Resident memory is read
from /proc/self/smaps: the total, less what is resident of the model file's own mapping
(those pages belong to the page cache and are shared). For comparison, a separate process
loads the same model with the same context in llama-cpp-python alone and reads the same
final prompt: its figure is what any program running this model holds.

    python bench/memory.py            # 50 turns
    python bench/memory.py --quick    # 3 turns
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine
from models import write_scripted_model

N_CTX = 8192


def screen_script() -> str:
    """Reasoning, then a 40-line listing as the observation (about 1.6 kB)."""
    rows = [f"-rw-r--r-- 1 user user {1000 + 37 * i:>6} Jun 24 10:{i:02d} part-{i:03d}.log"
            for i in range(38)]  # fmt: skip
    screen = "user@devbox:~/logs$ ls -l\ntotal 152\n" + "\n".join(rows) + "\nuser@devbox:~/logs$"
    return f"Listing the log folder.</think><predicted_observation>{screen}</predicted_observation>"


def resident(model: Path) -> tuple[int, int]:
    """(all resident bytes, resident bytes of the model file's mappings) of this process."""
    total = mapped = 0
    inside = False
    target = str(model.resolve())
    with open("/proc/self/smaps") as handle:
        for line in handle:
            head = line.split(None, 5)
            if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = len(head) == 6 and head[5].strip() == target
            elif line.startswith("Rss:"):
                kib = int(line.split()[1]) * 1024
                total += kib
                if inside:
                    mapped += kib
    return total, mapped


BARE = """
import json, sys
sys.path.insert(0, {bench!r})
import llama_cpp
from memory import resident
from pathlib import Path
model = Path({model!r})
llm = llama_cpp.Llama(model_path=str(model), n_ctx={n_ctx}, n_threads=2, verbose=False)
llm.eval(llm.tokenize(Path({prompt!r}).read_bytes(), add_bos=False, special=True))
print(json.dumps(resident(model)))
"""


async def session(model: Path, turns: int) -> tuple[list[tuple[int, int, int]], str]:
    from agentworld_tui.config import Settings
    from agentworld_tui.ui.app import AgentWorldApp
    from agentworld_tui.world.context import history_budget

    settings = Settings()
    settings.model.path = str(model)
    settings.model.n_ctx = N_CTX
    settings.model.threads = 2
    settings.generation.max_tokens = 1024
    app = AgentWorldApp(settings, offer_models=False, offer_resume=False)
    samples: list[tuple[int, int, int]] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 120)
        pane = app.active_pane
        pane.line.focus()
        await pilot.pause()
        samples.append((0, *resident(model)))
        for n in range(1, turns + 1):
            pane.line.value = f"ls -l part-{n:03d}.log"
            await pilot.press("enter")
            while len(pane.session.turns) < n or pane.busy:
                await asyncio.sleep(0.02)
            if n % max(1, turns // 5) == 0 or n == turns:
                await pilot.pause()
                samples.append((n, *resident(model)))
        engine: Any = app.engine
        turn = pane.session.turns[-1]
        budget = history_budget(engine.info.n_ctx, app.simulator.params.max_tokens)
        messages = pane.session.prompt(turn, engine.count_tokens, budget).messages
        full, _ = engine.render(messages, app.simulator.params)
        omitted = turn.omitted_turns
        await app.action_quit()
    return samples, full + f"\n{omitted}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 turns")
    parser.add_argument("--turns", type=int, default=0)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    turns = args.turns or (3 if args.quick else 50)
    mib = 2**20
    with tempfile.TemporaryDirectory(prefix="agentworld-bench-") as scratch:
        root = Path(scratch)
        os.environ.setdefault("AGENTWORLD_CONFIG_DIR", str(root / "config"))
        os.environ.setdefault("AGENTWORLD_DATA_DIR", str(root / "data"))
        model = write_scripted_model(root / "screen.gguf", screen_script(), n_ctx_train=N_CTX)
        print(f"benchmark 6 · memory · {turns} turns · {machine()}")
        print(f"model {model.name}: {model.stat().st_size / mib:.1f} MiB file, context {N_CTX}")
        samples, last = asyncio.run(session(model, turns))
        prompt, omitted = last.rsplit("\n", 1)
        prompt_file = root / "prompt.txt"
        prompt_file.write_text(prompt, encoding="utf-8")
        code = BARE.format(
            bench=str(Path(__file__).resolve().parent),
            model=str(model),
            n_ctx=N_CTX,
            prompt=str(prompt_file),
        )
        bare = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if bare.returncode:
            raise SystemExit(f"the llama-cpp-python-only process failed:\n{bare.stderr[-2000:]}")
        bare_total, bare_mapped = json.loads(bare.stdout.strip().splitlines()[-1])
        saved = sum(p.stat().st_size for p in (root / "data").rglob("*") if p.is_file())
    print("\n  turns   resident   model mapping   beyond the model")
    for n, total, mapped in samples:
        print(
            f"  {n:>5}  {total / mib:7.1f} MiB  {mapped / mib:9.1f} MiB  {(total - mapped) / mib:9.1f} MiB"
        )
    first, settled, end = samples[0], samples[min(1, len(samples) - 1)], samples[-1]
    beyond = (end[1] - end[2]) / mib
    growth = ((end[1] - end[2]) - (first[1] - first[2])) / mib
    late = ((end[1] - end[2]) - (settled[1] - settled[2])) / mib
    late_turns = max(1, end[0] - settled[0])
    bare_beyond = (bare_total - bare_mapped) / mib
    print(f"\n  after {turns} turns: {beyond:.1f} MiB beyond the model's mapping")
    print(f"  grown since the model loaded: {growth:.1f} MiB (mostly the context's cache filling)")
    print(
        f"  grown from turn {settled[0]} to {end[0]}: {late:.1f} MiB "
        f"({late * 1024 / late_turns:.0f} KiB a turn)"
    )
    print(f"  llama-cpp-python alone, same model, context and prompt: {bare_beyond:.1f} MiB")
    print(f"  the app's own share: {beyond - bare_beyond:.1f} MiB")
    print(
        f"  oldest turns out of the context at the end: {omitted}; saved session files {saved / 1024:.0f} KiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
