"""The flags that give a simulated environment a real twin, the same on every front-end
that runs turns (``predict``, ``mcp serve``, ``env serve``, ``rollout``...):

``--twin [BACKEND]``, ``--twin-seed DIR``, ``--twin-network``, ``--twin-image IMAGE``,
``--twin-on-host`` for a terminal or SWE twin in a sandbox; ``--twin-command CMD`` or
``--twin-url URL`` for an MCP twin; ``--deliver real|sim`` and ``--check CMD`` for both.
``twin_spec_from_args`` checks them into a ``TwinSpec`` (reality's own value, which the
app and the Python environment build too); ``shadow_from_args`` starts the twin.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError

if TYPE_CHECKING:
    from agentworld_tui.reality.spec import TwinSpec
    from agentworld_tui.simulator.shadow import Shadow

BACKENDS = ("auto", "podman", "docker", "bwrap", "unshare")
"""``reality.spec.TWIN_BACKENDS`` (written out: the parser is built before reality loads)."""


def add_twin_flags(parser: argparse.ArgumentParser, dest_prefix: str = "") -> None:
    """``dest_prefix``: for the flags the app takes before any sub-command
    (``launch.LEADING``; ``merge_leading`` hands them to a sub-command that takes them)."""
    group = parser.add_argument_group(
        "reality twin",
        "carry every action out for real too, beside the world model, and record how far "
        "the two differ (docs/reality.md)",
    )
    group.add_argument(
        "--twin",
        dest=dest_prefix + "twin",
        nargs="?",
        const="auto",
        choices=BACKENDS,
        metavar="BACKEND",
        help="a terminal or SWE twin in a sandbox: auto (the default), podman, docker, "
        "bwrap or unshare",
    )
    group.add_argument(
        "--twin-command",
        dest=dest_prefix + "twin_command",
        metavar="CMD",
        help="an MCP twin: the real server this command starts (stdio)",
    )
    group.add_argument(
        "--twin-url",
        dest=dest_prefix + "twin_url",
        metavar="URL",
        help="an MCP twin: the real streamable-HTTP server at URL",
    )
    group.add_argument(
        "--twin-seed",
        dest=dest_prefix + "twin_seed",
        metavar="DIR",
        help="the folder copied into the twin's sandbox",
    )
    group.add_argument(
        "--twin-network",
        dest=dest_prefix + "twin_network",
        action="store_true",
        help="give the twin's sandbox the host's network (none by default)",
    )
    group.add_argument(
        "--twin-image",
        dest=dest_prefix + "twin_image",
        metavar="IMAGE",
        help="the container image for podman or docker",
    )
    group.add_argument(
        "--twin-on-host",
        dest=dest_prefix + "twin_on_host",
        action="store_true",
        help="run the twin's commands on this machine itself, unsandboxed, with its files "
        "and network",
    )
    group.add_argument(
        "--deliver",
        dest=dest_prefix + "deliver",
        choices=("real", "sim"),
        help="the side the agent receives: reality's answer (the default with a twin) or "
        "the world model's",
    )
    group.add_argument(
        "--check",
        dest=dest_prefix + "check",
        metavar="CMD",
        help="the task's check, run in the twin at the end (exit 0 = success)",
    )


_SANDBOX_FLAGS = (
    ("twin_seed", "--twin-seed"),
    ("twin_network", "--twin-network"),
    ("twin_image", "--twin-image"),
    ("twin_on_host", "--twin-on-host"),
)


def twin_spec_from_args(args: argparse.Namespace, domain: str) -> TwinSpec | None:
    """The twin the flags ask for ``domain`` (None when they ask for none); a UserError of
    one line when they do not fit together or the domain has no twin."""
    from agentworld_tui.reality import TWIN_DOMAINS
    from agentworld_tui.reality.spec import TwinSpec

    asked = (
        args.twin is not None
        or args.twin_command is not None
        or args.twin_url is not None
        or bool(args.twin_on_host)
    )
    if not asked:
        given = [flag for name, flag in _SANDBOX_FLAGS if getattr(args, name)]
        given += [flag for flag in ("--deliver", "--check") if getattr(args, flag[2:])]
        if given:
            raise UserError(
                f"{given[0]} goes with a twin: add --twin (or --twin-command/--twin-url for mcp)"
            )
        return None
    if domain not in TWIN_DOMAINS:
        raise UserError(
            f"the {domain} domain has no twin (twins exist for {', '.join(TWIN_DOMAINS)}): "
            "it runs in simulation only"
        )
    if domain == "mcp":
        if args.twin is not None:
            raise UserError(
                "the mcp twin is a real server: give --twin-command CMD or --twin-url URL"
            )
        given = [flag for name, flag in _SANDBOX_FLAGS if getattr(args, name)]
        if given:
            raise UserError(f"{given[0]} is for terminal and swe twins (sandboxes)")
        if args.check:
            raise UserError("--check runs in a sandbox: an mcp twin has none to run it in")
        try:
            command = tuple(shlex.split(args.twin_command or ""))
        except ValueError as exc:
            raise UserError(f"--twin-command: {exc}") from None
        if args.twin_command is not None and not command:
            raise UserError("--twin-command is empty")
        if args.twin_url is not None and not args.twin_url.strip():
            raise UserError("--twin-url is empty")
        spec = TwinSpec("mcp", command=command, url=args.twin_url or "")
    else:
        if args.twin_command is not None or args.twin_url is not None:
            flag = "--twin-command" if args.twin_command is not None else "--twin-url"
            raise UserError(f"{flag} is for mcp twins; the {domain} twin is a sandbox (--twin)")
        if args.twin_on_host and args.twin not in (None, "auto"):
            raise UserError(f"--twin-on-host and --twin {args.twin} exclude each other")
        spec = TwinSpec(
            domain,
            seed=args.twin_seed or "",
            backend=args.twin or "auto",
            network=bool(args.twin_network),
            on_host=bool(args.twin_on_host),
            image=args.twin_image or "",
        )
    problem = spec.problem()
    if problem:
        raise UserError(problem)
    return spec


def shadow_from_args(args: argparse.Namespace, domain: str) -> Shadow | None:
    """The started twin the flags ask for, as a ``Shadow`` for ``Simulator.send`` (None
    when they ask for none); a UserError of one line when it cannot start. The caller
    closes ``shadow.runner`` at the end."""
    spec = twin_spec_from_args(args, domain)
    if spec is None:
        return None
    from agentworld_tui.reality.spec import TwinStartError
    from agentworld_tui.simulator.shadow import Shadow

    try:
        runner, first = spec.start()
    except TwinStartError as exc:
        raise UserError(f"the {domain} twin did not start: {_after_prefix(str(exc))}") from None
    return Shadow(runner, args.deliver or "real", spec, check=args.check or "", first=first)


APP_TABS = ("terminal", "swe", "mcp")
"""The app's tabs a command-line twin can be beside (``--tab``)."""


def app_twin_from_args(args: argparse.Namespace) -> tuple[str, Shadow] | None:
    """For the app: the tab the twin flags are for (``--tab``, else the terminal for a
    sandbox and MCP for a server) and its twin, started; None when no twin is asked for.
    A UserError of one line when the flags do not fit or the twin does not start."""
    tab = getattr(args, "tab", None)
    domain = tab
    if domain is None:
        domain = "mcp" if args.twin_command is not None or args.twin_url is not None else "terminal"
    shadow = shadow_from_args(args, domain)
    if shadow is None and tab is not None:
        raise UserError(
            "--tab names the tab a twin is for: add --twin (or --twin-command/--twin-url)"
        )
    return None if shadow is None else (domain, shadow)


def _after_prefix(reason: str) -> str:
    return reason.removeprefix("the twin did not start: ")
