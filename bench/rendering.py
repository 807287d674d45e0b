"""Benchmark 4: a 4,000-token answer streamed token by token ÷ the same answer at once.

The real app runs under ``run_test()`` (160×50). An engine hands the terminal tab a
prepared stream through the app's own path (engine thread, engine queue, the pane's
frames, Textual's screen updates): in one case 4,000 deltas of one token each, as fast as
the engine thread can hand them (a fast GPU, a server, a replay), in the other one delta
with the whole text. Both end the turn as the app does (the answer is replaced by its
highlighted form, the session is saved). The figure is the main thread's CPU time from the
first delta until the last frame is drawn: everything the app does for the text.

The same runs again at a set pace (``--rate``, 1,000 tokens a second): then the streamed
side draws frames for as long as the stream lasts, within the pane's budget of a share of
a core (``UI_SHARE``, 0.8%), so its cost follows the stream's duration (4 s here) and the ratio
says how long the stream was more than how the text was drawn; it is reported with the
share of a core the streamed side spent beyond the at-once side over the stream, and no
target.

A second measurement draws a frame every few tokens whatever the time (4: the app's pace
at 120 tokens a second and 30 frames a second; 1: a frame per token), the pane drawing
after each and the visible rows of the view rendered. It shows what a frame costs along
the answer: the last quarter's frames against the second quarter's say whether a token
costs more as the text grows. Its total is frames × that cost: when tokens come slower
than frames, what the app spends follows the stream's duration, not the answer's length.

Both the terminal view (the answer) and the reasoning panel are measured, alternating
streamed and at-once runs.

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

from benchapp import bench_app
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
    """An engine that keeps the turn open until the bench releases it, then hands out its
    prepared deltas as fast as its thread can and finishes the turn with the whole text
    (run_turn records it, as with a real engine)."""

    def __init__(self) -> None:
        from agentworld_tui.engines.base import EngineInfo

        self.info = EngineInfo("held-turn", "CPU", 32768)
        self.loaded = True
        self.release = threading.Event()
        self.result: tuple[str, str] = ("", "")
        self.deltas: list[Any] = []
        self.rate = 0.0
        """Deltas a second (0: as fast as the thread can hand them)."""
        self.hold = 0.0
        """Seconds to wait before the first delta."""

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
        time.sleep(self.hold)
        began = time.perf_counter()
        for i, event in enumerate(self.deltas):
            if self.rate:
                wait = began + i / self.rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            yield event
        reasoning, observation = self.result
        stats = GenerationStats(generated_tokens=1, stop_reason="eos")
        yield Finished(reasoning, observation, True, stats)


def render_views(*views: Any) -> None:
    """Render views as a screen update asks them to: the whole view is asked for, and
    Textual's line cache hands back the rows that did not change."""
    from textual.geometry import Region

    for view in views:
        view.render_lines(Region(0, 0, *view.outer_size))


def delta(kind: str, piece: str, count: int) -> Any:
    from agentworld_tui.engines.base import AnswerDelta, ReasoningDelta

    if kind == "reasoning":
        return ReasoningDelta(piece, count, count)
    return AnswerDelta(piece, count)


async def start_turn(app: Any, engine: HeldTurnEngine, tokens: list[str], kind: str) -> Any:
    """A fresh session in the terminal tab and a turn sent; the engine holds it open."""
    from agentworld_tui.domains.terminal import command
    from agentworld_tui.world.session import new_session

    pane = app.active_pane
    session, _ = new_session(pane.domain, pane.session.scenario)
    pane.replace_session(session)
    await asyncio.sleep(0.05)
    text = "".join(tokens)
    engine.result = (text, "done") if kind == "reasoning" else ("thinking", text)
    assert pane.send(pane.domain.make_action([command("find .")], session.scenario))
    await asyncio.sleep(0.05)  # the prompt is built; the pane waits for the first delta
    return pane


