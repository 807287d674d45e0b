"""The simulator as a Gymnasium environment with text spaces (the ``gym`` extra).

Observations and actions are strings: an observation is the environment's state as the
simulator predicts it (the scenario's state after ``reset``), an action is the domain's own
text (a command line, a browser call, a JSON tool call, Python). ``reward`` is 0: a world
model predicts what happens, it does not judge it (score episodes with a judge, or a reward
of your own over ``info``). An episode is truncated at ``max_steps`` and never terminates by
itself. ``info`` carries the reasoning, the turn's status, its token counts and the
perturbation schedule's decisions; an action the domain refuses leaves the observation as
it was, with the app's message in ``info["error"]``, and the episode goes on. Wall-clock
timings are kept out of ``info`` (Gymnasium's checker compares two runs' ``info``); the
step's whole result, timings included, is ``env.unwrapped.last_step``.

With a ``twin`` (a ``TwinSpec``), each episode runs beside a fresh real twin: the
observation is the side delivered (reality's by default), ``info["twin"]`` says which,
with the step's divergence, and the step that reaches ``max_steps`` carries the episode's
figures in ``info["episode"]`` (the check in the twin among them). With ``routes`` and
``traces`` (``Environment``'s), ``info["route"]`` says where each step was answered and
why, and ``info["grounding"]`` which real examples the world model was shown.

The spaces are honest: the text space holds every character a screen can (its character
set is all of Unicode, indexed by code point, so vector environments pass any observation
through shared memory), and the action space samples actions the domain takes (a command,
a browser call, a phone action, a desktop call, or a call of one of the scenario's tools
with arguments drawn from its schema).

``register_environments()`` makes ``gymnasium.make("AgentWorld/Terminal-v0", engine=URL)``
work for every domain.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterator, Sequence
from ctypes import c_int32
from multiprocessing.sharedctypes import SynchronizedArray
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatten, unflatten
from gymnasium.vector.utils.shared_memory import read_from_shared_memory

from agentworld_tui.agents.env.actions import ActionInput, make_action
from agentworld_tui.agents.env.environment import Environment
from agentworld_tui.agents.env.results import StepResult
from agentworld_tui.agents.env.routing import RoutesInput, TracesInput
from agentworld_tui.agents.env.scenarios import resolve_scenario
from agentworld_tui.agents.env.simulators import EngineInput
from agentworld_tui.domains.tool_call import ToolCallDomain
from agentworld_tui.engines.base import GenerationParams
from agentworld_tui.simulator import Simulator
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.domain import Scenario, get_domain
from agentworld_tui.world.sanitize import sanitize

if TYPE_CHECKING:
    from agentworld_tui.reality.spec import Deliver, TwinSpec

__all__ = ["ActionText", "AnyText", "SharedTexts", "SimulatedEnv", "register_environments"]

MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 200_000
CODE_POINTS = 0x110000
"""Every character Python text can hold; a flattened text pads with this value."""
SAMPLE_TRIES = 64
_PLAIN = string.ascii_letters + string.digits
_WORDS = ("alpha", "report", "data", "main", "index", "test", "config", "notes", "build", "x")


class _AllCharacters(Sequence[str]):
    """Every character, by code point: what the text spaces' character set is."""

    def __len__(self) -> int:
        return CODE_POINTS

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [chr(i) for i in range(*index.indices(CODE_POINTS))]
        return chr(int(index))

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and len(value) == 1

    def __iter__(self) -> Iterator[str]:
        return (chr(i) for i in range(CODE_POINTS))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _AllCharacters)

    def __hash__(self) -> int:
        return hash(CODE_POINTS)


ALL_CHARACTERS = _AllCharacters()


