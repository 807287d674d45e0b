"""AgentWorldBench trajectories: read the benchmark's JSONL, list its trajectories, and
rebuild sessions from them to replay (the model predicts each recorded turn while the real
observation stands beside it) or to continue from any turn.

A benchmark file has one line per turn to score (see DOMAINS.md). The conversation for a
line is ``system_str``, then ``prompt[i]`` / ``response[i]`` for ``i < turn_idx - 1``, then
``current_prompt``; ``response[turn_idx - 1]`` is the real observation. Lines of the same
trajectory share ``system_str`` and agree on their lists, so they are grouped back into one
trajectory. Sessions rebuilt here keep every recorded text exactly, so the messages they
send are the benchmark's.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld_tui.world.action import Action
from agentworld_tui.world.domain import Domain, Scenario
from agentworld_tui.world.sanitize import one_line
from agentworld_tui.world.session import Message, Session, Turn

BENCHMARK_GLOB = "*_test.jsonl"
MAX_PROBLEMS = 50
"""Bad lines reported one by one; beyond this, only counted."""
_ACTION_BLOCK = re.compile(r"\*\*Action:\*\*\s*\n(`{3,})[^\n]*\n(.*?)\n\1", re.DOTALL)


class TrajectoryError(Exception):
    """A benchmark file or folder that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Sample:
    """One line of a benchmark file: one turn to predict."""

    task: str
    id: str
    prompt: tuple[str, ...]
    response: tuple[str, ...]
    current_prompt: str
    system_str: str
    turn_idx: int
    total_turns: int
    source: str = ""
    """``file:line``, for messages."""

    @property
    def domain(self) -> str:
        """The domain name: the part of ``task`` after its last ``/``."""
        return self.task.rsplit("/", 1)[-1]

    @property
    def history(self) -> int:
        """Earlier turns sent before the current one (as the official evaluator counts)."""
        return min(self.turn_idx - 1, len(self.prompt), len(self.response))

    @property
    def current(self) -> str:
        if self.current_prompt:
            return self.current_prompt
        index = self.turn_idx - 1
        return self.prompt[index] if 0 <= index < len(self.prompt) else ""

    @property
    def reference(self) -> str:
        """The real observation for the current turn ("" when the line has none)."""
        index = self.turn_idx - 1
        return self.response[index] if 0 <= index < len(self.response) else ""

    def conversation(self) -> list[Message]:
        """The messages the benchmark sends for this line."""
        messages: list[Message] = []
        if self.system_str:
            messages.append({"role": "system", "content": self.system_str})
        for i in range(self.history):
            messages.append({"role": "user", "content": self.prompt[i]})
            messages.append({"role": "assistant", "content": self.response[i]})
        messages.append({"role": "user", "content": self.current})
        return messages


@dataclass
class Trajectory:
    """One recorded environment: its system prompt and every turn with its real observation."""

    domain: str
    system_str: str
    prompts: list[str]
    responses: list[str]
    samples: list[Sample] = field(default_factory=list)
    """The benchmark lines that score turns of this trajectory, by ``turn_idx``."""

    @property
    def id(self) -> str:
        return self.samples[0].id if self.samples else ""

    @property
    def turn_count(self) -> int:
        return len(self.prompts)

    @property
    def title(self) -> str:
        """A one-line summary for a list: the first action, shortened."""
        first = self.prompts[0] if self.prompts else ""
        action = _action_text(first) or first
        return one_line(action, 72)

    def covers(self, sample: Sample) -> bool:
        """Whether ``sample`` is a line of this trajectory."""
        n = len(sample.prompt)
        m = len(sample.response)
        return (
            sample.domain == self.domain
            and sample.system_str == self.system_str
            and n <= len(self.prompts)
            and m <= len(self.responses)
            and list(sample.prompt) == self.prompts[:n]
            and list(sample.response) == self.responses[:m]
        )


@dataclass
class BenchmarkSet:
    trajectories: list[Trajectory]
    samples: int
    problems: list[str]
    """Lines skipped, and why."""

    def domains(self) -> list[str]:
        return sorted({t.domain for t in self.trajectories})

    def find(self, trajectory_id: str) -> Trajectory | None:
        return next((t for t in self.trajectories if t.id == trajectory_id), None)


def benchmark_files(path: Path) -> list[Path]:
    """``path`` itself, or the ``*_test.jsonl`` files in a folder."""
    if path.is_dir():
        files = sorted(path.glob(BENCHMARK_GLOB))
        if not files:
            raise TrajectoryError(f"{path}: no {BENCHMARK_GLOB} files in this folder")
        return files
    if not path.exists():
        raise TrajectoryError(f"{path}: no such file or folder")
    return [path]


