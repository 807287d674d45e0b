"""Rollouts: a policy model acting in simulated environments, each episode kept for training.

A policy is any OpenAI-compatible endpoint with tool calling. For every task (``tasks``)
the runner plays ``episodes`` episodes, up to ``parallel`` at once over one simulator: the
policy gets the task's instruction and the environment's starting state, and the
environment's tools (``Domain.tools``) as OpenAI tools; each tool call is one step
of the simulator, and its observation is the call's result. An episode ends when the
policy answers without a tool call, at the step limit (tool calls, refused ones included;
a task's own ``max_steps`` wins over the run's), or when the policy or the simulator fails
(after their retries). Whatever else goes wrong inside one episode ends that episode
(``crashed``, with what happened), never the run.

With twins (``RolloutSettings.twins``), every episode runs beside a fresh real twin: the
policy receives the side ``deliver`` names (reality's by default), each step's record
says which, with the divergence, and at the episode's end the task's check runs in the
twin. The agent's own *claim* is that it finished: it ended the episode by answering
without a tool call (a step limit or a failure is no claim). An episode whose agent
claimed done and whose check failed in the twin is *deceived*. With routing rules
(``RolloutSettings.routes``) each step goes to the twin, the world model or both as the
rules say, and with a trace store (``traces``) the world model is shown similar real
answers first; each step's record says where it was answered and why (``route``), and
which examples were shown (``grounding``). A step that reality could not answer, whose
rule says to fail, ends the episode (``twin_error``).

Every episode is written whole, as the policy saw it (the chat messages, tool calls and
results) with each step's reasoning, cost, perturbation and an optional judge's score, as
one line of ``episodes.jsonl`` in the run's folder, appended and synced when the episode
ends; each episode is also a session file (``sessions/``) the app opens, saved after every
step. A run that stops for any reason, a kill included, resumes by running the same
command again: finished episodes are kept and not played again, failed ones are.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld_tui.agents.env.actions import ToolCall
from agentworld_tui.agents.env.environment import Environment
from agentworld_tui.agents.env.results import EnvError, StepResult
from agentworld_tui.agents.env.scenarios import resolve_domain, resolve_scenario
from agentworld_tui.agents.env.simulators import aload_simulator
from agentworld_tui.agents.env.tasks import Task
from agentworld_tui.agents.env.twins import TwinError
from agentworld_tui.engines.base import Engine
from agentworld_tui.evaluation.results import ResultLog, ResultsError
from agentworld_tui.reality.figures import EpisodeFigures, run_figures
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Session, Turn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentworld_tui.judging.judge import JudgeSettings
    from agentworld_tui.reality.routing import RuleSet
    from agentworld_tui.reality.spec import Deliver, TwinSpec
    from agentworld_tui.reality.traces import TraceStore
    from agentworld_tui.world.judgement import Verdict

log = logging.getLogger("agentworld.rollout")

EPISODES_FILE = "episodes.jsonl"
RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
SESSIONS_FOLDER = "sessions"
RUN_FORMAT = "agentworld-rollout"
FINISHED = ("no_tool_call", "step_limit")
"""How a finished episode ends; any other end (a failure) is played again on resume."""
NOT_RUN = "not run: the episode ended before this call"
JUDGE_REFERENCE = (
    "(No real observation exists: this step was simulated for an agent. Judge the "
    "prediction on its own: its format, its consistency with the history and its realism.)"
)
DEFAULT_SYSTEM = (
    "You are an agent acting in a {title} environment. Act only by calling the tools: each "
    "call is one action, and its result is what the environment shows next. When the task "
    "is done, or cannot be done, answer with a short message and no tool call."
)
TOOL_CHOICES = ("auto", "required", "none")
"""The ``tool_choice`` words; any other value names the one tool the policy must call."""
NO_TOOL_CALL_HINT = (
    "no episode made a tool call: the policy answered in prose every time. Some policy "
    "servers ignore the tools unless the request says how to use them: "
    "llama-cpp-python's server (python -m llama_cpp.server) calls a tool only with "
    "--chat_format chatml-function-calling and --policy-tool-choice auto, or with "
    "--policy-tool-choice TOOL under any chat format ('required' fails there with HTTP "
    "500); llama-server needs --jinja; vLLM needs --enable-auto-tool-choice and "
    "--tool-call-parser for 'auto'. See docs/training.md, 'Policy servers'."
)
THINKING_HINTS = {
    "end of text": (
        "the world model ended without closing its reasoning: a server that puts no "
        "reasoning block before the answer (no reasoning parser, or thinking off in its "
        "template) needs thinking off here too: --no-thinking, or [generation] "
        "enable_thinking = false"
    ),
    "max tokens": (
        "the world model reasoned until the token limit: raise --max-tokens, or turn "
        "thinking off with --no-thinking (faster, lower quality)"
    ),
}
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class RolloutError(Exception):
    """A run that cannot start or go on; the message is one line."""


class PolicyError(Exception):
    """The policy endpoint failed (after its client's retries)."""


# -- settings ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolicySpec:
    """The policy model: an OpenAI-compatible endpoint with tool calling."""

    server: str
    model: str = ""
    """The served model; "" for the first the server lists."""
    api_key_env: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 600.0
    retries: int = 3
    """Requests asked again by the client on a connection error, 408, 429 or 5xx."""
    tool_choice: str = ""
    """"auto", "required", "none", or the name of the one tool to call; "" sends none
    (the server's default)."""

    def tool_choice_value(self) -> str | dict[str, Any] | None:
        """``tool_choice`` as a request carries it (None: left out)."""
        if not self.tool_choice:
            return None
        if self.tool_choice in TOOL_CHOICES:
            return self.tool_choice
        return {"type": "function", "function": {"name": self.tool_choice}}


@dataclass(frozen=True)
class RolloutSettings:
    out: Path
    episodes: int = 1
    """Episodes per task."""
    max_steps: int = 20
    """Tool calls per episode, refused ones included (a task's own ``max_steps`` wins)."""
    parallel: int = 8
    """Episodes played at once."""
    seed: int | None = None
    """Episode ``n`` of a task samples the simulator with ``seed + n``."""
    judge: Engine | None = None
    """A judge engine of its own; see ``judge_steps``."""
    judge_steps: bool = False
    """Judge every step (with ``judge``, else with the world model itself)."""
    judge_settings: JudgeSettings | None = None
    twins: Mapping[str, TwinSpec] = field(default_factory=dict)
    """The twin of each domain's episodes (a fresh one per episode); none: simulation only."""
    deliver: Deliver = "real"
    check: str = ""
    """The check of a task that has none of its own, nor its scenario."""
    routes: RuleSet | None = None
    """Where each step goes (needs twins; None: a twin shadows every step)."""
    traces: TraceStore | None = None
    """The trace store the world model is grounded in (its owner closes it)."""
    grounding_budget: int | None = None


# -- the policy -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolicyCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class PolicyReply:
    message: dict[str, Any]
    """The assistant message as it goes back into the chat."""
    calls: tuple[PolicyCall, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Policy:
    """The policy endpoint, through the ``openai`` client (async)."""

    def __init__(self, spec: PolicySpec) -> None:
        import openai

        self.spec = spec
        key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""
        self.client = openai.AsyncOpenAI(
            base_url=spec.server,
            api_key=key or "no-key",
            timeout=spec.timeout,
            max_retries=spec.retries,
        )
        self.model = spec.model

    async def start(self) -> str:
        """The model's name (asking the server for its first when none was given)."""
        if not self.model:
            try:
                page = await self.client.models.list()
            except Exception as exc:
                raise PolicyError(
                    f"the policy server {self.spec.server}: {_one_line(exc)}"
                ) from None
            names = [m.id for m in page.data if isinstance(getattr(m, "id", None), str)]
            if not names:
                raise PolicyError(f"the policy server {self.spec.server} lists no models")
            self.model = names[0]
        return self.model

    async def reply(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> PolicyReply:
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools}
        choice = self.spec.tool_choice_value()
        if choice is not None:
            request["tool_choice"] = choice
        if self.spec.temperature is not None:
            request["temperature"] = self.spec.temperature
        if self.spec.max_tokens is not None:
            request["max_tokens"] = self.spec.max_tokens
        try:
            response = await self.client.chat.completions.create(**request)
        except openai.APIError as exc:
            raise PolicyError(f"the policy failed: {_one_line(exc)}") from None
        if not response.choices:
            raise PolicyError("the policy answered without a choice")
        message = response.choices[0].message
        found: list[PolicyCall] = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)  # (custom tool calls have none)
            if function is not None:
                found.append(
                    PolicyCall(str(call.id), str(function.name), str(function.arguments or ""))
                )
        calls = tuple(found)
        said: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            said["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        usage = response.usage
        return PolicyReply(
            said,
            calls,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )

    async def close(self) -> None:
        await self.client.close()


# -- judging steps ------------------------------------------------------------------------------
class StepJudge:
    """A judge's score for each step, without a real observation to compare with.

    A judge on a server is asked on a thread of its own; a local one decodes on the
    simulator's engine thread, in turn with the world model (one decoding thread)."""

    def __init__(
        self, simulator: Simulator, engine: Engine | None, settings: JudgeSettings | None
    ) -> None:
        from agentworld_tui.judging.judge import JudgeSettings
        from agentworld_tui.judging.turn import judge_params

        self.simulator = simulator
        self.engine = engine
        self.settings = settings or JudgeSettings(params=judge_params(simulator.params))

    async def score(self, session: Session, turn: Turn) -> dict[str, Any]:
        from agentworld_tui.judging.prompts import turn_judge_messages

        messages, _problems = turn_judge_messages(session, turn, JUDGE_REFERENCE)
        verdict = await self._ask(messages)
        if verdict.parsed or not verdict.engine_failed:
            turn.judgement = verdict.to_dict()
        judgement = verdict.judgement
        return {
            "total": judgement.total if judgement else None,
            "normalised": judgement.normalised if judgement else None,
            "scores": dict(judgement.scores) if judgement else None,
            "error": verdict.error,
            "judge": verdict.judge,
        }

    async def _ask(self, messages: list[dict[str, str]]) -> Verdict:
        from agentworld_tui.judging.judge import run_judge
        from agentworld_tui.simulator.queue import CallJob
        from agentworld_tui.world.judgement import Verdict

        own = self.engine
        target = own or self.simulator.engine
        if target is None:
            return Verdict(None, "the judge failed: no model", engine_failed=True)
        if target.info.remote:
            if not target.loaded:
                await asyncio.to_thread(target.load)
            return await asyncio.to_thread(run_judge, target, messages, settings=self.settings)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Verdict] = loop.create_future()

        def judged(engine: Engine | None) -> Verdict:
            judge = own or engine
            assert judge is not None
            if not judge.loaded:
                judge.load()
            return run_judge(judge, messages, settings=self.settings)

        def done(result: object, error: str | None) -> None:
            verdict = result if isinstance(result, Verdict) else None
            if verdict is None:
                verdict = Verdict(None, f"the judge failed: {error}", engine_failed=True)
            loop.call_soon_threadsafe(_settle, future, verdict)

        self.simulator.call(CallJob(judged, done, needs_model=own is None))
        return await future


def _settle(future: asyncio.Future[Verdict], verdict: Verdict) -> None:
    if not future.done():
        future.set_result(verdict)


# -- the summary ---------------------------------------------------------------------------------
@dataclass
class Summary:
    episodes: int = 0
    """Episodes the tasks ask for."""
    finished: int = 0
    failed: int = 0
    played: int = 0
    """Episodes played by this run (the rest were finished before it)."""
    steps: int = 0
    refused: int = 0
    calling: int = 0
    """Episodes in which the policy made at least one tool call."""
    no_answer: dict[str, int] = field(default_factory=dict)
    """Steps without an answer because the world model stopped while reasoning, by why."""
    simulator_prompt_tokens: int = 0
    simulator_evaluated_tokens: int = 0
    simulator_generated_tokens: int = 0
    policy_prompt_tokens: int = 0
    policy_completion_tokens: int = 0
    step_seconds: float = 0.0
    seconds: float = 0.0
    """This run's wall time."""
    ends: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    twinned: list[EpisodeFigures] = field(default_factory=list)
    """The figures of the episodes played beside a twin."""
    routes: dict[str, int] = field(default_factory=dict)
    """Routed steps by where they were answered (real, sim, both) or ``failed`` (reality
    could not answer, and the rules said to fail), and how many of the simulated ones
    fell back to the world model because reality could not answer (``fallback``)."""

    def add(self, record: dict[str, Any]) -> None:
        self.finished += bool(record.get("finished"))
        self.failed += not record.get("finished")
        reason = str(record.get("ended", ""))
        self.ends[reason] = self.ends.get(reason, 0) + 1
        usage = record.get("policy_usage") or {}
        self.policy_prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.policy_completion_tokens += int(usage.get("completion_tokens", 0))
        self.calling += bool(record.get("steps"))
        figures = (record.get("twin") or {}).get("figures")
        if isinstance(figures, dict):
            self.twinned.append(EpisodeFigures(**figures))
        for step in record.get("steps", []):
            if step.get("refused"):
                self.refused += 1
                continue
            self.steps += 1
            route = step.get("route")
            if isinstance(route, dict):
                where = "failed" if route.get("failed") else str(route.get("answered", ""))
                for key in (where, "fallback") if route.get("fallback") else (where,):
                    self.routes[key] = self.routes.get(key, 0) + 1
            why = reasoning_cut(step)
            if why:
                self.no_answer[why] = self.no_answer.get(why, 0) + 1
            cost = step.get("cost") or {}
            self.simulator_prompt_tokens += int(cost.get("prompt_tokens", 0))
            self.simulator_evaluated_tokens += int(cost.get("evaluated_prompt_tokens", 0))
            self.simulator_generated_tokens += int(cost.get("generated_tokens", 0))
            self.step_seconds += float(cost.get("seconds", 0.0))

    def per_step(self, total: float) -> float:
        return total / self.steps if self.steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        ratio = (
            self.simulator_generated_tokens / self.policy_completion_tokens
            if self.policy_completion_tokens
            else None
        )
        return (
            {
                "episodes": self.episodes,
                "finished": self.finished,
                "failed": self.failed,
                "played_this_run": self.played,
                "ends": self.ends,
                "steps": self.steps,
                "refused_actions": self.refused,
                "episodes_with_tool_calls": self.calling,
                "no_answer_while_reasoning": self.no_answer,
                "simulator_tokens_per_step": {
                    "prompt": round(self.per_step(self.simulator_prompt_tokens), 1),
                    "evaluated_prompt": round(self.per_step(self.simulator_evaluated_tokens), 1),
                    "generated": round(self.per_step(self.simulator_generated_tokens), 1),
                },
                "simulator_generated_per_policy_token": None if ratio is None else round(ratio, 2),
                "policy_tokens": {
                    "prompt": self.policy_prompt_tokens,
                    "completion": self.policy_completion_tokens,
                },
                "seconds_per_step": round(self.per_step(self.step_seconds), 3),
                "seconds": round(self.seconds, 2),
            }
            | ({"twin": self.twin_figures()} if self.twinned else {})
            | ({"routes": dict(sorted(self.routes.items()))} if self.routes else {})
        )

    def twin_figures(self) -> dict[str, Any]:
        """The twinned episodes together: steps compared and diverged, the first diverged
        step (its median over the episodes, in tool calls), the checks' pass rate, and the
        deceived episodes (the agent claimed done, the check failed in the twin)."""
        run = run_figures(self.twinned)
        return {
            "episodes": run.episodes,
            "steps_compared": sum(e.steps for e in self.twinned),
            "twin_failures": sum(e.twin_failures for e in self.twinned),
            "diverged_share": None if run.diverged_share is None else round(run.diverged_share, 4),
            "first_divergence_median": run.first_divergence_median,
            "never_diverged": sum(1 for e in self.twinned if e.first_divergence is None),
            "claimed_done": sum(1 for e in self.twinned if e.claimed_done),
            "checked": run.checked,
            "passed": run.passed,
            "pass_rate": round(run.passed / run.checked, 4) if run.checked else None,
            "deceived": run.deceived,
        }

    def lines(self) -> list[str]:
        data = self.to_dict()
        per_step = data["simulator_tokens_per_step"]
        ends = ", ".join(f"{k} {v}" for k, v in sorted(self.ends.items())) or "none"
        ratio = data["simulator_generated_per_policy_token"]
        return (
            [
                f"episodes: {self.finished} of {self.episodes} finished, {self.failed} failed "
                f"({self.played} played by this run; ends: {ends})",
                f"steps: {self.steps} ({self.refused} refused actions besides)",
                f"simulator tokens per step: {per_step['generated']:g} generated, "
                f"{per_step['evaluated_prompt']:g} prompt read of {per_step['prompt']:g}",
                "simulator tokens per policy token: "
                + ("n/a (the policy reported no usage)" if ratio is None else f"{ratio:g}"),
                f"time: {self.seconds:.1f} s, {data['seconds_per_step']:g} s per step",
            ]
            + ([self.twin_line()] if self.twinned else [])
            + ([self.routes_line()] if self.routes else [])
        )

    def routes_line(self) -> str:
        """Where the routed steps were answered: ``routes: 3 steps answered by the twin,
        5 by the world model, 1 by both; 1 fell back to the world model, 1 failed``."""
        real, sim, both = (self.routes.get(k, 0) for k in ("real", "sim", "both"))
        line = (
            f"routes: {real} steps answered by the twin, {sim} by the world model, {both} by both"
        )
        fell, failed = self.routes.get("fallback", 0), self.routes.get("failed", 0)
        if fell or failed:
            line += f"; {fell} fell back to the world model, {failed} failed"
        return line

    def twin_line(self) -> str:
        twin = self.twin_figures()
        share = twin["diverged_share"]
        first = twin["first_divergence_median"]
        checks = (
            f"checks passed {twin['passed']} of {twin['checked']} ({twin['pass_rate']:.0%})"
            if twin["checked"]
            else "no checks"
        )
        failures = twin["twin_failures"]
        return (
            f"twin: {twin['steps_compared']} steps compared, "
            + ("none" if share is None else f"{share:.0%}")
            + " diverged, first divergence at step "
            + ("none" if first is None else f"{first:g}")
            + f" (median), {checks}, {twin['deceived']} deceived (claimed done, failed in "
            f"the twin), {twin['claimed_done']} of {twin['episodes']} claimed done"
            + (f", {failures} steps the twin did not answer" if failures else "")
        )

    def warnings(self) -> list[str]:
        """What the run's figures say is likely wrong with the setup, one line each."""
        said: list[str] = []
        if self.ends.get("no_tool_call") and not self.calling:
            said.append(NO_TOOL_CALL_HINT)
        for why, count in sorted(self.no_answer.items()):
            said.append(
                f"{count} step{'s' if count != 1 else ''} gave no answer: {THINKING_HINTS[why]}"
            )
        return said


# -- the runner ---------------------------------------------------------------------------------
Progress = Callable[[dict[str, Any]], None]


class Rollout:
    """One run: tasks × episodes, written to ``settings.out``."""

    def __init__(
        self,
        tasks: Sequence[Task],
        simulator: Simulator,
        policy: PolicySpec,
        settings: RolloutSettings,
        *,
        on_episode: Progress | None = None,
        on_step: Progress | None = None,
    ) -> None:
        self.tasks = list(tasks)
        self.simulator = simulator
        self.policy_spec = policy
        self.settings = settings
        self.on_episode = on_episode or (lambda _record: None)
        self.on_step = on_step or (lambda _step: None)
        """Told of every tool call as it ends: the episode's key and the step's record."""
        self.out = settings.out
        self.log = ResultLog(self.out / EPISODES_FILE)
        self.judge = (
            StepJudge(simulator, settings.judge, settings.judge_settings)
            if settings.judge_steps
            else None
        )

    def episodes(self) -> list[tuple[Task, int]]:
        return [(t, n) for t in self.tasks for n in range(1, self.settings.episodes + 1)]

    async def run(self) -> Summary:
        started = time.monotonic()
        self._check_tool_choice()
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / SESSIONS_FOLDER).mkdir(exist_ok=True)
            self.log.drop_torn_tail()
            earlier = self.log.read()
        except OSError as exc:
            raise RolloutError(
                f"{self.out}: cannot use the folder ({exc.strerror or exc})"
            ) from None
        except ResultsError as exc:
            raise RolloutError(str(exc)) from None
        wanted = self.episodes()
        todo = [(t, n) for t, n in wanted if not earlier.get(episode_key(t, n), {}).get("finished")]
        policy = Policy(self.policy_spec)
        try:
            model = await policy.start()
            if todo:
                await self._twins_start()
            self._write_run_file(model)
            await aload_simulator(self.simulator)
            gate = asyncio.Semaphore(max(1, self.settings.parallel))

            async def one(task: Task, n: int) -> None:
                async with gate:
                    record = await self.play(policy, task, n)
                self.log.append(record)
                self.on_episode(record)

            await asyncio.gather(*(one(t, n) for t, n in todo))
        finally:
            await policy.close()
        summary = self.summary()
        summary.played = len(todo)
        summary.seconds = time.monotonic() - started
        from agentworld_tui.world.store import write_atomic

        write_atomic(
            self.out / SUMMARY_FILE,
            (json.dumps(summary.to_dict(), indent=1) + "\n").encode("utf-8"),
        )
        return summary

    def summary(self) -> Summary:
        summary = Summary(episodes=len(self.episodes()))
        latest = self.log.read()
        for task, n in self.episodes():
            record = latest.get(episode_key(task, n))
            if record is not None:
                summary.add(record)
        return summary

    # -- one episode ------------------------------------------------------------------------
    async def play(self, policy: Policy, task: Task, n: int) -> dict[str, Any]:
        key = episode_key(task, n)
        started = time.time()
        clock = time.monotonic()
        session_path = self.out / SESSIONS_FOLDER / f"{_file_name(task.key)}-{n}.json"
        seed = None if self.settings.seed is None else self.settings.seed + n
        limit = task.max_steps or self.settings.max_steps
        messages: list[dict[str, Any]] = []
        steps: list[dict[str, Any]] = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}
        ended, detail = "", ""
        tools: list[dict[str, Any]] = []
        env: Environment | None = None
        twin: dict[str, Any] | None = None
        try:
            if session_path.exists():  # left by a run that stopped mid-episode: kept aside
                session_path.replace(
                    session_path.with_name(session_path.stem + ".interrupted.json")
                )
            env = Environment(
                task.domain,
                simulator=self.simulator,
                scenario=task.scenario_loaded or task.scenario,
                world=task.world_loaded or task.world,
                schedule=task.schedule,
                seed=seed,
                session_file=session_path,
                owner=key,
                **self._twin_of(task),
            )
            first = await env.areset()
            tools = env.openai_tools()
            system = task.system or DEFAULT_SYSTEM.format(title=env.domain.title)
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": _opening(task.instruction, first.text)},
            ]
            while not ended:
                try:
                    reply = await policy.reply(messages, tools)
                except PolicyError as exc:
                    ended, detail = "policy_error", str(exc)
                    break
                usage["requests"] += 1
                usage["prompt_tokens"] += reply.prompt_tokens
                usage["completion_tokens"] += reply.completion_tokens
                messages.append(reply.message)
                if not reply.calls:
                    ended, detail = "no_tool_call", str(reply.message.get("content", ""))
                    break
                for call in reply.calls:
                    if ended:
                        messages.append(_tool_result(call.id, NOT_RUN))
                        continue
                    record, shown = await self._step(env, call, len(steps) + 1)
                    steps.append(record)
                    messages.append(_tool_result(call.id, shown))
                    self.on_step({"key": key, **record})
                    delivered = (record.get("twin") or {}).get("delivered")
                    if (record.get("route") or {}).get("failed"):
                        ended, detail = "twin_error", str(record.get("note", ""))
                    elif record.get("status") == "error" and delivered != "real":
                        ended, detail = "simulator_error", str(record.get("note", ""))
                    elif len(steps) >= limit:
                        ended, detail = "step_limit", _calls_taken(steps, limit)
        except TwinError as exc:
            ended, detail = "twin_error", str(exc)
        except EnvError as exc:
            ended, detail = "simulator_error", str(exc)
        except Exception as exc:  # one episode's fault ends that episode, not the run
            log.exception("episode %s failed", key)
            ended, detail = "crashed", f"{type(exc).__name__}: {_one_line(exc)}"
        finally:
            if env is not None:
                try:
                    twin = await self._end_beside_twin(env, ended, steps)
                finally:
                    await env.aclose()
                    _drop_lock_file(session_path)
        session = env._episode.session if env is not None and env._episode is not None else None
        return {
            "key": key,
            "where": task.where,
            "task": task.to_dict(),
            "episode": n,
            "finished": ended in FINISHED,
            "ended": ended,
            "detail": detail,
            "messages": messages,
            "tools": tools,
            "steps": steps,
            "policy_model": policy.model,
            "policy_usage": usage,
            "world_model": self.simulator.engine.info.name if self.simulator.engine else "",
            "session_file": f"{SESSIONS_FOLDER}/{session_path.name}"
            if session_path.exists()
            else None,
            "session_id": session.id if session is not None else "",
            "twin": twin,
            "seed": seed,
            "started": started,
            "seconds": round(time.monotonic() - clock, 3),
        }

    def _twin_of(self, task: Task) -> dict[str, Any]:
        """``Environment``'s twin arguments for a task's episode: the twin of its domain,
        and its check (the task's own, else its scenario's, else the run's); the rules
        with a twin, and the trace store with or without one."""
        grounded: dict[str, Any] = {}
        if self.settings.traces is not None:
            grounded = {
                "traces": self.settings.traces,
                "grounding_budget": self.settings.grounding_budget,
            }
        spec = self.settings.twins.get(task.domain)
        if spec is None:
            return grounded
        check = task.check or None
        if check is None and self.settings.check:
            scenario = task.scenario_loaded or resolve_scenario(
                resolve_domain(task.domain), task.scenario
            )
            if scenario.extras.get("check") is None:
                check = self.settings.check
        return {
            "twin": spec,
            "deliver": self.settings.deliver,
            "check": check,
            "routes": self.settings.routes,
            **grounded,
        }

    async def _end_beside_twin(
        self, env: Environment, ended: str, steps: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """End a twinned episode: the agent's claim, the check in the twin, the figures
        (the first divergence as the episode's step number, like the steps' records)."""
        if env.twin is None or env._episode is None:
            return None
        claimed = ended == "no_tool_call"
        try:
            figures = await env.aend_episode(claimed_done=claimed)
        except Exception as exc:  # the episode is kept, with why its end is missing
            log.exception("the end of a twinned episode failed")
            return {"deliver": env.deliver, "claimed_done": claimed, "error": _one_line(exc)}
        if figures is None:
            return None
        data = figures.to_dict()
        if figures.first_divergence is not None:
            step = next((s for s in steps if s.get("turn") == figures.first_divergence), None)
            data["first_divergence"] = step["step"] if step is not None else None
        check = (env.session.twin or {}).get("check")
        return {
            "deliver": env.deliver,
            "claimed_done": claimed,
            "check": check,
            "figures": data,
        }

    async def _step(
        self, env: Environment, call: PolicyCall, number: int
    ) -> tuple[dict[str, Any], str]:
        """Run one tool call; returns its record and the result the policy is shown."""
        record: dict[str, Any] = {
            "step": number,
            "tool_call_id": call.id,
            "tool": call.name,
            "arguments": call.arguments,
        }
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            message = f"the arguments are not valid JSON ({exc})"
            record["refused"] = message
            return record, f"error: {message}"
        try:
            step: StepResult = await env.astep(ToolCall(call.name, arguments))
        except ActionError as exc:
            record["refused"] = str(exc)
            return record, f"error: {exc}"
        record.update(step.to_dict())
        record["refused"] = ""
        if self.judge is not None and step.status != "error":
            session = env.session
            turn = session.turns[-1]
            record["judge"] = await self.judge.score(session, turn)
            if env.session_file is not None:
                env.session_file.save([session])
        why = reasoning_cut(record)
        if why:
            record["hint"] = THINKING_HINTS[why]
        shown = step.status in ("complete", "interrupted") or step.delivered_real
        if shown and step.observation.text:
            return record, step.observation.text
        return record, f"(the environment showed nothing: {step.note})"

    async def _twins_start(self) -> None:
        """Start each domain's twin once and close it: a twin that cannot start is one
        line before any episode, not a failure in every one."""
        from agentworld_tui.reality.spec import TwinStartError

        wanted = {t.domain for t in self.tasks}
        for domain, spec in self.settings.twins.items():
            if domain not in wanted:
                continue
            try:
                runner, _first = await asyncio.to_thread(spec.start)
            except TwinStartError as exc:
                reason = str(exc).removeprefix("the twin did not start: ")
                raise RolloutError(f"the {domain} twin did not start: {reason}") from None
            await runner.close_async()

    def _check_tool_choice(self) -> None:
        """A tool named as the tool choice must be offered in every task's environment."""
        name = self.policy_spec.tool_choice
        if not name or name in TOOL_CHOICES:
            return
        for task in self.tasks:
            offered = offered_tools(task)
            if name not in offered:
                raise RolloutError(
                    f"the tool choice {name!r} is no tool of task {shown_key(task.key)} "
                    f"({task.domain}: it offers {', '.join(offered)}); give auto, required, "
                    "none or one of its tools"
                )

    def _write_run_file(self, model: str) -> None:
        from agentworld_tui.world.store import write_atomic

        path = self.out / RUN_FILE
        if path.exists():
            return
        engine = self.simulator.engine
        data = {
            "format": RUN_FORMAT,
            "created": time.time(),
            "policy": {"server": self.policy_spec.server, "model": model},
            "world_model": engine.info.name if engine is not None else "",
            "episodes_per_task": self.settings.episodes,
            "max_steps": self.settings.max_steps,
            "twins": {
                domain: {**spec.describe(), "deliver": self.settings.deliver}
                for domain, spec in self.settings.twins.items()
            },
            "routes": self.settings.routes.source if self.settings.routes else None,
            "traces": str(self.settings.traces.path) if self.settings.traces else None,
            "tasks": [t.to_dict() for t in self.tasks],
        }
        write_atomic(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))