async def app_run(
    app: Any, pilot: Any, engine: HeldTurnEngine, tokens: list[str], kind: str, streamed: bool
) -> tuple[float, int]:
    """Main-thread CPU seconds for a turn through the app's own path, from the first delta
    to the last frame: one delta a token (``streamed``) or one with the whole text after
    as long as the streamed turn lasts (what a turn costs whatever it shows, the status
    line's clock for one, is then the same on both sides); and how many frames the pane
    drew."""
    if streamed:
        engine.deltas = [delta(kind, piece, i + 1) for i, piece in enumerate(tokens)]
        engine.hold = 0.0
    else:  # at once, at the end of a turn as long as the streamed one
        engine.deltas = [delta(kind, "".join(tokens), len(tokens))]
        engine.hold = len(tokens) / engine.rate if engine.rate else 0.0
    pane = await start_turn(app, engine, tokens, kind)
    frame_due = pane.frames._frame_due
    frames = 0

    def counted() -> bool:  # the frames the pane draws (the bench's count only)
        nonlocal frames
        due = frame_due()
        frames += due
        return bool(due)

    pane.frames._frame_due = counted
    app.turn_ended.clear()
    start = time.thread_time()
    engine.release.set()
    await app.turn_ended.wait()  # no polling: the main thread does only what the app does
    await pilot.pause()  # the screen update that shows the finished turn
    spent = time.thread_time() - start
    del pane.frames._frame_due
    view = pane.reasoning.view if kind == "reasoning" else pane.screen_view
    assert "".join(tokens).strip().split()[-1] in view.text, "the text was not shown"
    return spent, frames


async def one_run(
    app: Any, engine: HeldTurnEngine, tokens: list[str], kind: str, per_frame: int
) -> tuple[float, list[float]]:
    """Main-thread CPU seconds for one turn, its tokens drawn ``per_frame`` at a time (0:
    all at once) by the bench itself; with streaming, also the cost of each frame."""
    engine.deltas, engine.hold = [], 0.0  # the bench hands the deltas; the turn ends at once
    pane = await start_turn(app, engine, tokens, kind)
    text = "".join(tokens)
    view = pane.reasoning.view if kind == "reasoning" else pane.screen_view
    per_frame_cost: list[float] = []
    start = time.thread_time()
    if per_frame:
        for i, piece in enumerate(tokens):
            pane.run._events.append(delta(kind, piece, i + 1))  # as the engine thread does
            if (i + 1) % per_frame and i + 1 < len(tokens):
                continue
            at = time.thread_time()
            pane.frames._next_frame = 0.0  # the frame is due
            pane.frames._frame()
            render_views(view)
            per_frame_cost.append(time.thread_time() - at)
    else:
        pane.run._events.append(delta(kind, text, len(tokens)))
        pane.frames._next_frame = 0.0
        pane.frames._frame()
        render_views(view)
    engine.release.set()
    while pane.busy:
        while pane.busy and not pane.run.pending:
            await asyncio.sleep(0)
        pane.frames._next_frame = 0.0
        pane.frames._frame()
    render_views(pane.screen_view, pane.reasoning.view)
    return time.thread_time() - start, per_frame_cost


async def measure(args: argparse.Namespace) -> bool:
    from agentworld_tui.config import Settings

    engine = HeldTurnEngine()
    app = bench_app()(Settings(), engine=engine, offer_models=False, offer_resume=False)
    results: list[bool] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await asyncio.wait_for(app.model_ready.wait(), 30)
        for kind, tokens in (
            ("answer", answer_tokens(args.tokens)),
            ("reasoning", reasoning_tokens(args.tokens)),
        ):
            view = "terminal view (answer)" if kind == "answer" else "reasoning panel"
            print(f"\n{view} · {len(tokens)} tokens · {len(''.join(tokens))} characters")
            for rate in (0.0, args.rate):
                ok = await through_the_app(app, pilot, engine, tokens, kind, args.reps, rate)
                results.append(ok)
            await frame_by_frame(app, engine, tokens, kind, args.reps, args.per_frame)
        await app.action_quit()
    return all(results)


