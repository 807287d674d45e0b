"""``agentworld serve``: the app in a browser tab, through textual-serve.

Each browser tab that connects starts its own ``agentworld`` process with the same model
flags, so it loads its own copy of the model: one tab at a time (the default) is what a
laptop holds. The printed address carries a token that every request needs; see
``browser_server`` for the checks.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import sys

from agentworld_tui.cli.launch import UserError

DEFAULT_PORT = 8767
"""Beside ``mcp serve``'s 8765 and ``env serve``'s 8766; 8000 is llama.cpp's and vLLM's."""
TOKEN_ENV = "AGENTWORLD_SERVE_TOKEN"
MAX_SESSIONS = 64
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9._~-]{16,256}")


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("the port must be a number from 1 to 65535")
    return int(text)


def _sessions(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_SESSIONS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_SESSIONS}")
    return int(text)


def serve_token() -> str:
    """The token every request needs: the user's own from the environment, or a new
    random one for this run."""
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        return secrets.token_urlsafe(32)
    if not _TOKEN_TEXT.fullmatch(token):
        raise UserError(
            f"{TOKEN_ENV} must be 16 to 256 letters, digits or . _ ~ - (or unset it: "
            "serve then makes a random token)"
        )
    return token


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "serve",
        parents=[engine],
        help="run the app in a browser tab (textual-serve)",
        description="Serve the app over HTTP for a browser. It listens on 127.0.0.1 unless "
        "--host says otherwise. The address it prints carries a token that every request "
        f"needs (a random one per run, or your own in ${TOKEN_ENV}); pages from other sites "
        "are refused, and it runs one app at a time unless --max-sessions says more.",
    )
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument(
        "--session", metavar="FILE", help="the session file each served app opens and saves to"
    )
    parser.add_argument(
        "--max-sessions",
        type=_sessions,
        default=1,
        metavar="N",
        help="browser tabs served at once, each with its own copy of the model (default 1)",
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


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from agentworld_tui.cli.browser_server import GuardedServer
    except ImportError:
        raise UserError(
            "serving needs textual-serve, which is missing from this install: "
            "pipx inject agentworld-tui textual-serve (or pip install textual-serve)"
        ) from None
    from agentworld_tui.agents.guard import (
        ListenError,
        address_of,
        bind,
        is_loopback,
        reachable_hint,
    )
    from agentworld_tui.cli.launch import settings_from_args

    token = serve_token()
    settings_from_args(args)  # the settings file's problems are reported, the log is set up
    command = app_command(args, args.engine_parser)
    try:
        sock = bind(args.host, args.port)
    except ListenError as exc:
        raise UserError(str(exc)) from None
    port = sock.getsockname()[1]
    server = GuardedServer(
        command, host=args.host, port=port, token=token, max_sessions=args.max_sessions
    )
    if not is_loopback(args.host):
        print(
            f"agentworld: listening on {args.host}: anyone who can reach it and has the "
            "token can use the model",
            file=sys.stderr,
        )
    hint = reachable_hint(args.host, port, f"/?token={token}")
    print(
        f"agentworld: open http://{address_of(sock, args.host)}/?token={token} in a browser"
        f"{f' ({hint})' if hint else ''} (Ctrl+C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_on(sock)
    finally:
        sock.close()
    return 0