class AnyText(spaces.Text):
    """A text space that holds any string within its lengths: observations are model
    output and actions are code or JSON, so the character set is every character, and a
    character's index is its code point. Samples are plain words."""

    def __init__(
        self, max_length: int, *, min_length: int = 1, seed: int | np.random.Generator | None = None
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=_PLAIN, seed=seed)

    @property
    def character_set(self) -> Any:
        return ALL_CHARACTERS

    @property
    def character_list(self) -> Any:
        return ALL_CHARACTERS

    def character_index(self, char: str) -> np.int32:
        return np.int32(ord(char))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ValueError("a text space of every character takes no character mask")
        low = self.min_length
        length = int(self.np_random.integers(low, max(low, min(self.max_length, 64)) + 1))
        return "".join(self.np_random.choice(list(_PLAIN), size=length))

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class ActionText(AnyText):
    """The action space of one domain: any text, sampled as actions the domain takes (in
    the scenario given, whose tools a tool-call domain's samples call)."""

    def __init__(
        self,
        domain: str,
        scenario: Scenario | None = None,
        *,
        max_length: int = MAX_ACTION_CHARS,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=1, seed=seed)
        self.domain = domain
        self.scenario = scenario

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ValueError("actions are sampled from the domain, without a character mask")
        return sample_action(self.domain, self.scenario, self.np_random)

    def __eq__(self, other: object, /) -> bool:
        return super().__eq__(other) and getattr(other, "domain", None) == self.domain

    def __hash__(self) -> int:
        return hash((self.domain, self.max_length))

    def __repr__(self) -> str:
        return f"ActionText({self.domain!r}, {self.max_length})"


# -- honest samples -------------------------------------------------------------------------------
def sample_action(domain_name: str, scenario: Scenario | None, rng: np.random.Generator) -> str:
    """An action of ``domain_name`` that the domain takes, in its own text form."""
    domain = get_domain(domain_name)
    scenario = scenario or resolve_scenario(domain, None)
    draw = _DRAWS.get(domain_name)
    if draw is None and isinstance(domain, ToolCallDomain):
        draw = _tool_call
    text = ""
    for _ in range(SAMPLE_TRIES):
        try:
            text = draw(rng, domain_name, scenario) if draw else _words(rng, 1, 4)
            make_action(domain, scenario, text)
        except (ActionError, ValueError, TypeError, OverflowError):
            continue  # (a schema's odd bounds included)
        return text
    return text or _words(rng, 1, 4)


def _words(rng: np.random.Generator, low: int, high: int) -> str:
    count = int(rng.integers(low, high + 1))
    return " ".join(str(rng.choice(_WORDS)) for _ in range(count))


def _name(rng: np.random.Generator) -> str:
    return str(rng.choice(_WORDS)) + str(int(rng.integers(0, 100)))


def _terminal(rng: np.random.Generator, _domain: str, _scenario: Scenario) -> str:
    command = str(rng.choice(["ls", "cat", "echo", "grep -n", "head", "wc -l", "cd", "pwd"]))
    return f"{command} {_name(rng)}\n" if command != "pwd" else "pwd\n"


def _web(rng: np.random.Generator, _domain: str, _scenario: Scenario) -> str:
    bid = str(int(rng.integers(1, 200)))
    calls = [
        f"click('{bid}')",
        f"fill('{bid}', '{_words(rng, 1, 3)}')",
        f"hover('{bid}')",
        f"scroll(0, {int(rng.integers(-500, 500))})",
        f"keyboard_type('{_words(rng, 1, 3)}')",
        f"keyboard_press('{rng.choice(['Enter', 'Tab', 'Escape'])}')",
        f"goto('https://example.com/{_name(rng)}')",
        "go_back()",
        "noop()",
    ]
    return str(rng.choice(calls))


def _android(rng: np.random.Generator, _domain: str, _scenario: Scenario) -> str:
    actions: list[dict[str, Any]] = [
        {"action": "tap", "element": _name(rng)},
        {"action": "long_press", "element": _name(rng)},
        {"action": "type", "text": _words(rng, 1, 3)},
        {"action": "swipe", "direction": str(rng.choice(["up", "down", "left", "right"]))},
        {"action": "back"},
        {"action": "home"},
        {"action": "open_app", "app_name": str(rng.choice(["Clock", "Settings", "Files"]))},
    ]
    return json.dumps(actions[int(rng.integers(0, len(actions)))])