def load_benchmark(path: Path) -> BenchmarkSet:
    """Read a benchmark file or folder; bad lines are skipped and reported."""
    samples: list[Sample] = []
    bad = BadLines()
    for file in benchmark_files(path):
        fallback = file.name.removesuffix(".jsonl").removesuffix("_test")
        samples.extend(read_samples(file, fallback, bad))
    problems = bad.summary()
    if not samples:
        why = f" ({problems[0]})" if problems else ""
        raise TrajectoryError(f"{path}: no benchmark samples found{why}")
    return BenchmarkSet(group_trajectories(samples), len(samples), problems)


@dataclass
class BadLines:
    """Lines of JSONL files that were skipped: the first ``limit`` said, the rest counted."""

    limit: int = MAX_PROBLEMS
    said: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, problem: str) -> None:
        self.count += 1
        if len(self.said) < self.limit:
            self.said.append(problem)

    def summary(self) -> list[str]:
        more = self.count - len(self.said)
        return [*self.said, f"{more} more bad lines skipped"] if more else list(self.said)


def jsonl_lines(file: Path) -> Iterator[tuple[str, str]]:
    """Each line of a JSONL file that is not blank, with where it is (``name:line``), in
    order; raises TrajectoryError when the file cannot be read or is not UTF-8 text."""
    try:
        handle = file.open(encoding="utf-8")
    except OSError as exc:
        raise TrajectoryError(f"{file}: cannot read ({exc.strerror or exc})") from None
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield f"{file.name}:{number}", line
        except UnicodeDecodeError:
            raise TrajectoryError(f"{file}: not UTF-8 text") from None


def read_samples(file: Path, default_task: str, bad: BadLines) -> Iterator[Sample]:
    """The samples of one benchmark file, in order; a line that is not one is skipped and
    said in ``bad``. Raises TrajectoryError as ``jsonl_lines`` does."""
    for source, line in jsonl_lines(file):
        try:
            sample = parse_sample(line, default_task, source)
        except TrajectoryError as exc:
            bad.add(str(exc))
            continue
        yield sample


