"""The flags that route calls between the world model and a real twin, and ground the world
model in recorded reality, the same on every front-end that has a twin beside its world
model (``mcp serve``, ``env serve``, ``rollout``):

``--routes FILE|default`` (a rule file, or the shipped one), ``--traces FILE`` (a trace
store: similar real answers go into the world model's prompt, and the real answers of
this run are added to it where it can be written) and ``--grounding-budget TOKENS``.
With the twin flags (``cli/twin_flags.py``) ``reality_from_args`` checks everything,
then starts the twin, into one ``simulator.routing.Reality`` (``mcp serve``: one twin for
the server); ``episode_routing_from_args`` checks them for the front-ends that start a
twin per episode (``env serve``, ``rollout``), which hand the rules and the store to
their environments.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError
from agentworld_tui.cli.twin_flags import twin_spec_from_args

if TYPE_CHECKING:
    from agentworld_tui.reality.routing import RuleSet, ToolInfo
    from agentworld_tui.reality.traces import TraceStore
    from agentworld_tui.simulator.routing import Reality

DEFAULT_BUDGET = 2000
"""``reality.grounding.DEFAULT_BUDGET`` (written out: the parser is built before reality
loads)."""
SHIPPED_RULES = "default"


def _budget(text: str) -> int:
    if not text.isdigit() or not 100 <= int(text) <= 200_000:
        raise argparse.ArgumentTypeError("must be a whole number of tokens from 100 to 200000")
    return int(text)


def add_routing_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "routing and grounding",
        "send each call to the real twin, the world model or both, by rules; show the "
        "world model what the real tools answered before (docs/reality.md)",
    )
    group.add_argument(
        "--routes",
        metavar="FILE|default",
        help="routing rules (TOML) for the calls, or 'default' for the shipped ones (reads "
        "real, everything else simulated); needs a twin. Without it, a twin shadows every call",
    )
    group.add_argument(
        "--traces",
        metavar="FILE",
        help="a trace store (made if missing): similar earlier real answers of the same "
        "tool go into the world model's prompt, and this run's real answers are added to it",
    )
    group.add_argument(
        "--grounding-budget",
        type=_budget,
        metavar="TOKENS",
        help=f"tokens the real examples may take in a prompt (default {DEFAULT_BUDGET})",
    )


def rules_from_args(args: argparse.Namespace) -> RuleSet | None:
    """The rules ``--routes`` names (None without the flag); a UserError with the file,
    line and problem for a file with an error."""
    if args.routes is None:
        return None
    from agentworld_tui.reality.routing import RuleFileError, default_rules, load_rules

    wanted = args.routes.strip()
    if not wanted:
        raise UserError("--routes is empty: give a rule file, or 'default'")
    try:
        if wanted == SHIPPED_RULES:
            return default_rules()
        return load_rules(Path(wanted).expanduser())
    except RuleFileError as exc:
        raise UserError(f"--routes: {exc}") from None


def store_from_args(args: argparse.Namespace) -> TraceStore | None:
    """The trace store ``--traces`` names, made when it does not exist; opened read-only
    where this user cannot write it (it then grounds, and keeps nothing)."""
    if args.traces is None:
        if args.grounding_budget is not None:
            raise UserError("--grounding-budget goes with --traces FILE")
        return None
    from agentworld_tui.reality.traces import TraceStoreError, open_store

    try:
        return open_store(Path(args.traces).expanduser())
    except TraceStoreError as exc:
        raise UserError(f"--traces: {exc}") from None


def reality_from_args(
    args: argparse.Namespace, domain: str, tools: Sequence[ToolInfo] = ()
) -> Reality | None:
    """What the twin, routing and grounding flags ask for (None: none of them), the twin
    started; every mistake a UserError of one line, found before anything starts. The
    caller closes it (``Reality.close``)."""
    spec = twin_spec_from_args(args, domain)
    rules = rules_from_args(args)
    if rules is not None and spec is None:
        raise _routes_alone(domain)
    store = store_from_args(args)
    if spec is None and store is None:
        return None
    from agentworld_tui.reality.grounding import DEFAULT_BUDGET as BUDGET
    from agentworld_tui.reality.grounding import Grounder
    from agentworld_tui.reality.spec import TwinStartError
    from agentworld_tui.simulator.routing import Reality

    runner = first = None
    if spec is not None:
        try:
            runner, first = spec.start()
        except TwinStartError as exc:
            if store is not None:
                store.close()
            reason = str(exc).removeprefix("the twin did not start: ")
            raise UserError(f"the {domain} twin did not start: {reason}") from None
    grounder = None
    if store is not None:
        grounder = Grounder(store, budget=args.grounding_budget or BUDGET)
    return Reality(
        runner,
        spec,
        args.deliver or "real",
        rules,
        tuple(tools),
        grounder,
        store if store is not None and store.writable else None,
        first,
    )


@dataclass(frozen=True)
class RoutingFlags:
    """What the routing flags ask of a front-end that starts a twin per episode: the rules
    (None: every step shadowed where there is a twin), the trace store (the caller closes
    it) and the grounding budget (None: the default)."""

    rules: RuleSet | None = None
    traces: TraceStore | None = None
    grounding_budget: int | None = None


def episode_routing_from_args(
    args: argparse.Namespace, *, twinned: bool, domain: str | None = None
) -> RoutingFlags:
    """The routing flags checked for episodes beside twins (``twinned``: a twin was
    asked for; ``domain``: the one domain served, None for many); every mistake a
    UserError of one line, before anything starts. The caller closes the store."""
    rules = rules_from_args(args)
    if rules is not None and not twinned:
        raise _routes_alone(domain)
    return RoutingFlags(rules, store_from_args(args), args.grounding_budget)


def _routes_alone(domain: str | None) -> UserError:
    if domain == "mcp":
        where = "the real server the calls may go to (--twin-command CMD or --twin-url URL)"
    elif domain is not None:
        where = "the sandbox the calls may go to (--twin)"
    else:
        where = "the twin the calls may go to (--twin, or --twin-command/--twin-url for mcp)"
    return UserError(f"--routes goes with a twin: {where}")