async def through_the_app(
    app: Any,
    pilot: Any,
    engine: HeldTurnEngine,
    tokens: list[str],
    kind: str,
    reps: int,
    rate: float,
) -> bool:
    engine.rate = rate
    for streamed in (True, False):  # warm-up
        await app_run(app, pilot, engine, tokens, kind, streamed)
    ms: dict[bool, list[float]] = {True: [], False: []}
    frames: list[float] = []
    ratios: list[float] = []
    for rep in range(reps):
        got = {}
        for streamed in (True, False) if rep % 2 == 0 else (False, True):
            got[streamed], drawn = await app_run(app, pilot, engine, tokens, kind, streamed)
            ms[streamed].append(got[streamed] * 1000)
            if streamed:
                frames.append(drawn)
        ratios.append(got[True] / got[False])
    pace = f"{rate:,.0f} tokens a second" if rate else "as fast as the engine thread hands them"
    print(f"  through the app, tokens {pace}:")
    print(f"    a delta a token   {summarize(ms[True]).show(1, ' ms')}")
    print(f"    one delta         {summarize(ms[False]).show(1, ' ms')}")
    print(f"    frames drawn, a delta a token  {summarize(frames).show(0)}")
    main = summarize(ratios)
    print(f"    token by token ÷ at once   {main.show()}")
    if rate:
        from agentworld_tui.ui.frames import UI_SHARE

        # Paced, the streamed side draws frames for as long as the stream lasts, and the
        # pane keeps its frames to about UI_SHARE of a core: what they cost follows the
        # stream's duration, not the answer's length (at 100 tokens a second the same
        # answer would take ten times as long). So no target here: the share says whether
        # the frames keep to their budget.
        seconds = len(tokens) / rate
        extra = [(a - b) / 1000 for a, b in zip(ms[True], ms[False], strict=True)]
        share = [100 * e / seconds for e in extra]
        print(f"    streamed beyond at once over the {seconds:.1f} s stream, % of a core  "
              f"{summarize(share).show(2, '%')}")  # fmt: skip
        print(f"    the frames' budget (UI_SHARE): {100 * UI_SHARE:.1f}% of a core; no target")
        return True
    ok = main.median <= TARGET
    print(f"    target token by token ÷ at once <= {TARGET}: {verdict(ok)}")
    return ok


async def frame_by_frame(
    app: Any, engine: HeldTurnEngine, tokens: list[str], kind: str, reps: int, per_frame: int
) -> None:
    modes = (per_frame, 1, 0)
    for mode in modes:  # warm-up
        await one_run(app, engine, tokens, kind, mode)
    ms: dict[int, list[float]] = {mode: [] for mode in modes}
    ratios: dict[int, list[float]] = {mode: [] for mode in modes[:2]}
    growth: list[float] = []
    for rep in range(reps):
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
    count = len(tokens) // per_frame
    print(f"  a frame every {per_frame} tokens whatever the time ({count} frames), by the bench:")
    print(f"    {per_frame} tokens a frame  {summarize(ms[per_frame]).show(1, ' ms')}")
    print(f"    1 token a frame   {summarize(ms[1]).show(1, ' ms')}")
    print(f"    all at once       {summarize(ms[0]).show(1, ' ms')}")
    print(f"    streamed ({per_frame} a frame) ÷ at once   {summarize(ratios[per_frame]).show()}")
    print(f"    streamed (1 a frame) ÷ at once   {summarize(ratios[1]).show()}")
    print(f"    a frame's cost, last quarter ÷ second quarter  {summarize(growth).show()}")
    per = [m / count for m in ms[per_frame]]
    print(f"    a frame's cost  {summarize(per).show(3, ' ms')}")


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
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="a second pace for the engine, tokens a second (the first is as fast as it can)",
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