def parse_sample(line: str, default_task: str = "", source: str = "") -> Sample:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TrajectoryError(f"{source}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise TrajectoryError(f"{source}: JSON nested too deeply to read") from None
    except ValueError:  # an integer of more digits than Python converts
        raise TrajectoryError(f"{source}: a number too long to read") from None
    if not isinstance(data, dict):
        raise TrajectoryError(f"{source}: a line must be a JSON object")

    def texts(key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if isinstance(value, str):  # the official evaluator accepts a lone text too
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TrajectoryError(f"{source}: {key} must be a list of texts")
        return tuple(value)

    def whole(key: str, default: int) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TrajectoryError(f"{source}: {key} must be a whole number from 1")
        return value

    for key in ("task", "current_prompt", "system_str"):
        if not isinstance(data.get(key, ""), str):
            raise TrajectoryError(f"{source}: {key} must be text")
    raw_id = data.get("id", "")
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
        raise TrajectoryError(f"{source}: id must be text or a number")
    prompt, response = texts("prompt"), texts("response")
    sample = Sample(
        task=str(data.get("task") or default_task),
        id=str(raw_id) or source,
        prompt=prompt,
        response=response,
        current_prompt=str(data.get("current_prompt", "")),
        system_str=str(data.get("system_str", "")),
        turn_idx=whole("turn_idx", 1),
        total_turns=whole("total_turns", max(len(prompt), 1)),
        source=source,
    )
    if not sample.task:
        raise TrajectoryError(f"{source}: no task (domain) given")
    if not sample.current:
        raise TrajectoryError(
            f"{source}: no current_prompt, and prompt has no turn {sample.turn_idx}"
        )
    return sample


def group_trajectories(samples: list[Sample]) -> list[Trajectory]:
    """Group lines into trajectories: a line belongs to one whose lists extend its own."""
    buckets: dict[tuple[str, str], list[Trajectory]] = {}
    found: list[Trajectory] = []
    for sample in sorted(samples, key=lambda s: (-len(s.prompt), -len(s.response))):
        bucket = buckets.setdefault((sample.domain, sample.system_str), [])
        home = next((t for t in bucket if t.covers(sample)), None)
        if home is None:
            prompts = list(sample.prompt)
            if sample.turn_idx > len(prompts):  # the current turn is only in current_prompt
                prompts.append(sample.current)
            home = Trajectory(sample.domain, sample.system_str, prompts, list(sample.response))
            bucket.append(home)
            found.append(home)
        home.samples.append(sample)
    for trajectory in found:
        trajectory.samples.sort(key=lambda s: s.turn_idx)
    order = {id(s): i for i, s in enumerate(samples)}
    found.sort(key=lambda t: min(order[id(s)] for s in t.samples))
    return found


# -- sessions from recordings ---------------------------------------------------------------
def recorded_action(domain: str, turn_text: str) -> Action:
    """The action of a recorded turn, read back from its ``**Action:**`` block.

    JSON actions come back as data (so a domain can use them); anything else stays text.
    """
    text = _action_text(turn_text)
    if not text:
        return Action(domain, turn_text, _short(turn_text))
    try:
        payload: Any = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or JSON too deep or long to read
        payload = text
    return Action(domain, payload, _short(text))


def recorded_session(
    domain: Domain,
    system_str: str,
    turns: list[tuple[str, str]],
    *,
    title: str = "",
    description: str = "",
) -> Session:
    """A session holding recorded turns (text as sent, real observation) exactly."""
    scenario = Scenario("agentworldbench", title or "AgentWorldBench", description)
    session = Session(domain, scenario, system_str)
    for number, (text, observation) in enumerate(turns, 1):
        turn = Turn(number, recorded_action(domain.name, text), text)
        turn.observation, turn.status, turn.note = observation, "complete", "recorded"
        session.turns.append(turn)
    return session


def sample_session(sample: Sample, domain: Domain) -> Session:
    """The session for one benchmark line: its history, then its current turn pending.

    ``session.prompt(session.turns[-1]).messages`` equals ``sample.conversation()``.
    """
    history = [(sample.prompt[i], sample.response[i]) for i in range(sample.history)]
    session = recorded_session(
        _check_domain(domain, sample.domain),
        sample.system_str,
        history,
        title=f"AgentWorldBench {sample.domain} {sample.id}",
        description=f"Imported from {sample.source}, turn {sample.turn_idx}.",
    )
    number = len(session.turns) + 1
    session.turns.append(Turn(number, recorded_action(domain.name, sample.current), sample.current))
    return session


def trajectory_session(trajectory: Trajectory, domain: Domain, upto: int | None = None) -> Session:
    """The trajectory's first ``upto`` turns (default all) with their real observations,
    as history to continue from."""
    count = min(len(trajectory.prompts), len(trajectory.responses))
    upto = count if upto is None else upto
    if not 0 <= upto <= count:
        raise TrajectoryError(f"the trajectory has {count} recorded turns, not {upto}")
    return recorded_session(
        _check_domain(domain, trajectory.domain),
        trajectory.system_str,
        list(zip(trajectory.prompts[:upto], trajectory.responses[:upto], strict=True)),
        title=f"AgentWorldBench {trajectory.domain} {trajectory.id}",
        description=f"Imported from {_sources(trajectory)}.",
    )


@dataclass
class ReplayStep:
    number: int
    reference: str
    """The real observation recorded for this turn."""
    turn: Turn
    """The model's prediction (pending until the engine has run it)."""

    def diff(self) -> list[str]:
        return observation_diff(self.reference, self.turn.observation)


class Replay:
    """Replay a trajectory turn by turn: the model predicts each recorded turn from the
    recorded history (as the benchmark does), and its answer is kept beside the real one.

    ``session`` holds the recorded turns with their real observations; each prediction is a
    separate turn, so one step's prediction never leaks into the next step's prompt. Run a
    step with ``run_turn(engine, replay.session, step.turn, ...)``.
    """

    def __init__(self, trajectory: Trajectory, domain: Domain) -> None:
        self.trajectory = trajectory
        self.session = trajectory_session(trajectory, domain)
        self.steps: list[ReplayStep] = []

    @property
    def length(self) -> int:
        return len(self.session.turns)

    def step(self, number: int) -> ReplayStep:
        """A fresh prediction for turn ``number`` (1-based), added to ``steps``."""
        if not 1 <= number <= self.length:
            raise TrajectoryError(f"the trajectory has {self.length} turns, not {number}")
        recorded = self.session.turns[number - 1]
        turn = Turn(number, recorded.action, recorded.user_message, recorded.state)
        step = ReplayStep(number, recorded.observation, turn)
        self.steps.append(step)
        return step

    def next_step(self) -> ReplayStep | None:
        """The step after the last one taken, or None at the end."""
        number = self.steps[-1].number + 1 if self.steps else 1
        return self.step(number) if number <= self.length else None

    def continue_from(self, number: int) -> Session:
        """A new session with recorded turns 1..``number`` as its history, to carry on."""
        return trajectory_session(self.trajectory, self.session.domain, number)


def observation_diff(reference: str, predicted: str) -> list[str]:
    """Unified diff lines from the real observation to the predicted one."""
    return list(
        difflib.unified_diff(
            reference.splitlines(),
            predicted.splitlines(),
            "recorded",
            "predicted",
            lineterm="",
        )
    )


def _check_domain(domain: Domain, name: str) -> Domain:
    if domain.name != name:
        raise TrajectoryError(f"this trajectory is from the {name} domain, not {domain.name}")
    return domain


def _sources(trajectory: Trajectory) -> str:
    files = sorted({s.source.rsplit(":", 1)[0] for s in trajectory.samples})
    return ", ".join(files) or "AgentWorldBench"


def _action_text(turn_text: str) -> str:
    found = _ACTION_BLOCK.findall(turn_text)
    return str(found[-1][1]) if found else ""


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 80 else line[:79] + "…"
