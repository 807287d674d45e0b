"""Benchmark 4: rendering a 4,000-token answer streamed token by token ÷ rendering it at once.

The real app runs under ``run_test()``; the terminal tab is sent an action on an engine
that holds the turn open, and the bench hands the pane the engine's events itself: in one
case 4,000 deltas of one token each, the pane drawing after every single token (harsher
than the app, which gathers the tokens of a frame), in the other one delta with the whole
text. After each drain the visible rows of both views are rendered, as a screen update
asks them to be; the turn then finishes as it does in the app (the answer is replaced by
its highlighted form). The figure is the main thread's CPU time. Textual's own cost per
screen update for the widgets around the views does not depend on the text and is left
out: it is the same for every frame however long the answer grows.

Both the terminal view (the answer) and the reasoning panel are measured, alternating
streamed and at-once runs; it also prints the cost per token over the first and the last
500 tokens, which shows whether a token costs more as the text grows.

    python bench/rendering.py
    python bench/rendering.py --quick     # 400 tokens
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import machine, summarize, verdict

TARGET = 2.0
PROSE = "the command lists every file under the project folder and the model keeps track of which ones changed since the last step so the next screen agrees"
WORDS = PROSE.split(" ")


def answer_tokens(n: int) -> list[str]:
    """Terminal output: a long listing, about four characters a token."""
    rng = random.Random(1)
    out: list[str] = []
    line = 0
    while len(out) < n:
        out += ["-rw-r--r--", " 1", " user", " user", f" {rng.randint(10, 99999):>6}",
                " Jun", f" {rng.randint(1, 28):>2}", " 10:", f"{rng.randint(10, 59)}",
                f" src/{rng.choice(WORDS)}", f"_{line}", ".py", "\n"]  # fmt: skip
        line += 1
    return out[:n]


def reasoning_tokens(n: int) -> list[str]:
    """Prose in paragraphs, one word a token."""
    rng = random.Random(2)
    out = []
    for i in range(n):
        out.append(" " + rng.choice(WORDS))
        if i % 90 == 89:
            out.append(".\n\n")
    return out[:n]


class HeldTurnEngine:
    """An engine that keeps the turn open until the bench releases it, then finishes it
    with the text the bench streamed (run_turn records it, as with a real engine)."""

    def __init__(self) -> None:
        from agentworld_tui.engines.base import EngineInfo

        self.info = EngineInfo("held-turn", "CPU", 32768)
        self.loaded = True
        self.release = threading.Event()
        self.result: tuple[str, str] = ("", "")

    def load(self, progress: Any = None) -> None:
        pass

    def unload(self) -> None:
        pass

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def stream(self, messages: Any, params: Any, control: Any) -> Iterator[Any]:
        from agentworld_tui.engines.base import Finished, GenerationStats

        self.release.wait(600)
        self.release.clear()
        reasoning, observation = self.result
        stats = GenerationStats(generated_tokens=1, stop_reason="eos")
        yield Finished(reasoning, observation, True, stats)


def render_views(*views: Any) -> None:
    """Render views as a screen update asks them to: the whole view is asked for, and
    Textual's line cache hands back the rows that did not change."""
    from textual.geometry import Region

    for view in views:
        view.render_lines(Region(0, 0, *view.outer_size))


