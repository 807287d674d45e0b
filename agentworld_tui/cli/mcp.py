"""``agentworld mcp``: a simulated MCP server that any MCP client can drive.

``mcp serve`` serves a tool list (a file, or captured from a real server) or a domain's
agent tools, over stdio (the default: what a client starts as a command) or streamable
HTTP, with the world model answering every call. ``mcp tools`` prints the tool list a
``serve`` with the same source would offer, to save and edit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.cli.launch import UserError
from agentworld_tui.cli.routing_flags import add_routing_flags, reality_from_args
from agentworld_tui.cli.schedule_flags import add_schedule_flags, schedule_from_args
from agentworld_tui.cli.twin_flags import add_twin_flags
from agentworld_tui.domains import DOMAINS

if TYPE_CHECKING:
    import socket

    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.toolset import Toolset
    from agentworld_tui.simulator import Simulator
    from agentworld_tui.simulator.routing import Reality
    from agentworld_tui.world.fictional_world import FictionalWorld

DEFAULT_PORT = 8765
IDLE_SECONDS = 1800.0  # agents/mcp/server.py's defaults, kept here so --help needs no import
MAX_SESSIONS = 256
TOKEN_ENV = "AGENTWORLD_MCP_TOKEN"
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("the port must be a number from 0 to 65535")
    return int(text)


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1024:
        raise argparse.ArgumentTypeError("must be a whole number from 1 to 1024")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 7 * 86400:
        raise argparse.ArgumentTypeError("must be a number of seconds from 1 to 604800")
    return value


def _sessions(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError("must be a whole number from 1 to 100000")
    return int(text)


def _source_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tools",
        nargs="?",
        metavar="TOOLS",
        help='a tools/list JSON file (a list, {"tools": [...]}, or a saved tools/list '
        "answer) or an MCP scenario .toml",
    )
    parser.add_argument(
        "--tools-from-command",
        metavar="CMD",
        help="capture the tools of the MCP server this command starts (stdio); no tool is called",
    )
    parser.add_argument(
        "--tools-from-url",
        metavar="URL",
        help="capture the tools of the streamable-HTTP MCP server at URL; no tool is called",
    )
    parser.add_argument(
        "--domain",
        choices=DOMAINS,
        metavar="DOMAIN",
        help="serve a domain's agent tools instead: terminal, mcp, web, android, search, swe, "
        "os or a plug-in's (the terminal's keystrokes, SWE's shell and editor, Search's tools, "
        "one action tool for the others)",
    )
    parser.add_argument(
        "--scenario",
        metavar="NAME|FILE",
        help="the starting state: a scenario of the domain (prompts/<domain>/scenarios.toml; "
        "the first by default) or a scenario file; with TOOLS.toml, the scenario to take",
    )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve a simulated MCP server to agents (the world model answers their calls)",
        description="A simulated MCP server: its tools are those of a tools/list file, of a "
        "real server (listed, never called), or of a domain; the world model predicts "
        "every call's result. See docs/agents.md.",
    )
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        parents=[engine],
        help="serve over stdio (default) or streamable HTTP",
        description="Serve the tools over stdio (stdout carries nothing but MCP; logs go "
        "to the log file) or over streamable HTTP on 127.0.0.1. Every connection is a "
        "session, saved after every call in the sessions folder.",
    )
    _source_flags(serve)
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or http"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})"
    )
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serve.add_argument(
        "--session-idle-timeout",
        type=_seconds,
        metavar="SECONDS",
        default=IDLE_SECONDS,
        help="an HTTP session without a request for this long ends and lets go of its "
        f"session file (default {IDLE_SECONDS:g})",
    )
    serve.add_argument(
        "--max-sessions",
        type=_sessions,
        metavar="N",
        default=MAX_SESSIONS,
        help=f"open HTTP sessions at most; one more is refused (default {MAX_SESSIONS})",
    )
    serve.add_argument(
        "--token-env",
        metavar="VAR",
        default=TOKEN_ENV,
        help="environment variable holding the bearer token every HTTP request must carry "
        f"(default {TOKEN_ENV}); needed for any address but the loopback",
    )
    serve.add_argument(
        "--sessions",
        metavar="DIR",
        help="where each connection's session file goes (default: the app's sessions folder)",
    )
    add_schedule_flags(serve)
    serve.add_argument(
        "--world",
        metavar="NAME|FILE",
        help="a fictional world every connection's calls carry (prompts/worlds/ or a .toml)",
    )
    serve.add_argument(
        "--concurrency",
        type=_count,
        metavar="N",
        help="calls sent to a model server at once (default: [server] concurrency); a "
        "local model answers one at a time, in order",
    )
    serve.add_argument("--name", metavar="NAME", help="the server name given to clients")
    add_twin_flags(serve)  # reality: a twin, routing and grounding (see _reality)
    add_routing_flags(serve)
    serve.set_defaults(handler=cmd_serve)
    tools = actions.add_parser(
        "tools",
        help="print the tool list a serve with the same source would offer",
        description='Print the tools as a tools/list answer ({"tools": [...]}), to save, '
        "edit and serve later. Capturing a real server lists its tools and calls none.",
    )
    _source_flags(tools)
    tools.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    tools.set_defaults(handler=cmd_tools)


# -- the source of the tools ---------------------------------------------------------------
def toolset_from_args(args: argparse.Namespace) -> Toolset:
    from agentworld_tui.agents.mcp import toolset as toolsets
    from agentworld_tui.agents.mcp.capture import CaptureError, capture_blocking, parse_command

    given = [
        flag
        for flag, value in (
            ("TOOLS", args.tools),
            ("--tools-from-command", args.tools_from_command),
            ("--tools-from-url", args.tools_from_url),
            ("--domain", args.domain),
        )
        if value
    ]
    if not given:
        raise UserError(
            "say what to serve: a TOOLS file, --tools-from-command, --tools-from-url or --domain"
        )
    if len(given) > 1:
        raise UserError(f"give one source of tools, not {' and '.join(given)}")
    try:
        if args.tools:
            return toolsets.from_file(args.tools, pick=args.scenario or "")
        if args.domain:
            return toolsets.for_domain(args.domain, args.scenario or "")
        if args.scenario:
            raise UserError("--scenario goes with TOOLS.toml or --domain")
        command = parse_command(args.tools_from_command) if args.tools_from_command else None
        captured = capture_blocking(command=command, url=args.tools_from_url or "")
        description = f"The MCP server {captured.name or captured.source}"
        if captured.instructions:
            description += f". Its instructions to clients: {captured.instructions}"
        from agentworld_tui.world.domain import Scenario

        return toolsets.from_definitions(
            captured.tools,
            captured.source,
            scenario=Scenario("captured", f"Tools of {captured.source}", description),
            server_name=captured.name,
            server_version=captured.version,
            instructions=captured.instructions,
        )
    except (toolsets.ToolsetError, CaptureError) as exc:
        raise UserError(str(exc)) from None


def cmd_tools(args: argparse.Namespace) -> int:
    from agentworld_tui.world.sanitize import safe_json

    toolset = toolset_from_args(args)
    listing = {
        "tools": [
            t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in toolset.declared
        ]
    }
    if args.output:
        from agentworld_tui.world.store import write_atomic

        try:
            write_atomic(
                Path(args.output),
                (json.dumps(listing, ensure_ascii=False, indent=2) + "\n").encode(),
            )
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        from agentworld_tui.world.plural import counted

        written = counted(len(toolset.declared), "tool")
        print(f"agentworld: {written} written to {args.output}", file=sys.stderr)
    else:
        print(safe_json(listing))
    return 0


# -- serving -------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from agentworld_tui.agents.mcp.server import AgentServer
    from agentworld_tui.agents.mcp.sessions import SessionFolder
    from agentworld_tui.cli.launch import make_engine, settings_from_args
    from agentworld_tui.simulator import Simulator

    settings = settings_from_args(args)
    toolset = toolset_from_args(args)
    if args.name:
        toolset = replace(toolset, server_name=args.name)
    schedule = schedule_from_args(args, toolset.domain.name)
    world = _world(args.world) if args.world else None
    sock = _listen(args) if args.transport == "http" else None
    token = _token(args) if args.transport == "http" else ""
    reality = _reality(args, toolset)
    try:
        if reality is not None and reality.first is not None and toolset.domain.name != "mcp":
            scenario = replace(toolset.scenario, state=reality.first.text)
            toolset = replace(toolset, scenario=scenario)  # the model starts where reality is
        engine = make_engine(settings)
        simulator = Simulator(
            engine,
            settings.generation_params(),
            concurrency=args.concurrency or settings.server.concurrency,
        )
        folder = Path(args.sessions).expanduser() if args.sessions else None
        server = AgentServer(
            simulator,
            toolset,
            sessions=SessionFolder(folder),
            schedule=schedule,
            world=world,
            idle_seconds=args.session_idle_timeout,
            max_sessions=args.max_sessions,
            reality=reality,
        )
        try:
            return asyncio.run(_serve(server, simulator, args, sock, token))
        finally:
            simulator.close()
    finally:
        if reality is not None:
            reality.close()


def _reality(args: argparse.Namespace, toolset: Toolset) -> Reality | None:
    """The twin, routing and grounding the flags ask for, the twin started (None: none).
    The rules read each tool's MCP annotations as the toolset declares them."""
    if args.check:
        raise UserError("--check runs at an episode's end: mcp serve has none to run it at")
    from agentworld_tui.agents.mcp.toolset import tool_infos

    return reality_from_args(args, toolset.domain.name, tool_infos(toolset))


