"""Judging: the judge's prompt, reading its answer leniently but never guessing, the score
arithmetic, real judge engines (a scripted GGUF, a server), and the verdict screen."""

from __future__ import annotations

import json
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld_tui.domains import DOMAINS, get_domain
from agentworld_tui.engines.llama import LlamaEngine
from agentworld_tui.engines.remote import RemoteEngine
from agentworld_tui.judging.judge import JUDGE_PARAMS, JudgeSettings, run_judge
from agentworld_tui.judging.prompts import context_text, judge_messages, turn_judge_messages
from agentworld_tui.judging.reading import parse_judgement
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.judgement import DIMENSIONS, Judgement, JudgementError, Verdict, normalise
from agentworld_tui.world.session import new_session

SCORES = {"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 2}
VERDICT_JSON = json.dumps(
    {"strengths": ["right prompt"], "weaknesses": ["wrong size"], "scores": SCORES}
)
JUDGE_SCRIPT = (
    "The prediction shows the listing but the size differs.</think>"
    f"<final_evaluation>{VERDICT_JSON}</final_evaluation>"
)


def scores_of(judgement: Judgement) -> dict[str, float]:
    return dict(judgement.scores)


# -- arithmetic -------------------------------------------------------------------------------
def test_total_is_the_mean_and_normalising_maps_1_to_5_onto_0_to_100() -> None:
    judgement = Judgement({d: float(v) for d, v in SCORES.items()})
    assert judgement.total == pytest.approx((4 + 3 + 5 + 4 + 2) / 5)  # 3.6
    assert judgement.normalised == pytest.approx((3.6 - 1) / 4 * 100)  # 65.0
    assert (normalise(1), normalise(3), normalise(5)) == (0.0, 50.0, 100.0)


# -- reading answers --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "answer",
    [
        f"<final_evaluation>{VERDICT_JSON}</final_evaluation>",
        f"Long reasoning... I will answer in <final_evaluation> tags.\n</think>\n"
        f"<final_evaluation>\n{VERDICT_JSON}\n</final_evaluation>",
        f"<final_evaluation>\n```json\n{VERDICT_JSON}\n```\n</final_evaluation>",
        f"<final_evaluation>{VERDICT_JSON}",  # the closing tag never came
        f"no tags at all, just the object:\n```json\n{VERDICT_JSON}\n```",
        "<FINAL_EVALUATION>{'strengths': [], 'scores': {'Format': 4, 'Factuality': 3, "
        "'Consistency': 5, 'Realism': 4, 'Quality': 2}}</FINAL_EVALUATION>",
        '<final_evaluation>{"strengths": ["a",], "weaknesses": [], "scores": {"format": 4, '
        '"factuality": 3, "consistency": 5, "realism": 4, "quality": 2,},}</final_evaluation>',
        '<final_evaluation>{"scores": {"format": "4", "factuality": "3/5", "consistency": 5.0,'
        ' "realism": {"score": 4, "why": "ok"}, "quality": 2}}</final_evaluation>',
        '<final_evaluation>{"format": 4, "factuality": 3, "consistency": 5, "realism": 4, '
        '"quality": 2}</final_evaluation>',
        # A first draft inside the reasoning, the real verdict last.
        '<final_evaluation>{"scores": {"format": 1}}</final_evaluation> on second thought '
        f"<final_evaluation>{VERDICT_JSON}</final_evaluation>",
        # Broken JSON (an unescaped quote): the scores are still plainly there.
        '<final_evaluation>{"strengths": ["the "ls" echo"], "scores": {"format": 4, '
        '"factuality": 3, "consistency": 5, "realism": 4, "quality": 2}}</final_evaluation>',
    ],
)
def test_verdicts_are_read_through_the_usual_mess(answer: str) -> None:
    assert scores_of(parse_judgement(answer)) == {d: float(v) for d, v in SCORES.items()}


