"""What a session file may hold, declared as pydantic models, and its mistakes in words.

``problem_in`` checks a whole file's content against ``SessionFile`` before anything is
built from it (``Session.from_dict`` builds; these models only check), and says the first
mistake as ``where: why`` (``tabs[0].turns[1].number: expected a whole number, got text``).
Fields this version does not know are allowed. The types are strict:
``"2"`` is not a number, ``1`` is not true, NaN is not a number. Loaded only when a file is
read, so that the app's first frame does not wait for pydantic.
"""

from __future__ import annotations

from types import NoneType, UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from agentworld_tui.world.fictional_world import WorldError, world_from_dict
from agentworld_tui.world.perturbation import ControlError, control_instruction
from agentworld_tui.world.session import TurnStatus

TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
LATEST_TIME = 253402300799.0
"""The last second of the year 9999: a later time cannot be shown as a date."""


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


Moment = Annotated[float, AfterValidator(_moment)]
"""A time in seconds since 1970 that can be shown as a date."""
Status = Annotated[str, PlainValidator(_status)]


class _Part(BaseModel):
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")


class Stats(_Part):
    """A turn's figures: those the app formats are numbers, the judge's reference is text;
    figures this version does not know are kept as they are."""

    prompt_tokens: float = 0
    evaluated_prompt_tokens: float = 0
    generated_tokens: float = 0
    reasoning_tokens: float = 0
    time_to_first_token: float = 0
    tokens_per_second: float = 0
    elapsed: float = 0
    n_ctx: float = 0
    stop_reason: str = ""
    reference: str = ""


class Scores(_Part):
    """One number for each of the judge's ``DIMENSIONS``."""

    format: float
    factuality: float
    consistency: float
    realism: float
    quality: float


class Judgement(_Part):
    """The judge's scores, which the app draws."""

    scores: Scores
    total: float
    normalised: float
    note: str | None = None
    strengths: list[str] | None = None
    weaknesses: list[str] | None = None


class Verdict(_Part):
    """A verdict as ``judge.Verdict.to_dict`` writes it."""

    error: str | None = None
    judge: str | None = None
    reference: str | None = None
    answer: str | None = None
    engine_failed: bool | None = None
    stats: Stats | None = None
    judgement: Judgement | None = None


class Attempt(_Part):
    """An earlier answer to a turn's action; restoring it reads every field here."""

    observation: str | None = None
    reasoning: str | None = None
    note: str | None = None
    raw: str | None = None
    extraction: str | None = None
    status: Status = "complete"
    stats: Stats | None = None


class Call(_Part):
    """A tool call's payload (as MCP, Search, SWE and Web write it), whose name and
    arguments the panes read as such."""

    name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


def _call(payload: Any) -> Any:
    """A payload that is an object is a tool call; any other payload is the domain's."""
    if isinstance(payload, dict):
        try:
            Call.model_validate(payload)
        except ValidationError as exc:
            raise _damaged("." + problem(exc.errors(include_url=False)[0], Call)) from None
    return payload


class Action(_Part):
    domain: str
    payload: Annotated[Any, AfterValidator(_call)]
    label: str | None = None


class Turn(_Part):
    number: int = Field(ge=1)
    action: Action
    user_message: str
    state: str | None = None
    observation: str | None = None
    reasoning: str | None = None
    note: str | None = None
    raw: str | None = None
    extraction: str | None = None
    status: Status = "complete"
    stats: Stats | None = None
    omitted_turns: int | None = Field(None, ge=0)
    control: str | None = None
    judgement: Verdict | None = None
    attempts: list[Attempt] | None = None


def _numbered(turns: list[Turn]) -> list[Turn]:
    for i, turn in enumerate(turns):
        if turn.number != i + 1:
            raise _damaged(f"[{i}].number is {turn.number}, expected {i + 1}")
    return turns


Turns = Annotated[list[Turn], AfterValidator(_numbered)]
"""A branch's turns, numbered from 1 in order."""


class Branch(_Part):
    id: int
    parent: int | None = None
    fork_turn: int | None = None
    created: Moment | None = None
    turns: Turns


class Scenario(_Part):
    name: str | None = None
    title: str | None = None
    description: str | None = None
    state: str | None = None
    extras: dict[str, Any] | None = None


class Control(_Part):
    """The control instruction for a tab's next turn, checked as the app checks one."""

    text: str
    persistent: bool | None = None
    preset: str | None = None

    @model_validator(mode="after")
    def _usable(self) -> Control:
        try:
            control_instruction(self.text)
        except ControlError as exc:
            raise _damaged(f": {exc}") from None
        return self


class Tab(_Part):
    """One tab's session, as ``Session.to_dict`` writes it."""

    domain: str
    id: str | None = None
    created: Moment | None = None
    system_prompt: str
    scenario: Scenario
    control: Control | None = None
    world: Any = None
    turns: Turns | None = None
    branch: int | None = 1
    """The branch shown; its turns are the tab's ``turns``."""
    branches: list[Branch] | None = None

    @field_validator("control", mode="before")
    @classmethod
    def _no_control(cls, control: Any) -> Any:
        return None if control == {} else control

    @field_validator("world")
    @classmethod
    def _world(cls, world: Any) -> Any:
        if world is not None:
            try:
                world_from_dict(world)
            except WorldError as exc:
                raise _damaged(f": {exc}") from None
        return world

    @field_validator("branches", mode="before")
    @classmethod
    def _shown_turns_are_the_tabs(cls, branches: Any, info: ValidationInfo) -> Any:
        """The shown branch's turns are not written with it: they are the tab's."""
        if not isinstance(branches, list):
            return branches
        shown = info.data.get("branch", 1)
        return [
            {**b, "turns": []} if isinstance(b, dict) and b.get("id") == shown else b
            for b in branches
        ]

    @field_validator("branches")
    @classmethod
    def _one_id_each(cls, branches: list[Branch] | None) -> list[Branch] | None:
        ids: set[int] = set()
        for i, branch in enumerate(branches or []):
            if branch.id in ids:
                raise _damaged(f"[{i}]: branch id used twice")
            ids.add(branch.id)
        return branches


class SessionFile(_Part):
    """A session file after its ``format`` and ``schema`` were found readable."""

    name: str | None = None
    created: Moment | None = None
    updated: Moment | None = None
    active_tab: int | None = None
    ui: dict[str, Any] | None = None
    tabs: list[Tab]


def problem_in(data: dict[str, Any]) -> str | None:
    """The first mistake in a session file's content (``where: why``), or None."""
    try:
        SessionFile.model_validate(data)
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
    "model_type": "an object",
    "model_attributes_type": "an object",
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


def problem(error: ErrorDetails, root: type[BaseModel]) -> str:
    """One of pydantic's errors (found checking ``root``) as ``where: why``."""
    where = _path(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind == "damaged":
        return f"{where}{ctx['tail']}"
    if kind == "greater_than_equal":
        return f"{where}: {error['input']} is below {ctx['ge']}"
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


def _expected(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """What the field at ``loc`` is declared to be, in words."""
    kind: Any = root
    for part in loc:
        kind = _bare(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            kind = kind.model_fields[str(part)].annotation
        else:
            kind = get_args(kind)[-1]  # the items of a list, the values of an object
    kind = _bare(kind)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return "an object"
    return _DECLARED.get(get_origin(kind) or kind, "a value")


def _bare(kind: Any) -> Any:
    """``kind`` without its constraints and without ``| None``."""
    while get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    if get_origin(kind) in (Union, UnionType):
        kind = next(arg for arg in get_args(kind) if arg is not NoneType)
        return _bare(kind)
    return kind
