"""``agentworld env serve``: a domain as an OpenEnv environment over HTTP and WebSockets.

Every connection gets an environment of its own on one shared engine; a server's steps run
concurrently (``--concurrency`` requests at once), a local model's one at a time. Needs the
``openenv`` extra (openenv-core).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from agentworld_tui.cli.launch import UserError, make_engine, settings_from_args
from agentworld_tui.cli.schedule_flags import add_schedule_flags, schedule_from_args

DEFAULT_PORT = 8000
EXTRA_HINT = (
    "pipx inject agentworld-tui 'openenv-core>=0.3,<0.4' (a pipx install), or "
    "pip install 'openenv-core>=0.3,<0.4' in agentworld's environment"
)


def _whole(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}")
        return int(text)

    parse.__name__ = "a whole number"
    return parse


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "env",
        help="serve the simulator as an environment for agents (OpenEnv)",
        description="The simulator as an environment that RL trainers step.",
    )
    commands = parser.add_subparsers(dest="env_command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        parents=[engine],
        help="serve a domain as an OpenEnv environment (HTTP and WebSockets)",
        description="Serve one domain as an OpenEnv environment: POST /reset, POST /step, "
        "GET /state, GET /schema and a WebSocket session per connection at /ws. It listens "
        "on 127.0.0.1 unless --host says otherwise (OpenEnv has no authentication).",
    )
    serve.add_argument("--domain", default="terminal", help="the domain (default terminal)")
    serve.add_argument("--scenario", metavar="NAME", help="a scenario of the domain, or a file")
    serve.add_argument("--world", metavar="NAME", help="a fictional world by name, or a .toml")
    add_schedule_flags(serve)
    serve.add_argument(
        "--max-steps", type=_whole(1, 100_000), metavar="N", help="end each episode after N steps"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_whole(1, 65535), default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--max-sessions",
        type=_whole(1, 100_000),
        default=256,
        metavar="N",
        help="WebSocket sessions at once (default 256)",
    )
    serve.add_argument(
        "--concurrency",
        type=_whole(1, 4096),
        default=64,
        metavar="N",
        help="requests in flight on a server at once (default 64; match its parallel slots)",
    )
    serve.add_argument(
        "--sessions", metavar="DIR", help="save every episode as a session file in this folder"
    )
    serve.set_defaults(handler=cmd_env_serve)
    parser.set_defaults(handler=lambda _args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def cmd_env_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from agentworld_tui.agents.env.openenv_server import ServeConfig, make_app
    except ImportError as exc:
        raise UserError(
            f"the OpenEnv server needs the openenv extra ({exc}): {EXTRA_HINT}"
        ) from None
    from agentworld_tui.agents.env import EnvError, Environment, load_simulator, open_simulator

    settings = settings_from_args(args)
    schedule = schedule_from_args(args, args.domain)
    engine = make_engine(settings)
    simulator = open_simulator(
        engine, params=settings.generation_params(), concurrency=args.concurrency
    )
    try:
        config = ServeConfig(
            domain=args.domain,
            simulator=simulator,
            scenario=args.scenario,
            world=args.world,
            schedule=schedule,
            max_steps=args.max_steps,
            session_dir=Path(args.sessions).expanduser() if args.sessions else None,
            max_sessions=args.max_sessions,
        )
        try:
            Environment(
                config.domain,
                simulator=simulator,
                scenario=config.scenario,
                world=config.world,
                schedule=schedule,
            ).close()  # a bad domain, scenario or world is said now, not per connection
            load_simulator(simulator)
        except EnvError as exc:
            raise UserError(str(exc)) from None
        app = make_app(config)
        where = f"http://{args.host}:{args.port}"
        print(
            f"agentworld env serve: {args.domain} as an OpenEnv environment at {where} "
            "(POST /reset, POST /step, GET /state, WebSocket /ws); Ctrl+C stops it",
            file=sys.stderr,
            flush=True,
        )
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        simulator.close()
    return 0
