"""Editing history: undo, regenerate (earlier answers stay reachable), branch and switch."""

from __future__ import annotations

import pytest

from agentworld_tui.domains import get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import HistoryError, Session, Turn, new_session
from agentworld_tui.world.workspace import Workspace, load_workspace

TERMINAL = get_domain("terminal")
SCENARIO = Scenario("box", "A box", "An Ubuntu machine.", state="user@box:~$ ")


def play(session: Session, command: str, screen: str, reasoning: str = "") -> Turn:
    turn = session.begin_turn(TERMINAL.parse_action(command, session.scenario))
    session.finish_turn(turn, observation=screen, reasoning=reasoning, status="complete")
    return turn


def three_turns() -> Session:
    session, problems = new_session(TERMINAL, SCENARIO)
    assert problems == []
    play(session, "ls", "a.txt b.txt\nuser@box:~$ ")
    play(session, "cat a.txt", "hello\nuser@box:~$ ")
    play(session, "rm b.txt", "user@box:~$ ")
    return session


def history_texts(session: Session, turn: Turn) -> list[str]:
    return [m["content"] for m in session.prompt(turn).messages[1:]]


def test_undo_removes_only_the_last_turn() -> None:
    session = three_turns()
    undone = session.undo()
    assert undone is not None and undone.action.label == "rm b.txt ⏎"
    assert [t.number for t in session.turns] == [1, 2]
    nxt = session.begin_turn(TERMINAL.parse_action("pwd", SCENARIO))
    assert nxt.number == 3
    assert "rm b.txt" not in "".join(history_texts(session, nxt))
    assert Session(TERMINAL, SCENARIO, "x").undo() is None


def test_regenerate_last_turn_keeps_the_earlier_answer_reachable() -> None:
    session = three_turns()
    turn = session.regenerate()
    assert turn is session.turns[-1] and turn.status == "pending" and turn.observation == ""
    assert turn.attempts[-1]["observation"] == "user@box:~$ "
    with pytest.raises(HistoryError, match="still running"):
        session.regenerate()
    session.finish_turn(turn, observation="rm: cannot remove", reasoning="", status="complete")
    restored = session.restore_attempt(0)
    assert restored.observation == "user@box:~$ "
    assert [a["observation"] for a in restored.attempts] == ["rm: cannot remove"]
    assert len(session.branches) == 1  # retrying the last turn needs no branch


def test_regenerate_an_earlier_turn_branches_and_keeps_the_old_line() -> None:
    session = three_turns()
    old_branch = session.branch_id
    turn = session.regenerate(2)
    assert session.branch_id != old_branch
    assert [t.number for t in session.turns] == [1, 2]
    assert turn.user_message == session.branches[0].turns[1].user_message
    assert turn.status == "pending"
    session.finish_turn(turn, observation="HELLO\nuser@box:~$ ", reasoning="", status="complete")
    # the old branch still has all three turns, with the old answer
    old = next(b for b in session.branches if b.id == old_branch)
    assert [t.observation for t in old.turns][1] == "hello\nuser@box:~$ "
    assert len(old.turns) == 3