def test_reasons_and_mending_are_kept() -> None:
    judgement = parse_judgement(f"<final_evaluation>{VERDICT_JSON}</final_evaluation>")
    assert (judgement.strengths, judgement.weaknesses, judgement.note) == (
        ("right prompt",),
        ("wrong size",),
        "",
    )
    mended = parse_judgement('{"strengths": "one", "scores": ' + json.dumps(SCORES)[:-1] + ",},}")
    assert mended.strengths == ("one",) and mended.note == "JSON mended"
    inside = parse_judgement(
        '{"strengths": [",}", "a \\",]"], "scores": ' + json.dumps(SCORES) + ",}"
    )
    assert inside.strengths == (",}", 'a ",]')


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("", "no JSON object with the scores"),
        ("The prediction is good. 4/5.", "no JSON object"),
        ("<final_evaluation></final_evaluation>", "no JSON object"),
        (
            '<final_evaluation>{"scores": {"format": 4, "factuality": 3, "consistency": 5, '
            '"realism": 4}}</final_evaluation>',
            "no quality score",
        ),
        (
            '<final_evaluation>{"scores": {"format": 0, "factuality": 3, "consistency": 5, '
            '"realism": 4, "quality": 2}}</final_evaluation>',
            "format score 0 is outside 1-5",
        ),
        (
            '<final_evaluation>{"scores": {"format": "good", "factuality": 3, "consistency": 5,'
            ' "realism": 4, "quality": 2}}</final_evaluation>',
            "format score is not a number",
        ),
        (
            '<final_evaluation>{"scores": {"format": true, "factuality": 3, "consistency": 5,'
            ' "realism": 4, "quality": 2}}</final_evaluation>',
            "format score is not a number",
        ),
        ('<final_evaluation>{"scores": [4, 3, 5, 4, 2]}</final_evaluation>', "not an object"),
        ("<final_evaluation>{{{{{{{{", "no JSON object"),
    ],
)
def test_answers_without_a_full_verdict_are_unreadable(answer: str, why: str) -> None:
    with pytest.raises(JudgementError, match=why):
        parse_judgement(answer)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_a_verdict_or_a_clear_error(text: str) -> None:
    try:
        judgement = parse_judgement(text)
    except JudgementError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(1 <= judgement.scores[d] <= 5 for d in DIMENSIONS)


score_values = st.integers(min_value=1, max_value=5)
prose = st.text(
    st.characters(blacklist_characters="{}<>`", blacklist_categories=("Cs",)), max_size=200
)


@settings(max_examples=150, deadline=None)
@given(
    scores=st.fixed_dictionaries({d: score_values for d in DIMENSIONS}),
    reasoning=prose,
    strengths=st.lists(st.text(max_size=30), max_size=3),
    fence=st.booleans(),
    trailing_comma=st.booleans(),
    closed=st.booleans(),
)
def test_wrapped_verdicts_read_back_exactly(
    scores: dict[str, int],
    reasoning: str,
    strengths: list[str],
    fence: bool,
    trailing_comma: bool,
    closed: bool,
) -> None:
    body = json.dumps({"strengths": strengths, "scores": scores})
    if trailing_comma:
        body = body[:-2] + ",}" + ",}"
    if fence:
        body = f"```json\n{body}\n```"
    answer = f"{reasoning}</think><final_evaluation>{body}" + (
        "</final_evaluation>" if closed else ""
    )
    judgement = parse_judgement(answer)
    assert judgement.scores == {d: float(v) for d, v in scores.items()}
    assert judgement.strengths == tuple(s.strip() for s in strengths if s.strip())


# -- the judge's prompt -----------------------------------------------------------------------
@pytest.mark.parametrize("domain", list(DOMAINS))
def test_every_domain_is_judged_with_a_system_prompt_and_a_user_message(domain: str) -> None:
    messages, problems = judge_messages(
        domain, [("### Turn 1\nls", "a b")], "### Turn 2\nls -l", "PREDICTED", "REAL"
    )
    assert problems == []
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "five" in system.lower() and "{" not in system.replace('{"', "").replace("{n", "")
    assert "PREDICTED" not in system and "REAL" not in system
    assert user.startswith("# Context (Historical Interactions):\n\n### Turn 1\nls\na b\n\n")
    assert "# Current Turn:\n\n### Turn 2\nls -l" in user
    assert "**World Model Output (Simulated):**\n```\nPREDICTED\n```" in user
    assert "**Ground Truth (Real Output):**\n```\nREAL\n```" in user
    assert user.index("PREDICTED") < user.index("REAL")
    assert "<final_evaluation>" in user and "{context}" not in user and "{{" not in user


