"""``agentworld serve``: the app in a browser tab, through textual-serve.

Each browser tab that connects starts its own ``agentworld`` process with the same model
flags, so it loads its own copy of the model: one tab at a time is what a laptop holds.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import sys

from agentworld_tui.launch import UserError

DEFAULT_PORT = 8000
LOOPBACK_NAMES = ("localhost",)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("the port must be a number from 1 to 65535")
    return int(text)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "serve",
        parents=[engine],
        help="run the app in a browser tab (textual-serve)",
        description="Serve the app over HTTP for a browser. It listens on 127.0.0.1 unless "
        "--host says otherwise: anyone who can reach the address can use the model.",
    )
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument(
        "--session", metavar="FILE", help="the session file each served app opens and saves to"
    )
    parser.set_defaults(handler=cmd_serve, engine_parser=engine)


def forwarded_flags(args: argparse.Namespace, engine: argparse.ArgumentParser) -> list[str]:
    """The model and generation flags given to ``serve``, for the app it starts."""
    flags: list[str] = []
    for action in engine._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                flags.append(action.option_strings[0])
        elif value is not None:
            flags += [action.option_strings[0], str(value)]
    if getattr(args, "session", None):
        flags += ["--session", str(args.session)]
    return flags


def app_command(args: argparse.Namespace, engine: argparse.ArgumentParser) -> str:
    """The shell command textual-serve runs for each browser tab."""
    return shlex.join([sys.executable, "-m", "agentworld_tui", *forwarded_flags(args, engine)])


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UserError(
            "serving needs textual-serve: pip install 'agentworld-tui[serve]'"
        ) from None
    command = app_command(args, args.engine_parser)
    if not is_loopback(args.host):
        print(
            f"agentworld: listening on {args.host}: anyone who can reach it can use the model",
            file=sys.stderr,
        )
    server = Server(command, host=args.host, port=args.port, title="agentworld")
    print(
        f"agentworld: open http://{args.host}:{args.port} in a browser (Ctrl+C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve()
    except OSError as exc:
        raise UserError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None
    return 0
