"""Benchmark: does grounding make the world model answer more like reality? (issue 42)

Two real MCP servers (bench/realworld.py: ``mcp-server-git`` on a repository made here,
``@modelcontextprotocol/server-filesystem`` on a folder made here), their read-only tools
served by ``agentworld mcp serve`` with the server as its twin. For each server, a varied
set of calls (every tool, many arguments) is split, per tool, into calls recorded and
calls held out:

1. **Record.** An agent (the official SDK's client) makes the recorded calls through
   ``mcp serve --twin-command SERVER --routes default --traces STORE``: the shipped rules
   send read-only tools to reality, and reality's answers go into the trace store. No
   held-out call is made here.
2. **Measure.** The held-out calls, each in a session of its own, through ``mcp serve
   --twin-command SERVER`` (shadow mode: the world model and reality answer each call,
   and the turn records the divergence between them), once without grounding and once
   with ``--traces`` (a copy of the store: the examples come from the recorded calls and,
   as ``mcp serve`` keeps adding them, from the held-out calls answered before in the
   same arm).

Printed: the commands, the store's contents, and per server the held-out calls' mean
divergence and diverged share without grounding and with it, how many calls grounding
made closer or further (by more than 0.01), and the examples each call was shown. Reality
is the same in both arms (the tools only read), so the two columns differ by the prompt
alone (and the sampling it changes).

    python bench/realworld.py --install     # the real MCP servers, once (~1 min)
    python bench/grounding.py               # SmolLM2-135M, ~8 min on 2 busy cores
    python bench/grounding.py --quick       # 2 held-out calls a server, short answers
    python bench/grounding.py --server URL --server-model NAME --max-tokens 8192
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# bench/mcp.py has the SDK's package name: this folder must not stand before the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path += [str(ROOT), str(BENCH)]

from figures import machine  # noqa: E402
from realworld import (  # noqa: E402
    BRANCHES,
    FOLDER,
    SERVERS,
    add_model_flags,
    agentworld,
    capture_tools,
    environment,
    filesystem_command,
    git_command,
    missing,
    model_flags,
    seed_folder,
    seed_repository,
    shown,
)

QUICK_HELD = 2
"""Held-out calls per server in a quick run."""

CLOSER = 0.01
"""A held-out call's divergence moved by more than this is counted closer or further."""

Call = tuple[str, dict[str, Any]]


def git_calls(repository: Path) -> list[Call]:
    repo = {"repo_path": str(repository)}
    calls: list[Call] = [("git_status", repo)]
    calls += [("git_diff_unstaged", {**repo, "context_lines": n}) for n in (0, 1, 3)]
    calls += [("git_diff_staged", repo), ("git_diff_staged", {**repo, "context_lines": 1})]
    calls += [("git_log", {**repo, "max_count": n}) for n in range(1, 7)]
    calls += [
        ("git_log", {**repo, "start_timestamp": "2026-01-03"}),
        ("git_log", {**repo, "end_timestamp": "2026-01-02"}),
    ]
    revisions = ["HEAD", "HEAD~1", "HEAD~2", "HEAD~3", "HEAD~4", "main"]
    revisions += [branch for branch, _, _ in BRANCHES]
    calls += [("git_show", {**repo, "revision": r}) for r in revisions]
    targets = ["HEAD~1", "HEAD~2", "HEAD~3"] + [branch for branch, _, _ in BRANCHES]
    calls += [("git_diff", {**repo, "target": t}) for t in targets]
    calls += [("git_branch", {**repo, "branch_type": t}) for t in ("local", "all", "remote")]
    return calls


def filesystem_calls(root: Path) -> list[Call]:
    files = sorted(FOLDER)
    folders = sorted({str(Path(f).parent) for f in files})
    calls: list[Call] = [("read_text_file", {"path": str(root / f)}) for f in files]
    calls += [
        ("read_text_file", {"path": str(root / "notes/todo.txt"), "head": 2}),
        ("read_text_file", {"path": str(root / "beds/south.csv"), "tail": 1}),
        ("read_text_file", {"path": str(root / "notes/seeds.txt"), "head": 1}),
    ]
    calls += [("list_directory", {"path": str(root / d)}) for d in folders]
    calls += [("list_directory_with_sizes", {"path": str(root / d)}) for d in (".", "beds")]
    calls += [("get_file_info", {"path": str(root / f)}) for f in files[::3]]
    calls += [
        ("search_files", {"path": str(root), "pattern": p})
        for p in ("*.csv", "*.txt", "*.py", "*.json")
    ]
    calls += [("directory_tree", {"path": str(root / d)}) for d in ("notes", "beds")]
    return calls


