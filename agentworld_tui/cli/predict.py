"""``agentworld predict``: one action in, its predicted observation out, through the
simulator service like every other front-end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agentworld_tui.cli.launch import UserError, make_engine, settings_from_args

if TYPE_CHECKING:
    from agentworld_tui.world.domain import Domain, Scenario


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    predict = sub.add_parser(
        "predict", parents=[engine], help="predict one observation and print it"
    )
    predict.add_argument(
        "--domain",
        default="terminal",
        help="terminal (default), mcp, web, android, search, swe, os, or a plug-in's domain",
    )
    predict.add_argument(
        "--state",
        metavar="FILE",
        help="the starting state: a text file, a scenario (.toml), or a tool list (.json)",
    )
    predict.add_argument(
        "--reasoning", action="store_true", help="also stream the reasoning to stderr"
    )
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument(
        "--session",
        metavar="FILE",
        help="append the turn to this session file (created if missing); its earlier turns "
        "for the domain are the history. A local model keeps its state beside it "
        "(FILE.state), so the next call reads only the new turn",
    )
    predict.add_argument("action", help="the action as the domain writes it, e.g. 'ls -la'")
    predict.set_defaults(handler=cmd_predict)


def cmd_predict(args: argparse.Namespace) -> int:
    from agentworld_tui.domains import get_domain
    from agentworld_tui.engines.base import ReasoningDelta
    from agentworld_tui.simulator import Simulator, SimulatorError
    from agentworld_tui.world.action import ActionError
    from agentworld_tui.world.domain import Scenario
    from agentworld_tui.world.sanitize import StreamSanitizer, safe_json, sanitize
    from agentworld_tui.world.session import new_session

    settings = settings_from_args(args)
    try:
        domain = get_domain(args.domain)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    scenario = Scenario("cli", "Command line")
    if args.state:
        from agentworld_tui.domains.scenario_file import ScenarioFileError, load_scenario_file

        try:
            scenario = load_scenario_file(args.state)
        except ScenarioFileError as exc:
            raise UserError(f"--state: {exc}") from None
    save = None
    if args.session:
        from agentworld_tui.cli.session_file import open_session_tab, turn_saver

        workspace, session, problems = open_session_tab(
            Path(args.session), domain, scenario, state_given=bool(args.state)
        )
        scenario = session.scenario
        save = turn_saver(workspace)
    else:
        session, problems = new_session(domain, scenario)
    try:
        action = domain.parse_action(args.action, scenario)
    except ActionError as exc:
        raise UserError(f"invalid action: {exc}") from None
    engine = make_engine(settings)
    if args.session:
        from agentworld_tui.engines.state_file import KeepsState, state_path

        if isinstance(engine, KeepsState):  # a local model: go on from the last call's state
            engine.keep_state(state_path(Path(args.session)))
    for problem in problems:
        print(f"agentworld: {problem}", file=sys.stderr)
    if _checks_against_no_tools(domain, scenario):
        print(
            "agentworld: no tool list is in use, so the call is checked against no tool: "
            "give one with --state (a tools/list .json or a scenario .toml)",
            file=sys.stderr,
        )
    simulator = Simulator(engine, settings.generation_params())  # one turn: no concurrency
    try:
        error = simulator.load_and_wait()
        if error:
            raise UserError(error)
        try:
            run = simulator.send(session, action, save=save)
        except SimulatorError as exc:
            raise UserError(str(exc)) from None
        live = StreamSanitizer()
        try:
            for event in run.events():
                if isinstance(event, ReasoningDelta) and args.reasoning and not args.json:
                    sys.stderr.write(live.feed(event.text))
                    sys.stderr.flush()
        except KeyboardInterrupt:
            run.stop()  # the turn is kept, interrupted, and saved
            run.wait()
            raise
    finally:
        simulator.close()
    if args.reasoning and not args.json:
        sys.stderr.write(live.finish() + "\n")
    turn = run.turn
    if args.json:
        print(
            safe_json(
                {
                    "domain": domain.name,
                    "turn": turn.number,
                    "action": action.payload,
                    "observation": turn.observation,
                    "reasoning": turn.reasoning,
                    "status": turn.status,
                    "note": turn.note,
                    "extraction": turn.extraction,
                    "stats": turn.stats,
                }
            )
        )
    elif turn.observation:
        print(sanitize(turn.observation))
    failed = turn.status in ("error", "no_answer")
    for said in (turn.note, turn.extraction):  # why it failed, or what to know of it
        if said:
            print(f"agentworld: {sanitize(said)}", file=sys.stderr)
    if run.save_error:
        # The prediction is printed above all the same: a failed save must not lose it.
        print(f"agentworld: the turn was not saved: {run.save_error}", file=sys.stderr)
    return 1 if failed or run.save_error else 0


def _checks_against_no_tools(domain: Domain, scenario: Scenario) -> bool:
    """A tool-call domain whose scenario lists no tools (MCP without a tool list)."""
    from agentworld_tui.domains.tool_call import ToolCallDomain

    return isinstance(domain, ToolCallDomain) and domain.listed_tools(scenario) is None