def _world(wanted: str) -> FictionalWorld:
    from agentworld_tui.world.fictional_world import WorldError, list_worlds, load_world_file

    path = Path(wanted).expanduser()
    try:
        if path.suffix.lower() == ".toml" or path.exists():
            return load_world_file(path)
    except WorldError as exc:
        raise UserError(f"--world: {exc}") from None
    worlds, _problems = list_worlds()
    for world in worlds:
        if world.name == wanted:
            return world
    names = ", ".join(w.name for w in worlds) or "none"
    raise UserError(f"--world: no world named {wanted!r}; the worlds are: {names}")


def _token(args: argparse.Namespace) -> str:
    from agentworld_tui.agents.guard import GuardError, require_token

    token = os.environ.get(args.token_env, "")
    if token and not _TOKEN_TEXT.fullmatch(token):
        raise UserError(
            f"${args.token_env} must be 16 to 512 letters, digits or . _ ~ + / = - characters"
        )
    try:
        require_token(args.host, token, f"put one in ${args.token_env}")
    except GuardError as exc:
        raise UserError(str(exc)) from None
    return token


def _listen(args: argparse.Namespace) -> socket.socket:
    from agentworld_tui.agents.guard import ListenError, bind

    _token(args)  # refused before the port is taken
    try:
        return bind(args.host, args.port)
    except ListenError as exc:
        raise UserError(str(exc)) from None


