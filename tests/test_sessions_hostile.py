"""Hostile session files: a file a user was sent, or one dropped into the sessions folder.

Each is refused with a one-line message that says where and why, listed by the library with
its problem, and never written to; none of them raises anything but WorkspaceError.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentworld_tui.domains import get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.json_input import (
    MAX_DEPTH,
    JsonInputError,
    check_bounds,
    parse_json,
)
from agentworld_tui.world.judgement import DIMENSIONS, Judgement, Verdict
from agentworld_tui.world.library import LAST_USED, SessionLibrary
from agentworld_tui.world.session import new_session
from agentworld_tui.world.session_file import Scores
from agentworld_tui.world.workspace import (
    Workspace,
    WorkspaceError,
    load_workspace,
    workspace_from_json,
)

TERMINAL = get_domain("terminal")
SCENARIO = Scenario("box", "A box", "An Ubuntu machine.", state="user@box:~$ ")
HUGE = "1" + "0" * 5000
Mutation = Callable[[dict[str, Any]], None]


def good_file() -> dict[str, Any]:
    """A valid file with every optional part filled: a judged turn, an earlier answer,
    a control instruction for the next turn."""
    session, _ = new_session(TERMINAL, SCENARIO)
    for n in (1, 2):
        turn = session.begin_turn(TERMINAL.parse_action(f"echo {n}", SCENARIO))
        session.finish_turn(
            turn,
            observation=f"{n}\nuser@box:~$ ",
            reasoning="",
            status="complete",
            stats={"generated_tokens": 12, "tokens_per_second": 30.5, "stop_reason": "eos"},
        )
    session.retry()
    last = session.turns[-1]
    session.finish_turn(last, observation="2 again", reasoning="", status="complete")
    scores = dict.fromkeys(("format", "factuality", "consistency", "realism", "quality"), 4.0)
    last.judgement = Verdict(
        Judgement(scores, ("fast",), ("terse",)), judge="judge-model", reference="2"
    ).to_dict()
    session.set_control("the disk is full", persistent=True)
    return Workspace([session], name="good").to_dict()


def turn0(data: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = data["tabs"][0]["turns"][0]
    return turn


def turn1(data: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = data["tabs"][0]["turns"][1]
    return turn


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def refused(path: Path, match: str) -> str:
    before = path.read_bytes()
    with pytest.raises(WorkspaceError, match=match) as info:
        load_workspace(path)
    assert path.read_bytes() == before
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_the_good_file_loads_with_every_part() -> None:
    # The checks below must not refuse what the app itself writes.
    loaded = workspace_from_json(json.dumps(good_file()).encode(), where="good.json")
    turn = loaded.tabs[0].turns[1]
    assert turn.attempts and turn.judgement is not None
    assert Verdict.from_dict(turn.judgement).judgement is not None
    assert loaded.tabs[0].control is not None and loaded.tabs[0].control.persistent


# -- numbers and nesting, bounded while parsing --------------------------------------------
def raw_with(folder: Path, name: str, old: str, new: str) -> Path:
    """The good file with one piece of its JSON text replaced (for what json.dumps cannot
    write: a 5,000-digit number)."""
    text = json.dumps(good_file())
    assert old in text
    path = folder / f"{name}.json"
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_5000_digit_number_is_refused(tmp_path: Path) -> None:
    path = raw_with(tmp_path, "digits", '"generated_tokens": 12', f'"generated_tokens": {HUGE}')
    refused(path, r"damaged \(a number of 5,001 characters \(at most 100\)\)")
    path = raw_with(tmp_path, "created", '"created": ', f'"created": 1.{HUGE}e5, "x": ')
    refused(path, r"a number of 5,00\d characters")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 200_000])
def test_deep_nesting_is_refused(tmp_path: Path, depth: int) -> None:
    path = raw_with(tmp_path, "deep", '"ui": {}', f'"ui": {{"x": {nested(depth)}}}')
    refused(path, r"damaged \(nested (more than )?\d+ levels deep")


def test_nesting_within_the_bound_loads_and_saves_again(tmp_path: Path) -> None:
    # a payload as deep as the bound leaves room for (the file's own levels included)
    path = raw_with(tmp_path, "ok", '"ui": {}', f'"ui": {{"x": {nested(MAX_DEPTH - 3)}}}')
    workspace = load_workspace(path)
    workspace.save(tmp_path / "again.json")
    assert load_workspace(tmp_path / "again.json").ui == workspace.ui


def test_saving_refuses_what_loading_would_refuse(tmp_path: Path) -> None:
    session, _ = new_session(TERMINAL, SCENARIO)
    turn = session.begin_turn(TERMINAL.parse_action("ls", SCENARIO))
    session.finish_turn(
        turn, observation="a", reasoning="", status="complete", stats={"generated_tokens": 10**500}
    )
    workspace = Workspace([session])
    with pytest.raises(WorkspaceError, match=r"cannot save .*a number of 501 characters"):
        workspace.save(tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    workspace = Workspace([new_session(TERMINAL, SCENARIO)[0]], ui={"x": deep})
    with pytest.raises(WorkspaceError, match="nested more than"):
        workspace.save(tmp_path / "s.json")


def test_parse_json_bounds() -> None:
    assert parse_json(b'{"a": [1, 2.5, -3]}') == {"a": [1, 2.5, -3]}
    with pytest.raises(JsonInputError, match="not UTF-8"):
        parse_json(b"\xff")
    with pytest.raises(JsonInputError, match="at line 1, column 2"):
        parse_json("[x")
    with pytest.raises(JsonInputError, match="a number of 4 characters"):
        parse_json("[1234]", max_number_chars=3)
    with pytest.raises(JsonInputError, match=r"nested 3 levels deep|nested more than 2"):
        parse_json("[[[]]]", max_depth=2)
    check_bounds([[1]], max_depth=2)
    with pytest.raises(JsonInputError):
        check_bounds(-(10**99), max_number_chars=100)  # 101 characters with its sign


# -- shapes of the fields the app reads ----------------------------------------------------
def judgement_of(data: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = turn1(data)["judgement"]
    return found


SHAPES: list[tuple[str, Mutation, str]] = [
    (
        "judgement-text",
        lambda d: turn1(d).update(judgement="great"),
        r"turns\[1\]\.judgement: expected an object, got text",
    ),
    (
        "judgement-inner-list",
        lambda d: judgement_of(d).update(judgement=[1, 2]),
        r"judgement\.judgement: expected an object, got a list",
    ),
    (
        "judgement-score-missing",
        lambda d: judgement_of(d)["judgement"]["scores"].pop("realism"),
        r"judgement\.scores\.realism: expected a number, got nothing",
    ),
    (
        "judgement-score-text",
        lambda d: judgement_of(d)["judgement"]["scores"].update(format="5"),
        r"scores\.format: expected a number, got text",
    ),
    (
        "judgement-total-missing",
        lambda d: judgement_of(d)["judgement"].pop("total"),
        r"judgement\.judgement\.total: expected a number",
    ),
    (
        "judgement-normalised-nan",
        lambda d: judgement_of(d)["judgement"].update(normalised=float("nan")),
        r"judgement\.normalised: expected a number, got float",
    ),
    (
        "judgement-strengths",
        lambda d: judgement_of(d)["judgement"].update(strengths=[{"a": 1}]),
        r"strengths\[0\]: expected text, got an object",
    ),
    (
        "judgement-error",
        lambda d: judgement_of(d).update(error=["x"]),
        r"judgement\.error: expected text, got a list",
    ),
    (
        "judgement-stats",
        lambda d: judgement_of(d).update(stats=[]),
        r"judgement\.stats: expected an object",
    ),
    (
        "stats-number",
        lambda d: turn0(d)["stats"].update(generated_tokens="many"),
        r"stats\.generated_tokens: expected a number, got text",
    ),
    (
        "stats-reference",
        lambda d: turn0(d)["stats"].update(reference={"a": 1}),
        r"stats\.reference: expected text, got an object",
    ),
    ("stats-list", lambda d: turn0(d).update(stats=[1]), r"turns\[0\]\.stats: expected an object"),
    (
        "attempt-not-object",
        lambda d: turn1(d).update(attempts=["old"]),
        r"attempts\[0\]: expected an object, got text",
    ),
    (
        "attempt-observation",
        lambda d: turn1(d)["attempts"][0].update(observation=5),
        r"attempts\[0\]\.observation: expected text, got int",
    ),
    (
        "attempt-status",
        lambda d: turn1(d)["attempts"][0].update(status=["complete"]),
        r"attempts\[0\]\.status: list is not one of",
    ),
    (
        "attempt-stats",
        lambda d: turn1(d)["attempts"][0].update(stats={"elapsed": "soon"}),
        r"attempts\[0\]\.stats\.elapsed: expected a number",
    ),
    (
        "control-text",
        lambda d: d["tabs"][0].update(control={"text": 5}),
        r"control\.text: expected text, got int",
    ),
    (
        "control-empty",
        lambda d: d["tabs"][0].update(control={"text": "   "}),
        r"control: the control instruction is empty",
    ),
    (
        "control-huge",
        lambda d: d["tabs"][0].update(control={"text": "x" * 30_000}),
        r"control: .*30,000",
    ),
    (
        "control-persistent",
        lambda d: d["tabs"][0]["control"].update(persistent="yes"),
        r"control\.persistent: expected true or false, got text",
    ),
    ("control-list", lambda d: d["tabs"][0].update(control=[1]), r"control: expected an object"),
    (
        "world",
        lambda d: d["tabs"][0].update(world={"name": "../../etc"}),
        r"tabs\[0\]\.world: name",
    ),
    ("world-list", lambda d: d["tabs"][0].update(world=[1]), r"tabs\[0\]\.world: a world must be"),
    (
        "updated-far",
        lambda d: d.update(updated=1e300),
        r"updated: 1e\+300 is not a time since 1970",
    ),
    (
        "branch-created-negative",
        lambda d: d["tabs"][0]["branches"][0].update(created=-5),
        r"branches\[0\]\.created: -5 is not a time",
    ),
    (
        "omitted-negative",
        lambda d: turn0(d).update(omitted_turns=-2),
        r"omitted_turns: -2 is below 0",
    ),
    (
        "status-object",
        lambda d: turn0(d).update(status={"a": 1}),
        r"turns\[0\]\.status: dict is not one of",
    ),
    ("ui-list", lambda d: d.update(ui=[1]), r"ui: expected an object, got a list"),
    (
        "scenario-extras",
        lambda d: d["tabs"][0]["scenario"].update(extras="tools"),
        r"scenario\.extras: expected an object",
    ),
    (
        "call-arguments",
        lambda d: turn0(d)["action"].update(payload={"name": "click", "arguments": [1]}),
        r"action\.payload\.arguments: expected an object, got a list",
    ),
    (
        "call-name",
        lambda d: turn0(d)["action"].update(payload={"name": 7, "arguments": {}}),
        r"action\.payload\.name: expected text, got int",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "match"), SHAPES, ids=[s[0] for s in SHAPES])
def test_fields_of_the_wrong_shape_are_refused(
    tmp_path: Path, name: str, mutate: Mutation, match: str
) -> None:
    data = good_file()
    mutate(data)
    refused(write(tmp_path, name, data), match)


def test_a_pending_earlier_answer_comes_back_interrupted(tmp_path: Path) -> None:
    data = good_file()
    turn1(data)["attempts"][0]["status"] = "pending"
    loaded = load_workspace(write(tmp_path, "p", data))
    assert loaded.tabs[0].turns[1].attempts[0]["status"] == "interrupted"


def test_a_hostile_path_is_one_clean_line_in_messages(tmp_path: Path) -> None:
    path = tmp_path / "evil\x1b]0;owned\x07\nname.json"
    path.write_text("{ not json")
    with pytest.raises(WorkspaceError) as info:
        load_workspace(path)
    message = str(info.value)
    assert "\x1b" not in message and "\x07" not in message and "\n" not in message


# -- the library: every hostile file is listed with its problem, never a crash -------------
def test_the_library_lists_every_hostile_file_with_its_problem(tmp_path: Path) -> None:
    library = SessionLibrary(tmp_path / "lib")
    folder = library.folder
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(good_file())
    (folder / "digits.json").write_text(
        text.replace('"generated_tokens": 12', f'"generated_tokens": {HUGE}', 1)
    )
    (folder / "deep.json").write_text(text.replace('"ui": {}', f'"ui": {nested(100_000)}', 1))
    for name, mutate, _ in SHAPES:
        data = good_file()
        mutate(data)
        write(folder, name, data)
    data = good_file()
    data["name"] = "Shared \x1b[2J\x1b]52;c;ZXZpbA==\x07 [b]session[/b]\nline two"
    good = write(folder, "good", data)

    entries = {e.path.name: e for e in library.entries()}
    assert len(entries) == len(SHAPES) + 3
    broken = [e for e in entries.values() if not e.openable]
    assert len(broken) == len(SHAPES) + 2
    for entry in broken:
        assert entry.problem.startswith(str(entry.path)) and "\n" not in entry.problem
    shown = entries["good.json"]
    assert shown.openable and shown.turns == 2
    # what the browser draws is clean: no escape, no control, one line
    assert shown.name == "Shared [b]session[/b] line two"
    # the pointer names a hostile file: resuming gives a message, never a crash
    (folder / LAST_USED).write_text("deep.json")
    assert library.last_used() == folder / "deep.json"
    with pytest.raises(WorkspaceError, match="nested"):
        library.open(folder / "deep.json")
    (folder / LAST_USED).unlink()
    assert library.last_used() == good
    time.localtime(shown.updated)  # a date the browser can show


def test_the_file_s_scores_are_the_judge_s_dimensions() -> None:
    assert tuple(Scores.__annotations__) == DIMENSIONS