def test_edit_an_earlier_action_and_branch_from_there() -> None:
    session = three_turns()
    first_branch = session.branch_id
    edited = session.fork(2, TERMINAL.parse_action("cat b.txt", SCENARIO))
    assert edited.number == 2 and "cat b.txt" in edited.user_message
    assert session.branch.parent == first_branch and session.branch.fork_turn == 2
    # the prompt of the edited turn holds turn 1 only, then the edited action
    assert history_texts(session, edited) == [
        session.turns[0].user_message,
        "a.txt b.txt\nuser@box:~$ ",
        edited.user_message,
    ]
    session.finish_turn(edited, observation="bye\nuser@box:~$ ", reasoning="", status="complete")
    play(session, "echo hi", "hi\nuser@box:~$ ")
    new_branch = session.branch_id

    # turn 2 has two versions to switch between; turns 1 and 3 have one each here
    assert [b.id for b in session.alternatives(2)] == [first_branch, new_branch]
    assert [b.id for b in session.alternatives(1)] == [new_branch]
    assert [b.id for b in session.alternatives(3)] == [new_branch]
    assert session.alternatives(4) == []

    switched = session.switch_branch(first_branch)
    assert switched.id == first_branch and session.branch_id == first_branch
    assert [t.action.label for t in session.turns] == ["ls ⏎", "cat a.txt ⏎", "rm b.txt ⏎"]
    assert [b.id for b in session.alternatives(2)] == [first_branch, new_branch]
    assert [b.id for b in session.alternatives(1)] == [first_branch]
    # editing one branch never changes another (turns were copied, not shared)
    session.turns[0].note = "edited on branch 1"
    session.switch_branch(new_branch)
    assert session.turns[0].note == ""
    assert [t.action.label for t in session.turns] == ["ls ⏎", "cat b.txt ⏎", "echo hi ⏎"]


def test_branch_edits_refused_with_a_reason() -> None:
    session = three_turns()
    with pytest.raises(HistoryError, match="no turn 7"):
        session.fork(7)
    with pytest.raises(HistoryError, match="no branch 9"):
        session.switch_branch(9)
    with pytest.raises(HistoryError, match="cannot be deleted"):
        session.delete_branch(session.branch_id)
    with pytest.raises(HistoryError, match="no such earlier answer"):
        session.restore_attempt(0)
    session.begin_turn(TERMINAL.parse_action("pwd", SCENARIO))
    with pytest.raises(HistoryError, match="still running"):
        session.switch_branch(1)
    with pytest.raises(HistoryError, match="no turn to regenerate"):
        Session(TERMINAL, SCENARIO, "x").regenerate()


def test_delete_branch_reparents_its_children() -> None:
    session = three_turns()
    session.fork(3)  # branch 2 from 1
    session.finish_turn(session.turns[-1], observation="x", reasoning="", status="complete")
    session.fork(2)  # branch 3 from 2
    session.finish_turn(session.turns[-1], observation="y", reasoning="", status="complete")
    session.switch_branch(1)
    session.delete_branch(2)
    assert [b.id for b in session.branches] == [1, 3]
    assert session.branches[1].parent == 1


def test_branches_survive_save_and_load(tmp_path) -> None:
    session = three_turns()
    session.fork(2, TERMINAL.parse_action("cat b.txt", SCENARIO))
    session.finish_turn(session.turns[-1], observation="bye", reasoning="r", status="complete")
    session.regenerate()
    session.finish_turn(session.turns[-1], observation="bye!", reasoning="", status="complete")
    path = tmp_path / "s.json"
    Workspace([session], name="branches").save(path)

    loaded = load_workspace(path).tabs[0]
    assert loaded.to_dict() == session.to_dict()
    assert loaded.branch_id == session.branch_id == 2
    assert loaded.branch.turns is loaded.turns
    assert loaded.turns[-1].attempts[0]["observation"] == "bye"
    loaded.switch_branch(1)
    assert [t.observation for t in loaded.turns] == [
        "a.txt b.txt\nuser@box:~$ ",
        "hello\nuser@box:~$ ",
        "user@box:~$ ",
    ]
    # the shown branch's turns are stored once, under "turns"
    data = session.to_dict()
    assert [("turns" in b) for b in data["branches"]] == [True, False]


def test_a_replaced_turns_list_is_what_the_branch_keeps() -> None:
    session = three_turns()
    session.turns = session.turns[:2]  # a caller may rebind the list; the branch follows
    session.fork(1)
    session.finish_turn(session.turns[-1], observation="x", reasoning="", status="complete")
    session.switch_branch(1)
    assert [t.number for t in session.turns] == [1, 2]
    assert session.to_dict()["turns"] == [t.to_dict() for t in session.turns]
