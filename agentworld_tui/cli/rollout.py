"""``agentworld rollout TASKS``: a policy model acting in simulated environments.

    agentworld rollout tasks.jsonl --policy-server URL [--policy-model NAME]
                       [--policy-tool-choice auto|required|none|TOOL]
                       (--server URL | --model PATH.gguf) [--episodes N] [--max-steps N]
                       [--parallel N] [--out DIR] [--judge | --judge-server URL ...]

The world model is given with the usual model flags; the policy is any OpenAI-compatible
endpoint with tool calling. Each episode is appended to DIR/episodes.jsonl when it ends
and is a session file in DIR/sessions/ (``agentworld --session FILE`` opens it); running
the same command again plays only what is not finished yet. Every tool call is told on
standard error as it ends, and every episode when it ends.

With the twin flags (``cli.twin_flags``), every episode runs beside a fresh real twin; each
step's line gives its divergence, each episode's the agent's claim and the check in the
twin, and the summary the run's figures. The routing flags (``cli.routing_flags``, as
``mcp serve`` has them) send each step real, sim or shadow by rules (each step's line says
where it was answered), and ground the world model in a trace store.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.cli.episode_flags import (
    MAX_CONCURRENCY,
    add_concurrency,
    add_max_steps,
    whole,
)
from agentworld_tui.cli.launch import UserError, make_engine, settings_from_args
from agentworld_tui.cli.routing_flags import (
    RoutingFlags,
    add_routing_flags,
    episode_routing_from_args,
)
from agentworld_tui.cli.twin_flags import add_twin_flags, twin_spec_from_args
from agentworld_tui.world.sanitize import one_line

if TYPE_CHECKING:
    from agentworld_tui.agents.env.tasks import TaskSet
    from agentworld_tui.config import Settings


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError("must be a number from 0 to 2")
    return value


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], engine: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "rollout",
        parents=[engine],
        help="run a policy model in simulated environments, episodes kept for training",
        description="Play episodes of a policy model (an OpenAI-compatible endpoint with "
        "tool calling) against the simulator, for every task of a JSONL or TOML file. Each "
        "episode is written as the policy saw it, with every step's reasoning, cost and "
        "perturbations, and as a session file the app opens. Resumable: run it again.",
    )
    parser.add_argument(
        "tasks", metavar="TASKS", help="a tasks file (.jsonl, or .toml with [[task]])"
    )
    policy = parser.add_argument_group("policy")
    policy.add_argument("--policy-server", metavar="URL", required=True, help="its endpoint")
    policy.add_argument(
        "--policy-model", metavar="NAME", help="its model (default: the first listed)"
    )
    policy.add_argument("--policy-api-key-env", metavar="VAR", help="variable holding its API key")
    policy.add_argument("--policy-temperature", type=_temperature, metavar="T")
    policy.add_argument("--policy-max-tokens", type=whole(1, 1 << 20), metavar="N")
    policy.add_argument(
        "--policy-tool-choice",
        type=_tool_choice,
        metavar="CHOICE",
        help="the request's tool_choice: auto, required, none, or a tool's name to call "
        "that tool at every step (default: not sent; some servers then ignore the tools)",
    )
    run = parser.add_argument_group("run")
    run.add_argument("--out", metavar="DIR", help="the run's folder (default rollouts/<tasks>)")
    run.add_argument(
        "--episodes", type=whole(1, 100_000), default=1, metavar="N", help="per task (default 1)"
    )
    add_max_steps(
        run,
        most=10_000,
        default=20,
        help="tool calls per episode, refused ones included (default 20; a task's own "
        "max_steps wins)",
    )
    run.add_argument(
        "--parallel",
        type=whole(1, MAX_CONCURRENCY),
        default=8,
        metavar="N",
        help="episodes at once (default 8)",
    )
    add_concurrency(
        run, default=None, help="world-model requests in flight on a server (default: --parallel)"
    )
    judge = parser.add_argument_group("judging each step (optional)")
    judge.add_argument("--judge", action="store_true", help="the world model judges its own steps")
    judge.add_argument("--judge-server", metavar="URL", help="an OpenAI-compatible judge")
    judge.add_argument("--judge-model", metavar="NAME", help="the judge model on that server")
    judge.add_argument("--judge-model-path", metavar="GGUF", help="a local GGUF judge")
    judge.add_argument("--judge-api-key-env", metavar="VAR", help="variable holding its API key")
    add_twin_flags(parser)
    add_routing_flags(parser)
    parser.set_defaults(handler=cmd_rollout)


def cmd_rollout(args: argparse.Namespace) -> int:
    from agentworld_tui.agents.env.tasks import TasksError, load_tasks

    path = Path(args.tasks)
    try:
        found = load_tasks(path)
    except TasksError as exc:
        raise UserError(str(exc)) from None
    for problem in found.problems:
        _say(f"{_bounded(problem)} (left out; the other tasks run)")
    if not found.tasks:
        raise UserError(f"{path}: no task to run")
    twins = _twins(args, found.tasks)
    settings = settings_from_args(args)
    routing = episode_routing_from_args(args, twinned=bool(twins))
    try:
        return _run(args, path, found, twins, settings, routing)
    finally:
        if routing.traces is not None:
            routing.traces.close()


def _run(
    args: argparse.Namespace,
    path: Path,
    found: TaskSet,
    twins: dict[str, Any],
    settings: Settings,
    routing: RoutingFlags,
) -> int:
    from agentworld_tui.agents.env import EnvError, open_simulator
    from agentworld_tui.agents.env.rollout import (
        PolicySpec,
        Rollout,
        RolloutError,
        RolloutSettings,
    )

    judge_engine = _judge_engine(args)
    engine = make_engine(settings)
    params = settings.generation_params()
    simulator = open_simulator(engine, params=params, concurrency=args.concurrency or args.parallel)
    out = Path(args.out) if args.out else Path("rollouts") / (path.stem or "tasks")
    rollout = Rollout(
        found.tasks,
        simulator,
        PolicySpec(
            server=args.policy_server,
            model=args.policy_model or "",
            api_key_env=args.policy_api_key_env or "",
            temperature=args.policy_temperature,
            max_tokens=args.policy_max_tokens,
            tool_choice=args.policy_tool_choice or "",
        ),
        RolloutSettings(
            out=out,
            episodes=args.episodes,
            max_steps=args.max_steps,
            parallel=args.parallel,
            seed=params.seed if params.seed >= 0 else None,
            judge=judge_engine,
            judge_steps=bool(args.judge or judge_engine is not None),
            twins=twins,
            deliver=args.deliver or "real",
            check=args.check or "",
            routes=routing.rules,
            traces=routing.traces,
            grounding_budget=routing.grounding_budget,
        ),
        on_episode=_said,
        on_step=_step_teller(),
    )
    wanted = len(rollout.episodes())
    _say(f"{len(found.tasks)} tasks, {wanted} episodes; the run is in {out}")
    own = [t for t in found.tasks if t.max_steps is not None and t.max_steps != args.max_steps]
    if own:
        named = ", ".join(f"{_key(t.key, 40)}: {t.max_steps}" for t in own[:3])
        more = f" and {len(own) - 3} more" if len(own) > 3 else ""
        _say(
            f"{len(own)} task{'s' if len(own) != 1 else ''} set their own max_steps, which "
            f"wins over --max-steps {args.max_steps} ({named}{more})"
        )

    try:
        summary = asyncio.run(rollout.run())
    except (RolloutError, EnvError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        _say(f"interrupted: the finished episodes are kept in {out}; run the same command to go on")
        return 130
    finally:
        simulator.close()
        if judge_engine is not None and judge_engine.loaded:
            judge_engine.unload()
    for line in summary.lines():
        print(line)
    for warning in summary.warnings():
        _say(f"warning: {warning}")
    if args.policy_tool_choice == "required" and summary.ends.get("policy_error"):
        from agentworld_tui.agents.env.rollout import offered_tools

        names = sorted({name for task in found.tasks for name in offered_tools(task)})
        _say(
            "warning: the policy server failed with tool_choice 'required'; some servers "
            "cannot take it (llama-cpp-python's answers HTTP 500): name a tool instead, "
            f"--policy-tool-choice {_bounded(names[0], 60) if names else 'TOOL'}"
            + (f" (the tools: {_bounded(', '.join(names), 200)})" if len(names) > 1 else "")
        )
    return 0 if summary.finished == summary.episodes else 1


def _twins(args: argparse.Namespace, tasks: list[Any]) -> dict[str, Any]:
    """The twin of each domain the tasks are in, from the twin flags (none without them);
    said in one line when a domain has none or the flags do not fit it."""
    from agentworld_tui.agents.env.results import EnvError
    from agentworld_tui.agents.env.twins import check_command

    domains = list(dict.fromkeys(t.domain for t in tasks))
    twins: dict[str, Any] = {}
    asked = any(
        given is not None for given in (args.twin, args.twin_command, args.twin_url)
    ) or bool(args.twin_on_host)
    if not asked:
        twin_spec_from_args(args, domains[0])  # flags that go with a twin, given alone
    for domain in domains if asked else ():
        try:
            spec = twin_spec_from_args(args, domain)
        except UserError as exc:
            count = sum(1 for t in tasks if t.domain == domain)
            raise UserError(f"{count} {domain} task{'s' if count != 1 else ''}: {exc}") from None
        assert spec is not None
        if args.check:
            try:
                check_command(args.check, domain)
            except EnvError as exc:
                raise UserError(f"--check: {exc}") from None
        twins[domain] = spec
    checked = [t for t in tasks if t.check]
    if checked and not twins:
        _say(
            f"{len(checked)} task{'s' if len(checked) != 1 else ''} carry a check, run only "
            "in a twin: without --twin they are played in simulation and not checked"
        )
    if any(spec.on_host for spec in twins.values()):
        _say(
            "--twin-on-host: the policy's actions and the tasks' checks run on this machine "
            "itself, unsandboxed"
        )
    return twins


def _judge_engine(args: argparse.Namespace) -> Any:
    if not (args.judge_server or args.judge_model_path):
        if args.judge_model:
            raise UserError("--judge-model names a model on --judge-server: give the server too")
        return None
    from agentworld_tui.engines.base import EngineError
    from agentworld_tui.engines.factory import EngineSpec, make_engine

    spec = EngineSpec(
        server=args.judge_server or "",
        model=args.judge_model or "",
        model_path=args.judge_model_path or "",
        api_key_env=args.judge_api_key_env or "",
    )
    try:
        return make_engine(spec)
    except EngineError as exc:
        raise UserError(f"the judge: {exc}") from None


def _tool_choice(text: str) -> str:
    if not text or len(text) > 128 or not text.isprintable():
        raise argparse.ArgumentTypeError("give auto, required, none or a tool's name")
    return text


def _said(record: dict[str, Any]) -> None:
    calls = record.get("steps", [])
    refused = sum(1 for s in calls if s.get("refused"))
    end = record.get("ended", "")
    detail = " ".join(str(record.get("detail", "")).split())
    why = f": {detail[:160]}" if detail and not record.get("finished") else ""
    if refused and refused == len(calls):
        taken = f"{len(calls)} tool calls, all refused (the environment took none)"
    elif refused:
        taken = f"{len(calls) - refused} steps ({refused} more calls refused)"
    else:
        taken = f"{len(calls)} steps"
    twin = record.get("twin")
    beside = f"; {_episode_twin_said(twin)}" if isinstance(twin, dict) else ""
    _say(f"{_key(str(record.get('key')))}: {end} after {taken}{why}{beside}")


def _step_teller() -> Callable[[dict[str, Any]], None]:
    """One line per tool call as it ends, so a long run is never silent; each hint once."""
    hinted: set[str] = set()

    def tell(step: dict[str, Any]) -> None:
        _stepped(step, hinted)

    return tell


def _stepped(step: dict[str, Any], hinted: set[str]) -> None:
    head = f"{_key(str(step.get('key')))} step {step.get('step')}: "
    head += _key(str(step.get("tool", "")), 40)
    if step.get("refused"):
        _say(f"{head}: refused: {_bounded(str(step['refused']), 160)}")
        return
    cost = step.get("cost") or {}
    line = (
        f"{head}: {step.get('status')} ({cost.get('generated_tokens', 0)} tokens, "
        f"{float(cost.get('seconds', 0.0)):.1f} s)"
    )
    if step.get("note"):
        line += f": {_bounded(str(step['note']), 160)}"
    twin = step.get("twin")
    if isinstance(twin, dict):
        line += f"; {_twin_said(twin)}"
    route = step.get("route")
    if isinstance(route, dict):
        line += f"; {_route_said(route)}"
    _say(line)
    hint = str(step.get("hint", ""))
    if hint and hint not in hinted:
        hinted.add(hint)
        _say(f"hint: {hint}")


def _route_said(route: dict[str, Any]) -> str:
    """Where a routed step was answered, and why, in a few words."""
    where = {"real": "the twin", "sim": "the world model", "both": "both"}
    answered = where.get(str(route.get("answered")), "?")
    if route.get("failed"):
        return f"routed to the twin, which failed: {_bounded(str(route['failed']), 120)}"
    return f"answered by {answered} ({_bounded(str(route.get('reason', '')), 160)})"


def _twin_said(twin: dict[str, Any]) -> str:
    """A step's twin in a few words: its divergence and the side delivered, or why
    reality gave no answer."""
    if twin.get("delivered") == "none":
        why = _bounded(str(twin.get("error") or twin.get("status")), 120)
        return f"twin {twin.get('status')}: {why}; nothing delivered"
    side = "reality" if twin.get("delivered") == "real" else "the simulation"
    if twin.get("status") != "ok":
        why = _bounded(str(twin.get("error") or twin.get("status")), 120)
        return f"twin {twin.get('status')}: {why}; {side} delivered"
    score = twin.get("divergence")
    if not isinstance(score, int | float):
        return f"twin answered; {side} delivered"
    verdict = "diverged" if twin.get("diverged") else "matched"
    return f"twin {verdict} ({score:.2f}); {side} delivered"


def _episode_twin_said(twin: dict[str, Any]) -> str:
    """An episode's twin in a few words: the claim, the check, deceived."""
    if twin.get("error"):
        return f"its end beside the twin failed: {_bounded(str(twin['error']), 120)}"
    figures = twin.get("figures") or {}
    claim = "claimed done" if twin.get("claimed_done") else "no claim of done"
    passed = figures.get("check_passed")
    check = "no check" if passed is None else ("check passed" if passed else "check FAILED")
    said = f"{claim}, {check} in the twin"
    if figures.get("deceived"):
        said += ": deceived"
    first = figures.get("first_divergence")
    share = figures.get("diverged_share")
    if isinstance(share, int | float):
        said += f"; {share:.0%} of steps diverged"
        said += f", the first at step {first}" if first is not None else ""
    return said


def _key(key: str, limit: int = 80) -> str:
    from agentworld_tui.agents.env.rollout import shown_key

    return shown_key(key, limit)


def _bounded(text: str, limit: int = 300) -> str:
    """One safe line of at most ``limit`` characters (files, ids, a server's errors and
    the reasons that name its tools can be anything)."""
    return one_line(text, limit)


def _say(text: str) -> None:
    print(f"agentworld: {text}", file=sys.stderr, flush=True)
