"""``agentworld export FILE``: a session file as AgentWorldBench JSONL, Markdown or JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentworld_tui.cli.launch import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: object) -> None:
    parser = sub.add_parser(
        "export",
        help="export a session file's turns (AgentWorldBench JSONL, Markdown, JSON)",
        description="Export the shown branch of every tab in a session file.",
    )
    parser.add_argument("file", metavar="FILE", help="a session file saved by the app or predict")
    parser.add_argument(
        "--format",
        required=True,
        choices=("agentworldbench", "markdown", "json"),
        help="agentworldbench: one JSONL line per turn, as the benchmark's files; "
        "markdown: a readable transcript; json: every turn's fields",
    )
    parser.add_argument("--domain", metavar="D", help="only the tabs simulating this domain")
    parser.add_argument(
        "--reasoning", action="store_true", help="include the reasoning (markdown, json)"
    )
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    parser.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from agentworld_tui.world.export import (
        agentworldbench_jsonl,
        json_transcript,
        markdown_transcript,
    )
    from agentworld_tui.world.store import write_atomic
    from agentworld_tui.world.workspace import WorkspaceError, load_workspace

    path = Path(args.file)
    try:
        workspace = load_workspace(path)
    except WorkspaceError as exc:
        raise UserError(str(exc)) from None
    tabs = workspace.tabs
    if args.domain:
        tabs = [s for s in tabs if s.domain.name == args.domain]
        if not tabs:
            have = ", ".join(sorted({s.domain.name for s in workspace.tabs})) or "none"
            raise UserError(f"{path} has no {args.domain} tab (it has: {have})")
    if args.format == "agentworldbench":
        text = agentworldbench_jsonl(tabs)
    elif args.format == "markdown":
        text = markdown_transcript(tabs, reasoning=args.reasoning, title=workspace.name)
    else:
        text = json_transcript(tabs, reasoning=args.reasoning)
    if args.output:
        out = Path(args.output)
        try:
            write_atomic(out, text.encode("utf-8"), follow_links=True)
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
        print(f"agentworld: wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
