"""``agentworld traces``: the trace store that grounds the world model in real answers.

``traces import STORE SOURCE...`` adds the real exchanges of session files (the turns
reality answered: twinned, routed) and AgentWorldBench files or folders (every recorded
turn) to a store, made if missing; ``traces show STORE`` says what it holds, tool by tool;
``traces repair STORE`` makes a damaged store again from what can still be read. Serving
with ``mcp serve --traces STORE`` grounds the simulated calls in it (docs/reality.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError

if TYPE_CHECKING:
    from agentworld_tui.reality.traces import ImportReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: object) -> None:
    traces = sub.add_parser(
        "traces",
        help="the trace store of real answers that grounds the world model",
        description="A trace store keeps real exchanges (a call and reality's answer); "
        "mcp serve --traces STORE shows the world model the most similar ones. See "
        "docs/reality.md.",
    )
    actions = traces.add_subparsers(dest="traces_command", metavar="ACTION", required=True)
    add = actions.add_parser(
        "import",
        help="add the real exchanges of session files and AgentWorldBench files to a store",
        description="Session files give the turns reality answered (twinned or routed "
        "real); AgentWorldBench *_test.jsonl files (or folders of them) give every "
        "recorded turn. Exchanges already in the store are kept once.",
    )
    add.add_argument("store", metavar="STORE", help="the trace store (made if missing)")
    add.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="a session file (.json), an AgentWorldBench file (.jsonl) or a folder of them",
    )
    add.set_defaults(handler=cmd_import)
    show = actions.add_parser("show", help="the tools a store holds exchanges of, and how many")
    show.add_argument("store", metavar="STORE")
    show.set_defaults(handler=cmd_show)
    repair = actions.add_parser(
        "repair",
        help="make a damaged store again from the exchanges it still holds",
        description="The exchanges that can be read are kept with their ids (sessions "
        "record them); the damaged file is kept beside as STORE.damaged.",
    )
    repair.add_argument("store", metavar="STORE")
    repair.set_defaults(handler=cmd_repair)


def cmd_import(args: argparse.Namespace) -> int:
    from agentworld_tui.reality.traces import TraceStore, TraceStoreError

    path = Path(args.store).expanduser()
    try:
        with TraceStore(path, create=not path.exists()) as store:
            for source in args.sources:
                found = Path(source).expanduser()
                if not found.exists():
                    print(f"{source}: no such file or folder")
                    continue
                if found.is_dir() or found.suffix.lower() == ".jsonl":
                    _print_report(source, store.import_bench(found))
                else:
                    _print_report(source, store.import_session_file(found))
            total = store.count()
    except TraceStoreError as exc:
        raise UserError(str(exc)) from None
    print(f"{path}: {total:,} exchanges in all")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from agentworld_tui.reality.traces import TraceStore, TraceStoreError

    path = Path(args.store).expanduser()
    try:
        with TraceStore(path, writable=False) as store:
            tools = store.tools()
    except TraceStoreError as exc:
        raise UserError(str(exc)) from None
    for domain, tool, count in tools:
        print(f"{domain}\t{tool}\t{count:,}")
    print(f"{path}: {sum(n for _, _, n in tools):,} exchanges of {len(tools):,} tools")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from agentworld_tui.reality.traces import TraceStoreError, repair_store

    path = Path(args.store).expanduser()
    if not path.is_file():
        raise UserError(f"{path}: no such trace store")
    try:
        report = repair_store(path)
    except TraceStoreError as exc:
        raise UserError(str(exc)) from None
    kept = f"{report.added:,} exchanges kept"
    lost = f", {report.skipped:,} could not be read" if report.skipped else ""
    print(f"{path}: made again, {kept}{lost}; the damaged file is {path.name}.damaged")
    for problem in report.problems:
        print(f"  {problem}")
    return 0


def _print_report(source: str, report: ImportReport) -> None:
    print(f"{source}: {report.summary()}")
    for problem in report.problems:
        print(f"  {problem}")