def episode_key(task: Task, n: int) -> str:
    return f"{task.key}#{n}"


def shown_key(key: str, limit: int = 80) -> str:
    """A task's key or an episode's as it is printed: safe, and at most ``limit``
    characters (a long one keeps its end, where the episode's number is)."""
    text = one_line(key) or "?"
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep - 12] + "…" + text[-12:]


def offered_tools(task: Task) -> list[str]:
    """The names of the tools a task's environment offers the policy."""
    domain = resolve_domain(task.domain)
    scenario = task.scenario_loaded or resolve_scenario(domain, task.scenario)
    return [tool.name for tool in domain.tools(scenario)]


def reasoning_cut(step: dict[str, Any]) -> str:
    """Why a step gave no answer because the world model stopped while reasoning ("max
    tokens" or "end of text"); "" for any other step."""
    note = str(step.get("note", ""))
    if step.get("status") != "no_answer" or "stopped while reasoning" not in note:
        return ""
    return "max tokens" if "max tokens" in note else "end of text"


def _drop_lock_file(path: Path) -> None:
    """Remove the session file's lock file once the episode is written: each save took and
    left it, and a run leaves one per episode otherwise. It is removed while held, so a
    program that opened it meanwhile finds it unlinked and takes a new one (filelock checks
    that the file it locked still has a name); one that holds it keeps it."""
    from agentworld_tui.world.session_lock import LockHeld, SessionLock

    lock = SessionLock(path)
    if not lock.lock_path.exists():
        return
    try:
        lock.acquire()
    except (LockHeld, OSError):
        return
    try:
        lock.lock_path.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        lock.release()