def test_history_is_cut_from_the_oldest_end_and_says_so() -> None:
    history = [(f"### Turn {i}", f"out {i}" * 20) for i in range(1, 6)]
    full = context_text(history)
    assert full.count("### Turn") == 5
    cut = context_text(history, limit=len(full) // 2)
    assert cut.startswith(
        "# Context (Historical Interactions):\n\n(3 earlier turn(s) left out for length)"
    )
    assert "### Turn 5" in cut and "### Turn 1\n" not in cut
    assert context_text([]) == ""


def test_a_turn_is_judged_with_the_history_it_was_sent_with() -> None:
    session, _ = new_session(get_domain("terminal"), Scenario("s", "S", state="$ "))
    for command, observation in (("ls", "a b"), ("pwd", "/root")):
        turn = session.begin_turn(session.domain.parse_action(command, session.scenario))
        session.finish_turn(turn, observation=observation, reasoning="", status="complete")
    messages, _ = turn_judge_messages(session, session.turns[1], "/home/root")
    user = messages[1]["content"]
    assert session.turns[0].user_message in user and "a b" in user
    assert session.turns[1].user_message in user
    assert "```\n/root\n```" in user and "```\n/home/root\n```" in user


# -- real judge engines -----------------------------------------------------------------------
def test_a_scripted_local_judge_gives_the_fixed_verdict(scripted_model: Any) -> None:
    judge = LlamaEngine(scripted_model(JUDGE_SCRIPT, n_ctx_train=8192), n_ctx=8192, threads=2)
    judge.load()
    try:
        messages, _ = judge_messages("terminal", [], "### Turn 1\nls", "a", "a b")
        verdict = run_judge(judge, messages, reference="a b")
    finally:
        judge.unload()
    assert verdict.parsed and verdict.error == "" and not verdict.engine_failed
    assert verdict.judgement is not None
    assert verdict.judgement.total == pytest.approx(3.6)
    assert "final_evaluation" in verdict.answer
    again = Verdict.from_dict(json.loads(json.dumps(verdict.to_dict())))
    assert again == verdict


def test_an_unreadable_judge_is_asked_three_times_then_reported_not_scored() -> None:
    with FaultServer(default=Reply(content=["It looks fine to me, 4 out of 5."])) as server:
        engine = RemoteEngine(server.url, model="world-model")
        engine.load()
        messages, _ = judge_messages("mcp", [], "call", "x", "y")
        verdict = run_judge(engine, messages)
        asked = len(server.chat_requests())
    assert asked == 3 and verdict.attempts == 3
    assert verdict.judgement is None and verdict.official is None and not verdict.engine_failed
    assert verdict.error.startswith("unreadable judgement:")
    assert "4 out of 5" in verdict.answer


def test_an_unreadable_answer_is_asked_again_until_one_can_be_read() -> None:
    good = Reply(content=[f"<final_evaluation>{VERDICT_JSON}</final_evaluation>"])
    with FaultServer(default=good) as server:
        server.queue(Reply(content=["Hmm."]))
        engine = RemoteEngine(server.url, model="world-model")
        engine.load()
        messages, _ = judge_messages("mcp", [], "call", "x", "y")
        verdict = run_judge(engine, messages)
        bodies = [r.body for r in server.chat_requests()]
    assert verdict.attempts == 2 and verdict.official is not None
    assert verdict.official.total == pytest.approx(3.6)
    assert bodies[0] == bodies[1]  # the same request, sampled again


def test_a_remote_judge_is_sampled_as_the_official_evaluator_does_and_failures_retried() -> None:
    good = Reply(
        reasoning=["weighing it"],
        content=[f"<final_evaluation>{VERDICT_JSON}", "</final_evaluation>"],
    )
    quick = JudgeSettings(retry_pause=0)
    with FaultServer(default=good) as server:
        engine = RemoteEngine(server.url, model="world-model")
        engine.load()
        messages, _ = judge_messages("web", [], "click", "page", "page")
        verdict = run_judge(engine, messages, params=JUDGE_PARAMS)
        assert verdict.parsed and verdict.judge == "world-model" and verdict.attempts == 1
        assert server.chat_requests()[-1].body["messages"] == messages
        assert server.chat_requests()[-1].body["temperature"] == 0.6
        assert server.chat_requests()[-1].body["max_tokens"] <= 32768
        server.queue(Reply(status=500, error_message="boom"))
        recovered = run_judge(engine, messages, settings=quick)
        assert recovered.official is not None and recovered.attempts == 2
        server.queue(*[Reply(status=500, error_message="boom")] * 3)
        failed = run_judge(engine, messages, settings=quick)
    assert failed.judgement is None and failed.engine_failed and failed.attempts == 3
    assert failed.error.startswith("the judge failed")


# -- the verdict screens ------------------------------------------------------------------------
async def test_judge_view_shows_scores_and_untrusted_reasons_as_text() -> None:
    from textual.app import App
    from textual.widgets import Static

    from agentworld_tui.ui.screens.judge_view import JudgeView

    hostile = "[bold red]not markup[/] \x1b[31m"
    judgement = Judgement({d: float(v) for d, v in SCORES.items()}, (hostile,), ("slow",))
    verdict = Verdict(judgement, judge="judge-model")

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(JudgeView(verdict))

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        shown = "\n".join(str(s.render()) for s in app.screen.query(Static))
        assert "[bold red]not markup[/]" in shown and "\x1b" not in shown
        table = app.screen.query_one("#scores", Static)
        assert table is not None
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, JudgeView)


