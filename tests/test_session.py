"""The conversation sent for each turn, the context budget, retries, and saved sessions."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.domains.terminal import TerminalDomain
from agentworld_tui.world.context import first_kept_turn, history_budget
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session, Turn, TurnStatus, message_size, new_session

DOMAIN = TerminalDomain()
SCENARIO = Scenario("demo", "Demo", "A Python project.", state="user@devbox:~/project$ ")


def session() -> Session:
    return Session(DOMAIN, SCENARIO, "You are a terminal.")


def play(s: Session, command: str, observation: str, status: TurnStatus = "complete") -> Turn:
    turn = s.begin_turn(DOMAIN.parse_action(command, SCENARIO))
    s.finish_turn(
        turn, observation=observation, reasoning=f"thinking about {command}", status=status
    )
    return turn


def test_messages_are_system_then_action_observation_pairs_then_the_action() -> None:
    s = session()
    play(s, "ls", "README.md  src")
    play(s, "pwd", "/home/user/project")
    current = s.begin_turn(DOMAIN.parse_action("whoami", SCENARIO))
    prompt = s.prompt(current)
    assert [m["role"] for m in prompt.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert prompt.messages[0]["content"] == "You are a terminal."
    assert prompt.messages[2]["content"] == "README.md  src"
    assert prompt.messages[4]["content"] == "/home/user/project"
    assert prompt.messages[-1]["content"] == current.user_message
    assert "whoami" in current.user_message and current.user_message.startswith("### Turn 3")
    assert not any("thinking about" in m["content"] for m in prompt.messages)
    assert prompt.omitted_turns == 0


def test_first_turn_carries_the_scenario_state_and_later_ones_do_not() -> None:
    s = session()
    first = play(s, "ls", "x")
    second = s.begin_turn(DOMAIN.parse_action("pwd", SCENARIO))
    assert "**Current State:**" in first.user_message
    assert "user@devbox:~/project$" in first.user_message
    assert "**Current State:**" not in second.user_message


def test_turns_without_an_observation_are_left_out() -> None:
    s = session()
    play(s, "ls", "README.md")
    play(s, "cat big.log", "", status="no_answer")
    play(s, "make", "boom", status="error")
    play(s, "top", "partial screen", status="interrupted")
    current = s.begin_turn(DOMAIN.parse_action("pwd", SCENARIO))
    contents = [m["content"] for m in s.prompt(current).messages if m["role"] == "assistant"]
    assert contents == ["README.md", "partial screen"]


def test_the_prompt_of_an_earlier_turn_holds_only_the_turns_before_it() -> None:
    s = session()
    first = play(s, "ls", "a")
    play(s, "pwd", "b")
    assert len(s.prompt(first).messages) == 2


def chars(text: str) -> int:
    return len(text)


def test_oldest_turns_are_dropped_when_the_budget_is_exceeded() -> None:
    s = session()
    for i in range(6):
        play(s, f"echo {i}", f"{i}" * 200)
    current = s.begin_turn(DOMAIN.parse_action("echo last", SCENARIO))
    whole = s.prompt(current, chars, budget=10**9)
    assert whole.omitted_turns == 0 and len(whole.messages) == 14

    sizes = [
        message_size(t.user_message, chars) + message_size(t.observation, chars)
        for t in s.turns[:6]
    ]
    fixed = message_size(s.system_prompt, chars) + message_size(current.user_message, chars)
    budget = fixed + sum(sizes[2:])  # exactly the four newest turns fit
    prompt = s.prompt(current, chars, budget)
    assert prompt.omitted_turns == 2
    assert [m["content"] for m in prompt.messages if m["role"] == "assistant"] == [
        f"{i}" * 200 for i in range(2, 6)
    ]
    assert prompt.messages[0]["role"] == "system"
    assert prompt.messages[-1]["content"] == current.user_message
    assert s.prompt(current, chars, budget - 1).omitted_turns == 3
    assert s.prompt(current, chars, budget=1).omitted_turns == 6
    assert len(s.prompt(current, chars, budget=1).messages) == 2


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=500), max_size=30),
    fixed=st.integers(min_value=0, max_value=2000),
    budget=st.integers(min_value=0, max_value=8000),
)
def test_first_kept_turn_keeps_the_longest_suffix_that_fits(
    sizes: list[int], fixed: int, budget: int
) -> None:
    first = first_kept_turn(sizes, fixed, budget)
    assert 0 <= first <= len(sizes)
    if first < len(sizes):
        assert fixed + sum(sizes[first:]) <= budget
    if first > 0:
        assert fixed + sum(sizes[first - 1 :]) > budget


def test_history_budget_leaves_room_to_generate() -> None:
    assert history_budget(32768, 32768) == 16384  # the generation budget is capped at half
    assert history_budget(32768, 4096) == 28672
    assert history_budget(0, 100) == 0


def test_retry_keeps_every_earlier_answer() -> None:
    s = session()
    turn = play(s, "ls", "first answer")
    s.retry()
    assert (turn.status, turn.observation, turn.reasoning) == ("pending", "", "")
    s.finish_turn(turn, observation="second answer", reasoning="r2", status="complete")
    s.retry()
    assert [a["observation"] for a in turn.attempts] == ["first answer", "second answer"]
    assert turn.attempts[0]["reasoning"] == "thinking about ls"
    assert len(s.turns) == 1
    # A retried turn is not history for itself.
    assert len(s.prompt(turn).messages) == 2


def test_new_session_fills_the_shipped_prompt() -> None:
    s, problems = new_session(DOMAIN, SCENARIO)
    assert problems == []
    assert "A Python project." in s.system_prompt
    assert "{{" not in s.system_prompt


def test_a_user_prompt_overrides_the_shipped_one(isolated_dirs: dict) -> None:
    folder = isolated_dirs["config"] / "prompts" / "terminal"
    folder.mkdir(parents=True)
    (folder / "system_prompt.txt").write_text("Custom shell. {{scenario}}", encoding="utf-8")
    s, problems = new_session(DOMAIN, SCENARIO)
    assert problems == []
    assert s.system_prompt == "Custom shell. A Python project.\n"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
statuses = st.sampled_from(["pending", "complete", "interrupted", "no_answer", "error"])


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    s = Session(
        DOMAIN,
        Scenario(
            draw(st.text(max_size=10)),
            draw(st.text(max_size=10)),
            draw(st.text(max_size=30)),
            draw(st.text(max_size=30)),
            draw(st.dictionaries(st.text(max_size=5), json_values, max_size=3)),
        ),
        draw(st.text(max_size=50)),
    )
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        keys = draw(st.text(max_size=20))
        action = DOMAIN.make_action([{"keystrokes": keys or "C-c", "duration": 1.0}], SCENARIO)
        turn = s.begin_turn(action)
        s.finish_turn(
            turn,
            observation=draw(st.text(max_size=40)),
            reasoning=draw(st.text(max_size=40)),
            status=draw(statuses),
            note=draw(st.text(max_size=10)),
            stats={"evaluated_prompt_tokens": draw(st.integers(0, 10**6))},
        )
        if draw(st.booleans()):
            s.retry()
        turn.omitted_turns = draw(st.integers(0, 5))
    return s


@settings(max_examples=100, deadline=None)
@given(s=sessions())
def test_to_dict_from_dict_round_trip(s: Session) -> None:
    data = json.loads(json.dumps(s.to_dict()))
    again = Session.from_dict(data, DOMAIN)
    assert again.to_dict() == s.to_dict()
    assert [t.to_dict() for t in again.turns] == [t.to_dict() for t in s.turns]
    if s.turns:
        assert again.prompt(again.turns[-1]).messages == s.prompt(s.turns[-1]).messages