def _desktop(rng: np.random.Generator, _domain: str, _scenario: Scenario) -> str:
    calls = [
        f"pyautogui.click({int(rng.integers(0, 1920))}, {int(rng.integers(0, 1080))})",
        f"pyautogui.write({_words(rng, 1, 3)!r})",
        f"pyautogui.press({str(rng.choice(['enter', 'tab', 'esc']))!r})",
        f"pyautogui.scroll({int(rng.integers(-10, 10))})",
        f"pyautogui.hotkey('ctrl', {str(rng.choice(['c', 'v', 's']))!r})",
    ]
    return str(rng.choice(calls))


def _tool_call(rng: np.random.Generator, domain_name: str, scenario: Scenario) -> str:
    tools = get_domain(domain_name).tools(scenario)
    tool = tools[int(rng.integers(0, len(tools)))]
    arguments = _instance(tool.input_schema or {"type": "object"}, rng, 0)
    return json.dumps({"name": tool.name, "arguments": arguments}, ensure_ascii=False)


def _instance(schema: Any, rng: np.random.Generator, depth: int) -> Any:
    """A value ``schema`` likely accepts (the domain's own check has the last word)."""
    if not isinstance(schema, dict):
        return _name(rng)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[int(rng.integers(0, len(enum)))]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[int(rng.integers(0, len(kind)))] if kind else None
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        return _object(schema, rng, depth)
    if kind == "array":
        low = int(schema.get("minItems", 0) or 0)
        high = int(schema.get("maxItems", low + 2))
        count = int(rng.integers(low, max(low, high) + 1)) if depth < 4 else low
        return [_instance(schema.get("items"), rng, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        high = schema.get("maximum", max(low, 0) + 100)
        first = int(np.ceil(low))
        return int(rng.integers(first, max(first, int(np.floor(high))) + 1))
    if kind == "boolean":
        return bool(rng.integers(0, 2))
    if kind == "null":
        return None
    text = _name(rng)
    shortest, longest = int(schema.get("minLength", 0) or 0), schema.get("maxLength")
    text = text + "x" * max(0, shortest - len(text))
    return text[:longest] if isinstance(longest, int) and longest >= shortest else text


def _object(schema: dict[str, Any], rng: np.random.Generator, depth: int) -> dict[str, Any]:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = [r for r in schema.get("required", []) or [] if isinstance(r, str)]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key, []) or [] if isinstance(o, dict)]
        if options:
            chosen = options[int(rng.integers(0, len(options)))]
            required += [r for r in chosen.get("required", []) or [] if isinstance(r, str)]
    wanted = list(dict.fromkeys(required))
    if depth < 3:
        wanted += [name for name in props if name not in wanted and rng.random() < 0.3]
    value = {name: _instance(props.get(name), rng, depth + 1) for name in wanted}
    if not value and int(schema.get("minProperties", 0) or 0) > 0:
        value[_name(rng)] = _name(rng)
    return value


_DRAWS: dict[str, Callable[[np.random.Generator, str, Scenario], str]] = {
    "terminal": _terminal,
    "web": _web,
    "android": _android,
    "os": _desktop,
}