async def one_run(
    app: Any, engine: HeldTurnEngine, tokens: list[str], kind: str, per_frame: int
) -> tuple[float, list[float]]:
    """Main-thread CPU seconds for one turn, its tokens drawn ``per_frame`` at a time (0:
    all at once); with streaming, also the cost of each frame."""
    from agentworld_tui.domains.terminal import command
    from agentworld_tui.engines.base import AnswerDelta, ReasoningDelta
    from agentworld_tui.world.session import new_session

    pane = app.active_pane
    session, _ = new_session(pane.domain, pane.session.scenario)
    pane.replace_session(session)
    await asyncio.sleep(0.05)
    assert pane.send(pane.domain.make_action([command("find .")]))
    text = "".join(tokens)
    engine.result = (text, "done") if kind == "reasoning" else ("thinking", text)

    def delta(piece: str, count: int) -> Any:
        if kind == "reasoning":
            return ReasoningDelta(piece, count, count)
        return AnswerDelta(piece, count)

    view = pane.reasoning.view if kind == "reasoning" else pane.screen_view
    per_frame_cost: list[float] = []
    start = time.thread_time()
    if per_frame:
        for i, piece in enumerate(tokens):
            pane._events.append(delta(piece, i + 1))  # as the engine thread hands them
            if (i + 1) % per_frame and i + 1 < len(tokens):
                continue
            at = time.thread_time()
            pane._next_frame = 0.0  # the frame is due
            pane._drain()
            render_views(view)
            per_frame_cost.append(time.thread_time() - at)
    else:
        pane._events.append(delta(text, len(tokens)))
        pane._next_frame = 0.0
        pane._drain()
        render_views(view)
    engine.release.set()
    while pane.busy:
        while not pane._events and pane.busy:
            await asyncio.sleep(0)
        pane._next_frame = 0.0
        pane._drain()
    render_views(pane.screen_view, pane.reasoning.view)
    return time.thread_time() - start, per_frame_cost


async def measure(args: argparse.Namespace) -> bool:
    from agentworld_tui.config import Settings
    from agentworld_tui.ui.app import AgentWorldApp

    engine = HeldTurnEngine()
    app = AgentWorldApp(Settings(), engine=engine, offer_models=False, offer_resume=False)  # type: ignore[arg-type]
    results: list[bool] = []
    async with app.run_test(size=(160, 50)):
        await asyncio.wait_for(app.model_ready.wait(), 30)
        for kind, tokens in (
            ("answer", answer_tokens(args.tokens)),
            ("reasoning", reasoning_tokens(args.tokens)),
        ):
            modes = (args.per_frame, 1, 0)
            for mode in modes:  # warm-up
                await one_run(app, engine, tokens, kind, mode)
            ms: dict[int, list[float]] = {mode: [] for mode in modes}
            ratios: dict[int, list[float]] = {mode: [] for mode in modes[:2]}
            growth: list[float] = []
            for rep in range(args.reps):
                got: dict[int, float] = {}
                for mode in modes if rep % 2 == 0 else modes[::-1]:
                    seconds, frames = await one_run(app, engine, tokens, kind, mode)
                    got[mode] = seconds
                    if mode == 1:  # the last quarter's frames against the second's
                        q = len(frames) // 4
                        growth.append(sum(frames[-q:]) / sum(frames[q : 2 * q]))
                for mode in modes:
                    ms[mode].append(got[mode] * 1000)
                for mode in ratios:
                    ratios[mode].append(got[mode] / got[0])
            view = "terminal view (answer)" if kind == "answer" else "reasoning panel"
            print(f"\n{view} · {len(tokens)} tokens · {len(''.join(tokens))} characters")
            print(
                f"  {args.per_frame} tokens a frame  {summarize(ms[args.per_frame]).show(1, ' ms')}"
            )
            print(f"  1 token a frame   {summarize(ms[1]).show(1, ' ms')}")
            print(f"  all at once       {summarize(ms[0]).show(1, ' ms')}")
            main = summarize(ratios[args.per_frame])
            print(f"  streamed ({args.per_frame} a frame) ÷ at once   {main.show()}")
            print(f"  streamed (1 a frame) ÷ at once   {summarize(ratios[1]).show()}")
            print(f"  a frame's cost, last quarter ÷ second quarter  {summarize(growth).show()}")
            ok = main.median <= TARGET
            print(f"  target streamed ÷ at once <= {TARGET}: {verdict(ok)}")
            results.append(ok)
        await app.action_quit()
    return all(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 tokens")
    parser.add_argument("--tokens", type=int, default=0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--per-frame",
        type=int,
        default=4,
        help="tokens a frame gathers (4: 120 tokens/s at 30 frames/s)",
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args.tokens = args.tokens or (400 if args.quick else 4000)
    scratch = tempfile.TemporaryDirectory(prefix="agentworld-bench-")
    os.environ.setdefault("AGENTWORLD_CONFIG_DIR", str(Path(scratch.name) / "config"))
    os.environ.setdefault("AGENTWORLD_DATA_DIR", str(Path(scratch.name) / "data"))
    print(f"benchmark 4 · rendering cost against the answer's length · {machine()}")
    asyncio.run(measure(args))
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