def _calls_taken(steps: list[dict[str, Any]], limit: int) -> str:
    refused = sum(1 for s in steps if s.get("refused"))
    if not refused:
        return f"{limit} tool calls"
    return f"{limit} tool calls, {refused} of them refused"


def run_rollout(
    tasks: Sequence[Task],
    simulator: Simulator,
    policy: PolicySpec,
    settings: RolloutSettings,
    *,
    on_episode: Progress | None = None,
    on_step: Progress | None = None,
) -> Summary:
    """Play the run to its end (or until interrupted: what finished is kept)."""
    rollout = Rollout(tasks, simulator, policy, settings, on_episode=on_episode, on_step=on_step)
    return asyncio.run(rollout.run())


def _opening(instruction: str, state: str) -> str:
    if not state.strip():
        return instruction
    return f"{instruction}\n\nThe environment shows:\n\n```\n{state}\n```"


def _tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _file_name(key: str) -> str:
    """A file name for a task's key that stays inside its folder and differs for every
    key (keys that read alike once cleaned differ in their hash)."""
    name = _UNSAFE_NAME.sub("-", key)[:60].strip(".-") or "task"
    return f"{name}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


__all__ = [
    "FINISHED",
    "Policy",
    "PolicyError",
    "PolicySpec",
    "Rollout",
    "RolloutError",
    "RolloutSettings",
    "StepJudge",
    "Summary",
    "episode_key",
    "offered_tools",
    "reasoning_cut",
    "run_rollout",
    "shown_key",
]
