"""Benchmark: what shadow mode adds to a step, over the slower of its two sides.

One world model (a real OpenAI-compatible server on 127.0.0.1 that answers at once, or
after ``--model-ms``) and one real terminal twin (a tmux in a sandbox; each action types a
command and waits ``--twin-ms``). Each repetition runs, in an order flipped every time:

- the world model alone: ``Simulator.send`` and wait for the recorded, saved turn;
- the twin alone: ``TwinRunner.act``;
- shadow mode: ``Simulator.send(..., shadow=...)``, both at once, the turn recorded with
  its divergence and saved.

Printed: each way's step time, and what shadow mode adds per step: from the later of the
two sides' answers to the recorded turn (the divergence, the hand-overs between threads),
beside the same span for a plain turn (from the model's last event to the recorded turn).
Target: p95 under 5 ms over the slower side. Turns are not saved unless ``--save`` (a save
costs the same with a twin or without; with it, both spans hold it).

    python bench/shadow.py              # 60 steps a way (~1 min)
    python bench/shadow.py --quick      # 8 steps a way
    python bench/shadow.py --save       # each turn saved to a session file too
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from faultserver import FaultServer, Reply
from figures import machine, percentile, summarize, verdict

import agentworld_tui.domains  # noqa: F401  # registers the domains, as front-ends do
from agentworld_tui.domains import get_domain
from agentworld_tui.engines.base import Finished, GenerationParams
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.reality.spec import TwinSpec
from agentworld_tui.simulator import Simulator, TurnRun
from agentworld_tui.simulator.shadow import Shadow, ShadowRun
from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, new_session
from agentworld_tui.world.workspace import Workspace

TARGET_MS = 5.0
TURNS_A_SESSION = 10
"""A fresh session every so many steps, so that the history stays the same size."""
ANSWER = (
    "Reading the screen.</think><predicted_observation>"
    "root@twin:/app# echo step\nstep\nroot@twin:/app#</predicted_observation>"
)


class Timed:
    """When each plain turn's last event came from the engine's thread."""

    finished_at: dict[int, float] = {}
    plain_sink = TurnRun.sink

    @classmethod
    def install(cls) -> None:
        def sink(run: TurnRun, event: object) -> None:
            if type(event) is Finished and not isinstance(run, ShadowRun):
                cls.finished_at[id(run)] = time.monotonic()
            cls.plain_sink(run, event)

        TurnRun.sink = sink  # type: ignore[method-assign]


def action(twin_ms: float) -> Action:
    entry = {"keystrokes": "echo step\n", "duration": twin_ms / 1000}
    return get_domain("terminal").parse_action(json.dumps([entry]), Scenario("b", "b"))


class Sessions:
    """A session per way, replaced every ``TURNS_A_SESSION`` steps, saved after each turn."""

    def __init__(self, folder: Path, state: str) -> None:
        self.folder, self.state = folder, state
        self.made: dict[str, tuple[Session, Workspace]] = {}

    def get(self, way: str, saving: bool) -> tuple[Session, Any]:
        found = self.made.get(way)
        if found is None or len(found[0].turns) >= TURNS_A_SESSION:
            session, _ = new_session(get_domain("terminal"), Scenario("b", "B", state=self.state))
            workspace = Workspace([session], path=self.folder / f"{way}.json")
            found = self.made[way] = (session, workspace)
        workspace = found[1]

        def save(_session: Session) -> str | None:
            workspace.save()
            return None

        return found[0], save if saving else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps a way")
    parser.add_argument("--twin-ms", type=float, default=150.0, help="each action's wait")
    parser.add_argument("--model-ms", type=float, default=0.0, help="the model's delay")
    parser.add_argument("--save", action="store_true", help="save each turn to a file")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps = 8 if args.quick else args.steps
    print(
        f"benchmark shadow: a step in shadow mode against each side alone · {machine()}",
        flush=True,
    )
    Timed.install()
    reply = Reply(content=[ANSWER], trickle_s=args.model_ms / 1000 / max(1, len(ANSWER) + 200))
    spec = TwinSpec("terminal")
    runner, first = spec.start()
    shadow = Shadow(runner, "real", spec)
    keys = action(args.twin_ms)
    model: list[float] = []
    twin: list[float] = []
    both: list[float] = []
    added: list[float] = []
    plain_tail: list[float] = []
    slower_twin = 0
    try:
        with FaultServer(default=reply) as server, tempfile.TemporaryDirectory() as folder:
            simulator = Simulator(RemoteEngine(server.url), GenerationParams(max_tokens=256))
            assert simulator.load_and_wait() is None
            sessions = Sessions(Path(folder), first.text)
            ways = ["model", "twin", "shadow"]
            for step in range(steps + 1):  # the first round warms up and is left out
                order = ways if step % 2 == 0 else ways[::-1]
                for way in order:
                    began = time.monotonic()
                    if way == "twin":
                        runner.act(keys)
                        took = time.monotonic() - began
                        if step:
                            twin.append(took * 1000)
                        continue
                    session, save = sessions.get(way, args.save)
                    run = simulator.send(
                        session, keys, save=save, shadow=shadow if way == "shadow" else None
                    )
                    run.wait()
                    done = time.monotonic()
                    if not step:
                        continue
                    if isinstance(run, ShadowRun):
                        later = max(run.generated_at, run.real_at)
                        slower_twin += run.real_at > run.generated_at
                        both.append((done - began) * 1000)
                        added.append((done - later) * 1000)
                    else:
                        model.append((done - began) * 1000)
                        plain_tail.append((done - Timed.finished_at.pop(id(run))) * 1000)
            simulator.close()
    finally:
        runner.close()
    print(
        f"{steps} steps a way, the twin waits {args.twin_ms:g} ms an action, turns "
        f"{'saved' if args.save else 'not saved'}; the twin was the slower side in "
        f"{slower_twin} of {len(both)} shadow steps"
    )
    for name, values in (("model alone", model), ("twin alone", twin), ("shadow", both)):
        print(
            f"{name:>12} step ms   {summarize(values).show(1)}   p95 {percentile(values, 95):.1f}"
        )
    slower = [max(a, b) for a, b in zip(model, twin, strict=True)]
    over = [s - m for s, m in zip(both, slower, strict=True)]
    print(f"shadow − the slower side alone, ms (paired by repetition)   {summarize(over).show(2)}")
    print(
        f"after the later side: shadow ms   {summarize(added).show(2)}   "
        f"p95 {percentile(added, 95):.2f}"
    )
    print(
        f"after the model: plain turn ms    {summarize(plain_tail).show(2)}   "
        f"p95 {percentile(plain_tail, 95):.2f}"
    )
    p95 = percentile(added, 95)
    if args.save:  # the save is in both spans: shadow mode adds what the plain turn has not
        p95 -= percentile(plain_tail, 95)
        print(f"saved turns: shadow p95 − plain p95 {p95:.2f} ms")
    print(f"target shadow's added latency p95 < {TARGET_MS:g} ms: {verdict(p95 < TARGET_MS)}")


if __name__ == "__main__":
    main()
