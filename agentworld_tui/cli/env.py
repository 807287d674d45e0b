"""``agentworld env serve``: a domain as an OpenEnv environment over HTTP and WebSockets.

Every connection gets an environment of its own on one shared engine; a server's steps run
concurrently (``--concurrency`` requests at once), a local model's one at a time. Needs the
``openenv`` extra (openenv-core). The shared guard (``agents.guard``) is in front of it:
127.0.0.1 unless a token is set, and no web page but its own.

With the twin flags (``cli.twin_flags``), every episode runs beside a real twin of its own,
at most ``--max-twins`` at once; the twin, its seed folder and the check come from the
command line only. The routing flags (``cli.routing_flags``, as ``mcp serve`` has them) send
each step real, sim or shadow by rules, and ground the world model in a trace store.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.episode_flags import add_concurrency, add_max_steps, whole
from agentworld_tui.cli.launch import UserError, make_engine, settings_from_args
from agentworld_tui.cli.routing_flags import (
    RoutingFlags,
    add_routing_flags,
    episode_routing_from_args,
)
from agentworld_tui.cli.schedule_flags import add_schedule_flags, schedule_from_args
from agentworld_tui.cli.twin_flags import add_twin_flags, twin_spec_from_args

if TYPE_CHECKING:
    import socket

    from agentworld_tui.config import Settings
    from agentworld_tui.reality.spec import TwinSpec
    from agentworld_tui.world.domain import Domain, Scenario
    from agentworld_tui.world.fictional_world import FictionalWorld

DEFAULT_PORT = 8766
"""Beside ``mcp serve``'s 8765; 8000 is llama.cpp's and vLLM's, 30000 SGLang's."""
TOKEN_ENV = "AGENTWORLD_ENV_TOKEN"
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")
EXTRA_HINT = (
    "pipx inject agentworld-tui 'openenv-core>=0.3,<0.4' (a pipx install), or "
    "pip install 'openenv-core>=0.3,<0.4' in agentworld's environment"
)
LIBRARY_LOGS = ("uvicorn", "uvicorn.error", "uvicorn.access", "fastapi", "openenv")
SESSION_IDLE_SECONDS = 1800.0
"""``--session-idle-timeout``'s default (``openenv_server`` needs the openenv extra)."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 7 * 86400:
        raise argparse.ArgumentTypeError("must be a number of seconds from 1 to 604800")
    return value


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
        f"on 127.0.0.1:{DEFAULT_PORT}; another address needs a token (--token-env), which "
        "every request must then carry. Clients choose scenarios by name only.",
    )
    serve.add_argument("--domain", default="terminal", help="the domain (default terminal)")
    serve.add_argument(
        "--scenario",
        metavar="NAME|FILE",
        help="the scenario episodes start from: a scenario of the domain, or a file "
        "(clients may name another of the domain's in reset)",
    )
    serve.add_argument("--world", metavar="NAME", help="a fictional world by name, or a .toml")
    add_schedule_flags(serve)
    add_max_steps(serve, most=100_000, default=None, help="end each episode after N steps")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address (default 127.0.0.1; another needs a token)"
    )
    serve.add_argument(
        "--port", type=whole(1, 65535), default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--token-env",
        metavar="VAR",
        default=TOKEN_ENV,
        help="environment variable holding the token every request must carry "
        f"(default {TOKEN_ENV}); needed for any address but the loopback",
    )
    serve.add_argument(
        "--max-sessions",
        type=whole(1, 100_000),
        default=256,
        metavar="N",
        help="WebSocket sessions at once; one more is refused (default 256)",
    )
    serve.add_argument(
        "--session-idle-timeout",
        type=_seconds,
        default=SESSION_IDLE_SECONDS,
        metavar="SECONDS",
        help="a WebSocket session that sends nothing for this long is closed, its "
        f"environment let go (default {SESSION_IDLE_SECONDS:g})",
    )
    add_concurrency(
        serve,
        default=64,
        help="requests in flight on a server at once (default 64; match its parallel slots)",
    )
    serve.add_argument(
        "--sessions", metavar="DIR", help="save every episode as a session file in this folder"
    )
    add_twin_flags(serve)
    serve.add_argument(
        "--max-twins",
        type=whole(1, 1024),
        default=4,
        metavar="N",
        help="with a twin: twins alive at once, one per episode (default 4); an episode "
        "beyond them is refused",
    )
    add_routing_flags(serve)
    serve.set_defaults(handler=cmd_env_serve)
    parser.set_defaults(handler=lambda _args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def cmd_env_serve(args: argparse.Namespace) -> int:
    from agentworld_tui.agents.env.results import EnvError
    from agentworld_tui.agents.env.scenarios import resolve_domain, resolve_scenario, resolve_world
    from agentworld_tui.agents.guard import GuardError, ListenError, bind, require_token

    settings = settings_from_args(args)
    try:  # a bad domain, scenario or world is said before anything starts
        domain = resolve_domain(args.domain)
        scenario = resolve_scenario(domain, args.scenario)
        world = resolve_world(args.world)
    except EnvError as exc:
        raise UserError(str(exc)) from None
    schedule = schedule_from_args(args, domain.name)
    twin = twin_spec_from_args(args, domain.name)
    token = os.environ.get(args.token_env, "")
    if token and not _TOKEN_TEXT.fullmatch(token):
        raise UserError(
            f"${args.token_env} must be 16 to 512 letters, digits or . _ ~ + / = - characters"
        )
    routing = episode_routing_from_args(args, twinned=twin is not None, domain=domain.name)
    try:
        if twin is not None:
            _twin_works(twin, args.check)
        try:
            require_token(args.host, token, f"put one in ${args.token_env}")
            sock = bind(args.host, args.port)
        except (GuardError, ListenError) as exc:
            raise UserError(str(exc)) from None
        start = ServeStart(domain, scenario, world, schedule, token, twin, routing)
        try:
            return _serve(args, settings, start, sock)
        finally:
            sock.close()
    finally:
        if routing.traces is not None:
            routing.traces.close()


@dataclass(frozen=True)
class ServeStart:
    """What the command line settled before the socket was bound."""

    domain: Domain
    scenario: Scenario
    world: FictionalWorld | None
    schedule: object
    token: str
    twin: TwinSpec | None = None
    routing: RoutingFlags = field(default_factory=RoutingFlags)


def _serve(
    args: argparse.Namespace, settings: Settings, start: ServeStart, sock: socket.socket
) -> int:
    try:
        import uvicorn

        from agentworld_tui.agents.env.openenv_server import ServeConfig, make_app
    except ImportError as exc:
        raise UserError(
            f"the OpenEnv server needs the openenv extra ({exc}): {EXTRA_HINT}"
        ) from None
    from agentworld_tui.agents.env import EnvError, TwinSlots, load_simulator, open_simulator
    from agentworld_tui.agents.guard import Guard, GuardedApp, address_of, reachable_hint

    engine = make_engine(settings)
    simulator = open_simulator(
        engine, params=settings.generation_params(), concurrency=args.concurrency
    )
    slots = TwinSlots(args.max_twins) if start.twin is not None else None
    try:
        config = ServeConfig(
            domain=start.domain.name,
            simulator=simulator,
            scenario=start.scenario,
            world=start.world,
            schedule=start.schedule,
            max_steps=args.max_steps,
            session_dir=Path(args.sessions).expanduser() if args.sessions else None,
            max_sessions=args.max_sessions,
            twin=start.twin,
            deliver=args.deliver or "real",
            check=args.check or "",
            twin_slots=slots,
            session_idle_seconds=args.session_idle_timeout,
            routes=start.routing.rules,
            traces=start.routing.traces,
            grounding_budget=start.routing.grounding_budget,
        )
        try:
            load_simulator(simulator)
            app = make_app(config)
        except EnvError as exc:
            raise UserError(str(exc)) from None
        guard = Guard(args.host, sock.getsockname()[1], start.token)
        server = uvicorn.Server(
            uvicorn.Config(
                GuardedApp(app, guard),
                log_config=None,
                access_log=False,
                timeout_graceful_shutdown=5,
            )
        )
        _route_library_logs()
        where = f"http://{address_of(sock, args.host)}"
        hint = reachable_hint(args.host, sock.getsockname()[1])
        twinned = (
            f"; every episode beside a {start.twin.kind} twin of its own, at most "
            f"{args.max_twins} at once"
            if start.twin is not None
            else ""
        )
        twinned += _routing_said(start.routing)
        print(
            f"agentworld env serve: {args.domain} as an OpenEnv environment at {where}"
            f"{f' ({hint})' if hint else ''} (POST /reset, POST /step, GET /state, "
            f"WebSocket /ws){twinned}; Ctrl+C stops it",
            file=sys.stderr,
            flush=True,
        )
        server.run(sockets=[sock])
    finally:
        if slots is not None:
            slots.close_all()
        simulator.close()
    return 0


def _routing_said(routing: RoutingFlags) -> str:
    """What the startup line says of the routing flags ("" for none)."""
    said = ""
    if routing.rules is not None:
        said += f"; steps routed by {routing.rules.source}"
    if routing.traces is not None:
        kept = "" if routing.traces.writable else ", read-only"
        said += f"; grounded in {routing.traces.path}{kept}"
    return said


def _twin_works(spec: TwinSpec, check: str | None) -> None:
    """Start one twin and close it, so that a twin that cannot start is said in one line
    before the server listens, not at every client's reset."""
    from agentworld_tui.agents.env.results import EnvError
    from agentworld_tui.agents.env.twins import check_command
    from agentworld_tui.reality.spec import TwinStartError

    if check is not None:
        try:
            check_command(check, spec.domain)
        except EnvError as exc:
            raise UserError(f"--check: {exc}") from None
    try:
        runner, _first = spec.start()
    except TwinStartError as exc:
        reason = str(exc).removeprefix("the twin did not start: ")
        raise UserError(f"the {spec.domain} twin did not start: {reason}") from None
    runner.close()


def _route_library_logs() -> None:
    """uvicorn's, FastAPI's and openenv's records (a client that left while it was
    answered is a traceback there) go to the log file, never to the terminal."""
    ours = logging.getLogger("agentworld")
    level = logging.DEBUG if ours.level == logging.DEBUG else logging.WARNING
    for name in LIBRARY_LOGS:
        logger = logging.getLogger(name)
        logger.handlers = list(ours.handlers) or [logging.NullHandler()]
        logger.propagate = False
        logger.setLevel(level)