async def test_judge_setup_returns_the_reference_and_the_judge() -> None:
    from textual.app import App
    from textual.widgets import Input, RadioButton

    from agentworld_tui.ui.screens.judge_view import JudgeRequest, JudgeSetup

    results: list[JudgeRequest | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(JudgeSetup("real screen", loaded_model="m.gguf"), results.append)

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#server", RadioButton).value = True
        await pilot.press("ctrl+s")  # no URL yet: refused
        await pilot.pause()
        assert results == []
        screen.query_one("#url", Input).value = "http://127.0.0.1:9/v1"
        screen.query_one("#model", Input).value = "judge"
        await pilot.press("ctrl+s")
        await pilot.pause()
    (request,) = results
    assert request is not None and request.reference == "real screen"
    assert request.judge is not None
    assert (request.judge.server, request.judge.model) == ("http://127.0.0.1:9/v1", "judge")


def test_a_judged_turn_shows_its_verdict_in_the_markdown_export() -> None:
    from agentworld_tui.world.export import markdown_transcript

    session, _ = new_session(get_domain("terminal"), Scenario("s", "S", state="$ "))
    for command in ("ls", "pwd"):
        turn = session.begin_turn(session.domain.parse_action(command, session.scenario))
        session.finish_turn(turn, observation="x", reasoning="", status="complete")
    judgement = Judgement({d: float(v) for d, v in SCORES.items()})
    session.turns[0].judgement = Verdict(judgement, judge="judge-9b").to_dict()
    session.turns[1].judgement = Verdict(None, "unreadable judgement: no format score").to_dict()
    text = markdown_transcript([session])
    assert (
        "*Judged by judge-9b: mean 3.60 of 5, score 65.0 (format 4, factuality 3, "
        "consistency 5, realism 4, quality 2).*"
    ) in text
    assert "*Judged: no judgement (unreadable judgement: no format score).*" in text


QUOTING_JUDGE = (
    "Comparing.</think>The model wrote <predicted_observation>a</predicted_observation> "
    f"where the truth is b.\n<final_evaluation>{VERDICT_JSON}</final_evaluation>"
)


def test_a_local_judge_that_quotes_the_answer_tags_is_read_from_its_raw_text(
    scripted_model: Any,
) -> None:
    judge = LlamaEngine(scripted_model(QUOTING_JUDGE, n_ctx_train=8192), n_ctx=8192, threads=2)
    judge.load()
    try:
        messages, _ = judge_messages("terminal", [], "### Turn 1\nls", "a", "b")
        verdict = run_judge(judge, messages, settings=JudgeSettings(attempts=1))
    finally:
        judge.unload()
    assert verdict.official is not None and verdict.judgement is not None
    assert verdict.official.total == pytest.approx(3.6)