# -- every character through flattening and shared memory ------------------------------------------
@flatten.register(AnyText)
def _flatten_any_text(space: AnyText, x: str) -> np.ndarray[Any, np.dtype[np.int32]]:  # type: ignore[misc]
    codes = np.frombuffer(x.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    flat = np.full(space.max_length, CODE_POINTS, dtype=np.int32)
    flat[: len(codes)] = codes
    return flat


@unflatten.register(AnyText)
def _unflatten_any_text(space: AnyText, x: np.ndarray[Any, Any]) -> str:  # type: ignore[misc]
    codes = np.asarray(x, dtype=np.int64)
    kept = codes[codes < CODE_POINTS].astype("<u4")
    return kept.tobytes().decode("utf-32-le", "surrogatepass")


class SharedTexts(Sequence[str]):
    """The observations of an asynchronous vector environment, in its shared memory.

    Gymnasium reads a space's shared memory once, when the vector environment starts, and
    the workers then write each new observation into it; an array is a view that follows
    the writes, and this is the same for texts: each text is decoded when it is asked for.
    A copy (what ``reset`` and ``step`` return by default) is a plain tuple of strings."""

    def __init__(self, space: AnyText, rows: np.ndarray[Any, Any]) -> None:
        self.space = space
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        return _unflatten_any_text(self.space, self.rows[index])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return repr(tuple(self))


@read_from_shared_memory.register(AnyText)
def _read_any_text(
    space: AnyText, shared_memory: SynchronizedArray[c_int32], n: int = 1
) -> SharedTexts:
    buffer: Any = shared_memory.get_obj()
    data = np.frombuffer(buffer, dtype=np.int32).reshape((n, space.max_length))
    return SharedTexts(space, data)


# -- the environment ----------------------------------------------------------------------------
class SimulatedEnv(gymnasium.Env[str, str]):
    """One simulated environment of a domain (``Environment``'s arguments)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        domain: str = "terminal",
        *,
        engine: EngineInput | None = None,
        simulator: Simulator | None = None,
        scenario: str | None = None,
        world: str | None = None,
        schedule: object = None,
        max_steps: int | None = None,
        params: GenerationParams | None = None,
        render_mode: str | None = None,
        twin: TwinSpec | None = None,
        deliver: Deliver | None = None,
        check: str | None = None,
        routes: RoutesInput | None = None,
        traces: TracesInput | None = None,
        grounding_budget: int | None = None,
    ) -> None:
        self.env = Environment(
            domain,
            engine=engine,
            simulator=simulator,
            scenario=scenario,
            world=world,
            schedule=schedule,
            max_steps=max_steps,
            params=params,
            owner="gymnasium",
            twin=twin,
            deliver=deliver,
            check=check,
            routes=routes,
            traces=traces,
            grounding_budget=grounding_budget,
        )
        self.render_mode = render_mode
        self.observation_space = self.observation_space_for(MAX_OBSERVATION_CHARS)
        self.action_space: ActionText = ActionText(self.env.domain.name, self.env.scenario)
        self.last_step: StepResult | None = None
        """The latest step's whole result, wall-clock timings included."""
        self._shown = ""

    @staticmethod
    def observation_space_for(max_length: int) -> AnyText:
        return AnyText(max_length, min_length=0)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        scenario = (options or {}).get("scenario")
        first = self.env.reset(seed=seed, scenario=scenario)
        self.action_space.scenario = self.env.scenario
        self.last_step = None
        self._shown = first.text
        return first.text, {"turn": 0, "tools": self.env.openai_tools()}

    def step(
        self, action: str | ActionInput
    ) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            step = self.env.step(action)
        except ActionError as exc:
            return self._shown, 0.0, False, False, {"status": "refused", "error": str(exc)}
        self.last_step = step
        if step.observation.text or step.status == "complete" or step.delivered_real:
            self._shown = step.observation.text
        cost = step.cost.to_dict()
        for timing in ("seconds", "generation_seconds"):
            del cost[timing]
        info = {
            "turn": step.turn,
            "status": step.status,
            "note": step.note,
            "reasoning": step.reasoning,
            "cost": cost,
            "perturbation": step.perturbation,
            "preset": step.preset,
            "schedule": [decision.to_dict() for decision in step.schedule],
        }
        if step.twin is not None:
            info["twin"] = step.twin.figures()
        if step.route is not None:
            info["route"] = step.route
        if step.grounding is not None:
            info["grounding"] = step.grounding
        if step.episode is not None:
            info["episode"] = step.episode.to_dict()
        return self._shown, 0.0, False, step.done, info

    def render(self) -> str | None:
        """The current observation, made safe to print."""
        return sanitize(self._shown) if self.render_mode == "ansi" else None

    def close(self) -> None:
        self.env.close()


def register_environments() -> list[str]:
    """Register ``AgentWorld/<Domain>-v0`` for every domain; returns the ids."""
    from agentworld_tui.domains import DOMAINS

    ids: list[str] = []
    for name in DOMAINS:
        env_id = f"AgentWorld/{DOMAINS.title(name)}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="agentworld_tui.agents.env.gym:SimulatedEnv",
                kwargs={"domain": name},
            )
        ids.append(env_id)
    return ids
