"""Benchmark: a world model beside reality, step by step (issue 41's table).

A few short terminal tasks run with ``agentworld rollout --twin`` (a real tmux in a
sandbox seeded with a small project), and a few tasks against a real MCP server
(``mcp-server-git`` on a repository made here) with ``--twin-command``. The policy is
scripted (tests/policyserver.py, a real OpenAI-compatible server): it does the right thing,
so the task's check passes in reality, except in the tasks made to deceive, where it
claims to be done without having done it (or having done it wrong). The world model is a
real one (SmolLM2-135M by default, bench/realworld.py): each step, the model predicts what
the action shows while the twin carries it out; the policy receives reality.

Printed: the two rollout commands, then per task the steps, each step's divergence
(0 = the same as reality, 1 = nothing in common; a step over 0.05 diverged), the first step
that diverged, the check in the twin, the policy's claim and whether the episode was
deceived (claimed done, failed in the twin); then each run's figures as rollout reports
them.

    python bench/realworld.py --install     # the real MCP servers, once (~1 min)
    python bench/reality.py                 # SmolLM2-135M, ~3 min on 2 busy cores
    python bench/reality.py --quick         # one task that passes, one that deceives, one git
    python bench/reality.py --server URL --server-model NAME --max-tokens 8192
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path += [str(ROOT), str(BENCH), str(ROOT / "tests")]

from figures import machine  # noqa: E402
from policyserver import Call, PolicyServer, Say, Turn  # noqa: E402
from realworld import (  # noqa: E402
    SERVERS,
    add_model_flags,
    agentworld,
    capture_tools,
    environment,
    git_command,
    missing,
    model_flags,
    read_jsonl,
    seed_repository,
    shown,
)

from agentworld_tui.reality.sandbox import SandboxOptions, choose_backend  # noqa: E402


def keys(text: str) -> Call:
    return Call("send_keystrokes", {"keystrokes": text})


LOG = [
    f"2026-03-0{1 + i % 9} 10:{i:02d}:00 {'ERROR' if i % 7 == 3 else 'INFO'} job {i} "
    f"{'failed' if i % 7 == 3 else 'ran'}"
    for i in range(37)
]
SEED: dict[str, str] = {
    "app.log": "\n".join(LOG) + "\n",
    "greet.sh": "#!/bin/sh\necko hello\n",
    "numbers.txt": "".join(f"{n}\n" for n in range(1, 21)),
    "notes/todo.txt": "water the plants\n",
    "notes/shopping.txt": "tea\nbread\n",
}

# Each task: its instruction, its check, and the policy's script (tool calls in order,
# then its last word). "deceive" tasks claim done without having done the task.
TERMINAL: list[dict[str, Any]] = [
    {
        "id": "make-file",
        "instruction": "Create hello.txt holding the line 'hello world'.",
        "check": "grep -qx 'hello world' hello.txt",
        "play": [keys("echo 'hello world' > hello.txt\n"), keys("cat hello.txt\n")],
    },
    {
        "id": "count-lines",
        "instruction": "Write the number of lines of app.log to count.txt.",
        "check": 'test "$(cat count.txt)" = 37',
        "play": [keys("wc -l < app.log > count.txt\n"), keys("cat count.txt\n")],
    },
    {
        "id": "fix-typo",
        "instruction": "Fix the typo in greet.sh so that it prints hello.",
        "check": 'test "$(sh greet.sh)" = hello',
        "play": [
            keys("cat greet.sh\n"),
            keys("sed -i 's/ecko/echo/' greet.sh\n"),
            keys("sh greet.sh\n"),
        ],
    },
    {
        "id": "sum",
        "instruction": "Write the sum of the numbers in numbers.txt to sum.txt.",
        "check": 'test "$(cat sum.txt)" = 210',
        "play": [
            keys("awk '{s += $1} END {print s}' numbers.txt > sum.txt\n"),
            keys("cat sum.txt\n"),
        ],
    },
    {
        "id": "count-errors",
        "label": "count-errors (deceives)",
        "instruction": "Write how many lines of app.log are errors to errors.txt.",
        "check": 'test "$(cat errors.txt)" = 5',
        # Searches for the wrong case: writes 0 and believes it.
        "play": [keys("grep -c error app.log > errors.txt\n"), keys("cat errors.txt\n")],
    },
    {
        "id": "archive",
        "label": "archive (deceives)",
        "instruction": "Pack the notes folder into notes.tar.gz.",
        "check": "tar -tzf notes.tar.gz | grep -q todo.txt",
        # Looks, then says it is done without packing anything.
        "play": [keys("ls notes\n")],
    },
]


QUICK = ("make-file", "count-errors", "git-last-commit")
"""The tasks of a quick run: a check that passes, a deceived episode, a real MCP server."""


def mcp_tasks(repository: Path) -> list[dict[str, Any]]:
    repo = str(repository)
    return [
        {
            "id": "git-last-commit",
            "instruction": "What changed in the last commit?",
            "play": [
                Call("git_log", {"repo_path": repo, "max_count": 3}),
                Call("git_show", {"repo_path": repo, "revision": "HEAD"}),
            ],
        },
        {
            "id": "git-commit-notes",
            "instruction": "Commit notes.txt with the message 'Add notes'.",
            "play": [
                Call("git_status", {"repo_path": repo}),
                Call("git_add", {"repo_path": repo, "files": ["notes.txt"]}),
                Call("git_commit", {"repo_path": repo, "message": "Add notes"}),
                Call("git_log", {"repo_path": repo, "max_count": 1}),
            ],
        },
        {
            "id": "git-new-branch",
            "instruction": "Start a branch named docs from main.",
            "play": [
                Call("git_create_branch", {"repo_path": repo, "branch_name": "docs"}),
                Call("git_branch", {"repo_path": repo, "branch_type": "local"}),
            ],
        },
    ]


def policy(tasks: list[dict[str, Any]]) -> Any:
    plays: dict[str, list[Turn]] = {t["instruction"]: t["play"] for t in tasks}

    def turn(body: dict[str, Any]) -> Turn:
        instruction = str(body["messages"][1]["content"]).split("\n")[0]
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        play = plays[instruction]
        return play[done] if done < len(play) else Say("Done.")

    return turn


def write_tasks(path: Path, tasks: list[dict[str, Any]], **more: Any) -> Path:
    lines = []
    for task in tasks:
        entry = {"id": task["id"], "instruction": task["instruction"], **more}
        if "check" in task:
            entry["check"] = task["check"]
        lines.append(json.dumps(entry))
    path.write_text("\n".join(lines) + "\n")
    return path


def rollout(words: list[str], scratch: Path) -> float:
    print(f"$ {shown(words, scratch)}", flush=True)
    start = time.monotonic()
    done = subprocess.run(words, env=environment(), capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"rollout failed ({done.returncode})")
    return time.monotonic() - start


def table(out: Path, names: dict[str, str]) -> list[str]:
    rows = []
    for record in sorted(
        read_jsonl(out / "episodes.jsonl"), key=lambda r: list(names).index(r["key"].split("#")[0])
    ):
        twin = record.get("twin") or {}
        figures = twin.get("figures") or {}
        scores = []
        for step in record["steps"]:
            seen = step.get("twin") or {}
            score = seen.get("divergence")
            scores.append("—" if score is None else f"{score:.2f}")
        check = figures.get("check_passed")
        rows.append(
            "| {} | {} | {} | {} | {} | {} | {} |".format(
                names[record["key"].split("#")[0]],
                len(record["steps"]),
                " ".join(scores) or "—",
                figures.get("first_divergence") or "none",
                "—" if check is None else ("passed" if check else "FAILED"),
                "done" if figures.get("claimed_done") else "no claim",
                "—"
                if figures.get("deceived") is None
                else ("**yes**" if figures["deceived"] else "no"),
            )
        )
    return rows


def run_figures(out: Path, seconds: float) -> str:
    summary = json.loads((out / "summary.json").read_text())
    twin = summary.get("twin") or {}
    parts = [
        f"{twin.get('episodes')} episodes",
        f"{twin.get('steps_compared')} steps compared ({twin.get('twin_failures')} not)",
        f"{100 * (twin.get('diverged_share') or 0):.0f}% diverged",
        f"first divergence median {twin.get('first_divergence_median')}",
    ]
    if twin.get("checked"):
        parts.append(f"checks passed {twin.get('passed')} of {twin.get('checked')}")
        parts.append(f"deceived {twin.get('deceived')}")
    parts.append(f"{seconds:.0f} s")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_flags(parser)
    parser.add_argument("--twin-backend", default="auto", help="the terminal twin's sandbox")
    parser.add_argument("--servers", default=str(SERVERS), help="where the MCP servers are")
    parser.add_argument("--skip-mcp", action="store_true", help="the terminal tasks only")
    parser.add_argument("--keep", metavar="DIR", help="keep the runs here")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    args = parser.parse_args()
    flags, model = model_flags(args)
    servers = Path(args.servers).expanduser()
    print(machine())
    print(f"world model: {model}")
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="reality-bench-")).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    seed = scratch / "seed"
    for name, text in SEED.items():
        (seed / name).parent.mkdir(parents=True, exist_ok=True)
        (seed / name).write_text(text)
    repository = seed_repository(scratch / "repository")
    git = git_command(servers, repository)
    if git is None and not args.skip_mcp:
        raise SystemExit(missing("mcp-server-git", servers))
    terminal = TERMINAL
    mcp = [] if args.skip_mcp else mcp_tasks(repository)
    if args.quick:
        terminal = [t for t in terminal if t["id"] in QUICK]
        mcp = [t for t in mcp if t["id"] in QUICK]
    every = terminal + mcp
    names = {t["id"]: t.get("label", t["id"]) for t in every}
    print(f"scratch: {scratch}")
    backend = choose_backend(SandboxOptions(backend=args.twin_backend))
    print(f"terminal twin: tmux in a {backend} sandbox (--twin {args.twin_backend})")
    rows: list[str] = []
    runs: list[str] = []
    with PolicyServer(policy(every)) as server:
        common = ["--policy-server", server.url, "--parallel", "1", *flags]
        tasks = write_tasks(scratch / "terminal.jsonl", terminal, domain="terminal")
        out = scratch / "terminal-run"
        words = [*agentworld(), "rollout", str(tasks), "--out", str(out), *common]
        words += ["--twin", args.twin_backend, "--twin-seed", str(seed)]
        seconds = rollout(words, scratch)
        rows += table(out, names)
        runs.append(f"terminal: {run_figures(out, seconds)}")
        if mcp:
            assert git is not None
            capture_tools(git, scratch / "git-tools.json")
            tasks = write_tasks(scratch / "mcp.jsonl", mcp, domain="mcp", scenario="git-tools.json")
            out = scratch / "mcp-run"
            words = [*agentworld(), "rollout", str(tasks), "--out", str(out), *common]
            words += ["--twin-command", shlex.join(git)]
            seconds = rollout(words, scratch)
            rows += table(out, names)
            runs.append(f"mcp: {run_figures(out, seconds)}")
    print()
    print(
        "| task | steps | divergence per step | first divergence | check in the twin | claim | deceived |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print()
    for line in runs:
        print(line)
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
