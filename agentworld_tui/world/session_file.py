"""What a session file may hold, declared as typed dicts that pydantic checks, and its
mistakes in words.

``problem_in`` checks a whole file's content against ``SessionFile`` before anything is
built from it (``Session.from_dict`` builds; these declarations only check), and says the
first mistake as ``where: why`` (``tabs[0].turns[1].number: expected a whole number, got
text``). Keys this version does not know are allowed. The types are strict: ``"2"`` is not
a number, ``1`` is not true, NaN is not a number. Typed dicts rather than models: checking
builds no model objects, so a file of thousands of turns is checked as fast as by hand.
Loaded only when a file is read, so that the app's first frame does not wait for pydantic.
"""

from __future__ import annotations

from types import NoneType, UnionType
from typing import (
    Annotated,
    Any,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import ErrorDetails, PydanticCustomError
from typing_extensions import TypedDict, is_typeddict

from agentworld_tui.world.fictional_world import WorldError, world_from_dict
from agentworld_tui.world.perturbation import ControlError, control_instruction
from agentworld_tui.world.session import TurnStatus

TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
TWIN_STATUSES = ("ok", "error", "timeout", "crashed")
"""``reality.TwinStatus``'s values (the world cannot import reality; a test keeps the two
the same)."""
SIDES = ("real", "sim")
ROUTES = ("real", "sim", "shadow")
"""``reality.routing.Route``'s values (a test keeps the two the same)."""
ANSWERED = ("real", "sim", "both")
FALLBACKS = ("sim", "fail")
LATEST_TIME = 253402300799.0
"""The last second of the year 9999: a later time cannot be shown as a date."""
_STRICT = with_config(ConfigDict(strict=True, allow_inf_nan=False, extra="ignore"))


def _damaged(tail: str) -> PydanticCustomError:
    """A mistake said in this module's words: ``tail`` follows the path where it is."""
    return PydanticCustomError("damaged", "{tail}", {"tail": tail})


def _moment(value: float) -> float:
    if not 0 <= value <= LATEST_TIME:
        raise _damaged(f": {value:g} is not a time since 1970 before the year 10000")
    return value


def _status(value: Any) -> str:
    if isinstance(value, str) and value in TURN_STATUSES:
        return value
    shown = repr(value)[:60] if isinstance(value, str) else type(value).__name__
    raise _damaged(f": {shown} is not one of {', '.join(TURN_STATUSES)}")


def _one_of(values: tuple[str, ...]) -> Any:
    def check(value: Any) -> str:
        if isinstance(value, str) and value in values:
            return value
        shown = repr(value)[:60] if isinstance(value, str) else type(value).__name__
        raise _damaged(f": {shown} is not one of {', '.join(values)}")

    return PlainValidator(check)


Moment = Annotated[float, AfterValidator(_moment)]
"""A time in seconds since 1970 that can be shown as a date."""
Status = Annotated[str, PlainValidator(_status)]
TwinStatus = Annotated[str, _one_of(TWIN_STATUSES)]
Side = Annotated[str, _one_of(SIDES)]
Share = Annotated[float, Field(ge=0, le=1)]
Seconds = Annotated[float, Field(ge=0)]


@_STRICT
class RealAnswer(TypedDict, total=False):
    """How reality answered a turn it answered alone (its text is the turn's observation):
    ``RealObservation.to_dict`` without the text."""

    status: Annotated[str, _one_of(TWIN_STATUSES)]
    elapsed: Annotated[float, Field(ge=0)] | None
    error: str | None
    tool_error: bool | None
    exit_code: int | None


@_STRICT
class Stats(TypedDict, total=False):
    """A turn's figures: those the app formats are numbers, the judge's reference is text;
    figures this version does not know are kept as they are."""

    prompt_tokens: float
    evaluated_prompt_tokens: float
    generated_tokens: float
    reasoning_tokens: float
    time_to_first_token: float
    tokens_per_second: float
    elapsed: float
    n_ctx: float
    stop_reason: str
    reference: str
    real: RealAnswer


@_STRICT
class Scores(TypedDict):
    """One number for each of the judge's ``DIMENSIONS``."""

    format: float
    factuality: float
    consistency: float
    realism: float
    quality: float


@_STRICT
class Judgement(TypedDict):
    """The judge's scores, which the app draws."""

    scores: Scores
    total: float
    normalised: float
    note: NotRequired[str | None]
    strengths: NotRequired[list[str] | None]
    weaknesses: NotRequired[list[str] | None]


@_STRICT
class Verdict(TypedDict, total=False):
    """A verdict as ``judge.Verdict.to_dict`` writes it."""

    error: str | None
    judge: str | None
    reference: str | None
    answer: str | None
    engine_failed: bool | None
    stats: Stats | None
    judgement: Judgement | None


@_STRICT
class RealSide(TypedDict):
    """What a twin answered, as ``RealObservation.to_dict`` writes it."""

    text: str
    status: TwinStatus
    elapsed: NotRequired[Seconds | None]
    error: NotRequired[str | None]
    tool_error: NotRequired[bool | None]
    exit_code: NotRequired[int | None]


@_STRICT
class Divergence(TypedDict):
    """A prediction's divergence from reality, as ``Divergence.to_dict`` writes it."""

    score: Share
    diverged: bool
    kind: NotRequired[Annotated[str, _one_of(("json", "text"))] | None]
    parts: NotRequired[Annotated[list[Share], Field(min_length=2, max_length=2)] | None]


@_STRICT
class PredictionFigures(TypedDict, total=False):
    """What of a twinned turn's reality record belongs to one prediction."""

    divergence: Divergence | None
    judgement: Verdict | None


@_STRICT
class Reality(PredictionFigures):
    """A twinned turn's real side: what the twin answered, which side the agent received,
    and how far the prediction was from reality."""

    real: Required[RealSide]
    delivered: Required[Side]


Count = Annotated[int, Field(ge=0)]
RouteName = Annotated[str, _one_of(ROUTES)]


@_STRICT
class Change(TypedDict, total=False):
    """A simulated call that kept a later one from reality (``routing.Change.to_dict``)."""

    tool: str
    turn: Count
    server: str | None
    affects: list[str] | None


@_STRICT
class Route(TypedDict):
    """Where a routed call was answered and why, as ``routing.Decision.to_dict`` writes
    it; a reopened session's router is taken up again from these."""

    tool: str
    route: RouteName
    answered: Annotated[str, _one_of(ANSWERED)]
    reason: str
    turn: NotRequired[Count | None]
    ruled: NotRequired[RouteName | None]
    rule: NotRequired[Count | None]
    on_failure: NotRequired[Annotated[str, _one_of(FALLBACKS)] | None]
    server: NotRequired[str | None]
    changes_state: NotRequired[bool | None]
    affects: NotRequired[list[str] | None]
    forced_by: NotRequired[Change | None]
    fallback: NotRequired[str | None]
    """Why reality did not answer a call routed to it, so the world model did."""
    failed: NotRequired[str | None]
    """Why reality did not answer a call whose rule says to fail then."""
    edited: NotRequired[bool | None]
    """The agent received a person's edit instead of reality's answer."""


@_STRICT
class Grounding(TypedDict):
    """The real examples a turn's prompt was shown (``Grounding.to_dict``)."""

    examples: list[int]
    text: str
    tokens: NotRequired[Count | None]
    budget: NotRequired[Count | None]
    found: NotRequired[Count | None]
    cut: NotRequired[list[int] | None]
    skipped: NotRequired[Count | None]
    problem: NotRequired[str | None]


@_STRICT
class Attempt(TypedDict, total=False):
    """An earlier answer to a turn's action; restoring it reads every field here."""

    observation: str | None
    reasoning: str | None
    note: str | None
    raw: str | None
    extraction: str | None
    status: Status
    stats: Stats | None
    reality: PredictionFigures | None


@_STRICT
class Call(TypedDict, total=False):
    """A tool call's payload (as MCP, Search, SWE and Web write it), whose name and
    arguments the panes read as such."""

    name: str
    arguments: dict[str, Any]


_CALL = TypeAdapter(Call)


def _call(payload: Any) -> Any:
    """A payload that is an object is a tool call; any other payload is the domain's."""
    if isinstance(payload, dict):
        try:
            _CALL.validate_python(payload)
        except ValidationError as exc:
            raise _damaged("." + problem(exc.errors(include_url=False)[0], Call)) from None
    return payload


@_STRICT
class Action(TypedDict):
    domain: str
    payload: Annotated[Any, AfterValidator(_call)]
    label: NotRequired[str | None]


@_STRICT
class Turn(TypedDict):
    number: Annotated[int, Field(ge=1)]
    action: Action
    user_message: str
    state: NotRequired[str | None]
    observation: NotRequired[str | None]
    reasoning: NotRequired[str | None]
    note: NotRequired[str | None]
    raw: NotRequired[str | None]
    extraction: NotRequired[str | None]
    status: NotRequired[Status]
    stats: NotRequired[Stats | None]
    omitted_turns: NotRequired[Annotated[int, Field(ge=0)] | None]
    control: NotRequired[str | None]
    judgement: NotRequired[Verdict | None]
    attempts: NotRequired[list[Attempt] | None]
    reality: NotRequired[Reality | None]
    route: NotRequired[Route | None]
    grounding: NotRequired[Grounding | None]


def _numbered(turns: list[Turn]) -> list[Turn]:
    for i, turn in enumerate(turns):
        if turn["number"] != i + 1:
            raise _damaged(f"[{i}].number is {turn['number']}, expected {i + 1}")
    return turns


Turns = Annotated[list[Turn], AfterValidator(_numbered)]
"""A branch's turns, numbered from 1 in order."""


@_STRICT
class Branch(TypedDict):
    id: int
    parent: NotRequired[int | None]
    fork_turn: NotRequired[int | None]
    created: NotRequired[Moment | None]
    turns: Turns


@_STRICT
class Scenario(TypedDict, total=False):
    name: str | None
    title: str | None
    description: str | None
    state: str | None
    extras: dict[str, Any] | None


@_STRICT
class Control(TypedDict):
    text: str
    persistent: NotRequired[bool | None]
    preset: NotRequired[str | None]


def _usable(control: Control | None) -> Control | None:
    """The control instruction for a tab's next turn is checked as the app checks one."""
    if control is not None:
        try:
            control_instruction(control["text"])
        except ControlError as exc:
            raise _damaged(f": {exc}") from None
    return control


def _no_control(control: Any) -> Any:
    """No instruction is written as null, or as ``{}``."""
    return None if control == {} else control


UsableControl = Annotated[Control | None, AfterValidator(_usable), BeforeValidator(_no_control)]


def _world(world: Any) -> Any:
    if world is not None:
        try:
            world_from_dict(world)
        except WorldError as exc:
            raise _damaged(f": {exc}") from None
    return world


@_STRICT
class CheckResult(TypedDict):
    """A task's check in the twin, as ``CheckResult.to_dict`` writes it."""

    passed: bool
    exit_code: int | None
    output: str
    status: NotRequired[TwinStatus]
    elapsed: NotRequired[Seconds | None]
    error: NotRequired[str | None]


@_STRICT
class Check(TypedDict):
    command: str
    result: NotRequired[CheckResult | None]


@_STRICT
class EpisodeFigures(TypedDict, total=False):
    """An episode's figures, as ``EpisodeFigures.to_dict`` writes them."""

    steps: Count
    twin_failures: Count
    diverged_steps: Count
    first_divergence: Annotated[int, Field(ge=1)] | None
    diverged_share: Share | None
    mean_score: Share | None
    check_passed: bool | None
    claimed_done: bool | None
    deceived: bool | None


@_STRICT
class Twin(TypedDict):
    """The real twin beside a tab's session (``TwinSpec.describe`` and the episode's end)."""

    domain: str
    kind: str
    deliver: NotRequired[Side]
    backend: NotRequired[str | None]
    seed: NotRequired[str | None]
    workdir: NotRequired[str | None]
    image: NotRequired[str | None]
    network: NotRequired[bool | None]
    command: NotRequired[list[str] | None]
    url: NotRequired[str | None]
    check: NotRequired[Check | None]
    figures: NotRequired[EpisodeFigures | None]
    routes: NotRequired[str | None]
    """Where the routing rules came from (a file, or the shipped default)."""


def _one_id_each(branches: list[Branch] | None) -> list[Branch] | None:
    ids: set[int] = set()
    for i, branch in enumerate(branches or []):
        if branch["id"] in ids:
            raise _damaged(f"[{i}]: branch id used twice")
        ids.add(branch["id"])
    return branches


@_STRICT
class Tab(TypedDict):
    """One tab's session, as ``Session.to_dict`` writes it."""

    domain: str
    id: NotRequired[str | None]
    created: NotRequired[Moment | None]
    system_prompt: str
    scenario: Scenario
    control: NotRequired[UsableControl]
    world: NotRequired[Annotated[Any, AfterValidator(_world)]]
    twin: NotRequired[Twin | None]
    turns: NotRequired[Turns | None]
    branch: NotRequired[int | None]
    """The branch shown; its turns are the tab's ``turns``."""
    branches: NotRequired[Annotated[list[Branch] | None, AfterValidator(_one_id_each)]]


def _shown_turns_are_the_tabs(tab: Any) -> Any:
    """The shown branch's turns are not written with it: they are the tab's."""
    if not isinstance(tab, dict) or not isinstance(tab.get("branches"), list):
        return tab
    shown = tab.get("branch", 1)
    branches = [
        {**b, "turns": []} if isinstance(b, dict) and b.get("id") == shown else b
        for b in tab["branches"]
    ]
    return {**tab, "branches": branches}


@_STRICT
class SessionFile(TypedDict):
    """A session file after its ``format`` and ``schema`` were found readable."""

    name: NotRequired[str | None]
    created: NotRequired[Moment | None]
    updated: NotRequired[Moment | None]
    active_tab: NotRequired[int | None]
    ui: NotRequired[dict[str, Any] | None]
    tabs: list[Annotated[Tab, BeforeValidator(_shown_turns_are_the_tabs)]]


_SESSION_FILE = TypeAdapter(SessionFile)


def problem_in(data: dict[str, Any]) -> str | None:
    """The first mistake in a session file's content (``where: why``), or None."""
    try:
        _SESSION_FILE.validate_python(data)
    except ValidationError as exc:
        return problem(exc.errors(include_url=False)[0], SessionFile)
    return None


_EXPECTED = {
    "string_type": "text",
    "int_type": "a whole number",
    "float_type": "a number",
    "finite_number": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "list_type": "a list",
}
_DECLARED: dict[Any, str] = {
    str: "text",
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    dict: "an object",
    list: "a list",
}
_FOUND = {"str": "text", "dict": "an object", "list": "a list", "NoneType": "null"}


def problem(error: ErrorDetails, root: type[Any]) -> str:
    """One of pydantic's errors (found checking ``root``) as ``where: why``."""
    where = _path(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind == "damaged":
        return f"{where}{ctx['tail']}"
    if kind == "greater_than_equal":
        return f"{where}: {error['input']} is below {ctx['ge']}"
    if kind == "less_than_equal":
        return f"{where}: {error['input']} is above {ctx['le']}"
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        few = "at least" if kind == "too_short" else "at most"
        return f"{where}: expected {few} {bound} items, got {ctx.get('actual_length')}"
    if kind == "missing":
        return f"{where}: expected {_expected(root, error['loc'])}, got nothing"
    found = type(error["input"]).__name__
    expected = _EXPECTED.get(kind)
    if expected is None:
        return f"{where}: {error['msg']}"
    return f"{where}: expected {expected}, got {_FOUND.get(found, found)}"


def _path(loc: tuple[int | str, ...]) -> str:
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc]
    return "".join(parts).removeprefix(".")


def _expected(root: type[Any], loc: tuple[int | str, ...]) -> str:
    """What the key at ``loc`` is declared to be, in words."""
    kind: Any = root
    for part in loc:
        kind = _bare(kind)
        if is_typeddict(kind):
            kind = get_type_hints(kind, include_extras=True)[str(part)]
        else:
            kind = get_args(kind)[-1]  # the items of a list, the values of an object
    kind = _bare(kind)
    if is_typeddict(kind):
        return "an object"
    return _DECLARED.get(get_origin(kind) or kind, "a value")


def _bare(kind: Any) -> Any:
    """``kind`` without its constraints, ``NotRequired`` and ``| None``."""
    while get_origin(kind) in (Annotated, NotRequired, Required):
        kind = get_args(kind)[0]
    if get_origin(kind) in (Union, UnionType):
        return _bare(next(arg for arg in get_args(kind) if arg is not NoneType))
    return kind