async def _serve(
    server: AgentServer,
    simulator: Simulator,
    args: argparse.Namespace,
    sock: socket.socket | None,
    token: str,
) -> int:
    from agentworld_tui.agents.mcp.server import LEAVE_SECONDS
    from agentworld_tui.world.plural import counted

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    load_failed: asyncio.Future[str] = loop.create_future()

    def loaded(error: str | None) -> None:
        if error:
            loop.call_soon_threadsafe(_resolve, load_failed, error)

    simulator.load(on_done=loaded)
    toolset = server.toolset
    what = f"{counted(len(toolset.declared), 'tool')} ({toolset.source})"
    if sock is not None:
        from agentworld_tui.agents.guard import reachable_hint

        url = await server.start(args.host, sock=sock, token=token, path=args.path)
        hint = reachable_hint(args.host, sock.getsockname()[1], args.path)
        where = f"{url} ({hint})" if hint else url
        print(f"agentworld: serving {what} at {where} (Ctrl+C stops)", file=sys.stderr, flush=True)
        serving: asyncio.Future[Any] = loop.create_future()
    else:
        print(f"agentworld: serving {what} over stdio", file=sys.stderr, flush=True)
        serving = asyncio.ensure_future(server.serve_stdio())
    stopped = asyncio.ensure_future(stop.wait())
    waited: list[asyncio.Future[Any]] = [serving, stopped, load_failed]
    done, _pending = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if load_failed in done:
        print(f"agentworld: {load_failed.result()}", file=sys.stderr)
        code = 1
    elif serving in done and not serving.cancelled() and serving.exception() is not None:
        print(f"agentworld: the MCP server stopped: {serving.exception()}", file=sys.stderr)
        code = 1
    stopped.cancel()
    await server.stop(LEAVE_SECONDS)  # every call in flight is recorded, every session saved
    if server.reality is not None:
        await asyncio.to_thread(server.reality.close)
    if sock is None:
        _leave_stdio(code)
    return code


def _leave_stdio(code: int) -> None:
    """End the process at once: the SDK's stdio transport reads stdin on a worker thread
    that no cancellation reaches until a line or the end comes, and the engine's thread
    may be loading a model for minutes; a client that left kills its server moments
    later. Everything worth keeping is saved by now."""
    sys.stderr.flush()
    os._exit(code)


def _resolve(future: asyncio.Future[str], value: str) -> None:
    if not future.done():
        future.set_result(value)