@dataclass
class Server:
    name: str
    command: list[str]
    calls: list[Call]


def split(calls: list[Call], share: float, seed: int) -> tuple[list[Call], list[Call]]:
    """(recorded, held out): per tool, ``share`` of its calls held out, at least one kept
    for the store (a tool called once is only recorded)."""
    by_tool: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        by_tool[call[0]].append(call)
    rng = random.Random(seed)
    recorded: list[Call] = []
    held: list[Call] = []
    for tool_calls in by_tool.values():
        shuffled = tool_calls[:]
        rng.shuffle(shuffled)
        n = min(round(len(shuffled) * share), len(shuffled) - 1)
        held += shuffled[:n]
        recorded += shuffled[n:]
    rng.shuffle(recorded)
    rng.shuffle(held)
    return recorded, held


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Served:
    """``agentworld mcp serve`` over streamable HTTP on 127.0.0.1, as a process."""

    def __init__(self, words: list[str], log: Path) -> None:
        self.port = free_port()
        self.words = [*words, "--transport", "http", "--port", str(self.port)]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> Served:
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                self.words, env=environment(), stdout=sink, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"mcp serve ended ({self.process.returncode}): {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"mcp serve did not listen within 600 s: {self.log}")

    def __exit__(self, *_exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def make_calls(
    url: str, calls: list[Call], per_session: int, say: Callable[[str], None]
) -> None:
    """The calls, ``per_session`` to a connection (each connection is a session)."""
    from mcp import Client

    for start in range(0, len(calls), per_session):
        async with Client(url) as client:
            for tool, arguments in calls[start : start + per_session]:
                began = time.monotonic()
                result = await client.call_tool(tool, arguments)
                error = " (a tool error)" if result.is_error else ""
                took = time.monotonic() - began
                say(f"  {tool} {json.dumps(arguments)}: {took:.1f} s{error}")


def turns(folder: Path) -> list[dict[str, Any]]:
    """Every turn of every session file in ``folder``."""
    found = []
    for path in sorted(folder.glob("*.json")):
        for tab in json.loads(path.read_text())["tabs"]:
            found += tab["turns"]
    return found


@dataclass
class Step:
    tool: str
    arguments: str
    score: float | None
    diverged: bool | None
    examples: int
    tokens: int
    prediction: str
    real: str


def steps(folder: Path) -> dict[str, Step]:
    """The recorded held-out turns by call (tool and arguments)."""
    found = {}
    for turn in turns(folder):
        action = turn["action"]["payload"]
        key = json.dumps([action["name"], action.get("arguments", {})], sort_keys=True)
        reality = turn.get("reality") or {}
        divergence = reality.get("divergence") or {}
        grounding = turn.get("grounding") or {}
        found[key] = Step(
            tool=action["name"],
            arguments=json.dumps(action.get("arguments", {})),
            score=divergence.get("score"),
            diverged=divergence.get("diverged"),
            examples=len(grounding.get("examples") or []),
            tokens=int(grounding.get("tokens") or 0),
            prediction=turn.get("observation") or "",
            real=((reality.get("real") or {}).get("text")) or "",
        )
    return found


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def compare(name: str, without: dict[str, Step], grounded: dict[str, Step]) -> list[str]:
    """The table's rows for one server: all its held-out calls, then each tool."""
    keys = [k for k in without if k in grounded and without[k].score is not None]
    keys = [k for k in keys if grounded[k].score is not None]
    rows = []
    groups: list[tuple[str, list[str]]] = [(f"**{name}, all**", keys)]
    for tool in sorted({without[k].tool for k in keys}):
        groups.append((f"{name}: {tool}", [k for k in keys if without[k].tool == tool]))
    for label, chosen in groups:
        off = [without[k].score or 0.0 for k in chosen]
        on = [grounded[k].score or 0.0 for k in chosen]
        closer = sum(1 for a, b in zip(off, on, strict=True) if b < a - CLOSER)
        further = sum(1 for a, b in zip(off, on, strict=True) if b > a + CLOSER)
        shares = [
            100 * mean([1.0 if side[k].diverged else 0.0 for k in chosen])
            for side in (without, grounded)
        ]
        examples = mean([float(grounded[k].examples) for k in chosen])
        tokens = mean([float(grounded[k].tokens) for k in chosen])
        rows.append(
            f"| {label} | {len(chosen)} | {mean(off):.3f} | {mean(on):.3f} | "
            f"{shares[0]:.0f}% | {shares[1]:.0f}% | {closer} / {further} | "
            f"{examples:.1f} ({tokens:.0f} tokens) |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_flags(parser)
    parser.add_argument("--servers", default=str(SERVERS), help="where the MCP servers are")
    parser.add_argument("--only", choices=("git", "filesystem"), help="one server only")
    parser.add_argument(
        "--held-out", type=float, default=0.2, help="the share of each tool's calls held out"
    )
    parser.add_argument(
        "--calls-per-session", type=int, default=1, help="held-out calls to a session"
    )
    parser.add_argument("--split-seed", type=int, default=1)
    parser.add_argument("--keep", metavar="DIR", help="keep everything here")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_HELD} held-out calls a server"
    )
    args = parser.parse_args()
    flags, model = model_flags(args)
    folder = Path(args.servers).expanduser()
    print(machine())
    print(f"world model: {model}")
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="grounding-bench-")).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"scratch: {scratch}")

    def say(line: str) -> None:
        print(line.replace(str(scratch), "$SCRATCH"), flush=True)

    servers: list[Server] = []
    if args.only in (None, "git"):
        repository = seed_repository(scratch / "repository")
        command = git_command(folder, repository)
        if command is None:
            raise SystemExit(missing("mcp-server-git", folder))
        servers.append(Server("git", command, git_calls(repository)))
    if args.only in (None, "filesystem"):
        root = seed_folder(scratch / "garden")
        command = filesystem_command(folder, root)
        if command is None:
            raise SystemExit(missing("server-filesystem (or node)", folder))
        servers.append(Server("filesystem", command, filesystem_calls(root)))

    rows: list[str] = []
    try:
        for server in servers:
            home = scratch / server.name
            home.mkdir()
            recorded, held = split(server.calls, args.held_out, args.split_seed)
            if args.quick:
                held = held[:QUICK_HELD]
            tools = home / "tools.json"
            served = capture_tools(
                server.command, tools, tuple(sorted({c[0] for c in server.calls}))
            )
            say(
                f"\n{server.name}: {len(served)} tools served, {len(recorded)} calls recorded, "
                f"{len(held)} held out"
            )
            store = home / "store.db"
            base = [*agentworld(), "mcp", "serve", str(tools), *flags]
            base += ["--twin-command", shlex.join(server.command)]
            words = [*base, "--sessions", str(home / "recorded"), "--routes", "default"]
            words += ["--traces", str(store)]
            say(f"$ {shown(words, scratch)}  # record")
            with Served(words, home / "record.log") as serve:
                asyncio.run(make_calls(serve.url, recorded, len(recorded), lambda _: None))
            shown_store = subprocess.run(
                [*agentworld(), "traces", "show", str(store)],
                env=environment(), capture_output=True, text=True, check=True,
            )  # fmt: skip
            say(shown_store.stdout.rstrip())
            arms: dict[str, dict[str, Step]] = {}
            for arm in ("without", "grounded"):
                words = [*base, "--sessions", str(home / arm)]
                if arm == "grounded":
                    copy = home / "store-grounded.db"
                    shutil.copyfile(store, copy)
                    words += ["--traces", str(copy)]
                say(f"$ {shown(words, scratch)}  # held out, {arm}")
                with Served(words, home / f"{arm}.log") as serve:
                    asyncio.run(make_calls(serve.url, held, args.calls_per_session, say))
                arms[arm] = steps(home / arm)
            rows += compare(server.name, arms["without"], arms["grounded"])
            (home / "steps.json").write_text(
                json.dumps(
                    {arm: {k: vars(s) for k, s in found.items()} for arm, found in arms.items()},
                    indent=1,
                )
            )
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(
        "| held-out calls | n | divergence without | with grounding | diverged without | "
        "with | closer / further | examples shown |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
