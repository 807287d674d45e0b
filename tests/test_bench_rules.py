"""``agentworld bench`` holds to the official evaluator's rules: a test per rule, each on a
case written here, through the real command with real OpenAI-compatible test servers as
the world model and the judge (tests/faultserver.py)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply

from agentworld_tui.cli import main
from agentworld_tui.evaluation.bench import load_samples
from agentworld_tui.world.trajectories import TrajectoryError, parse_sample

ANSWER = "<predicted_observation>PREDICTED</predicted_observation>"


def record(**fields: Any) -> str:
    base: dict[str, Any] = {
        "task": "terminal",
        "id": "t-1",
        "prompt": ["### Turn 1\nls"],
        "response": ["a b"],
        "current_prompt": "### Turn 1\nls",
        "system_str": "You are a terminal.",
        "turn_idx": 1,
        "total_turns": 1,
    }
    base.update(fields)
    return json.dumps(base)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def world_args(data: Path, out: Path, server: FaultServer, *extra: str) -> list[str]:
    return [
        "bench",
        str(data),
        "--server",
        server.url,
        "--server-model",
        "world-model",
        "--max-tokens",
        "64",
        "--out",
        str(out),
        *extra,
    ]


# -- benchmark lines that are hostile ------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"task": "terminal", "prompt": ' + "[" * 50_000 + "]" * 50_000 + "}",
            "nested too deeply",
        ),
        ('{"task": "terminal", "turn_idx": ' + "7" * 5000 + "}", "a number too long"),
    ],
    ids=["deep-nesting", "huge-number"],
)
def test_deep_nesting_or_a_huge_number_is_an_error_for_that_line(line: str, message: str) -> None:
    with pytest.raises(TrajectoryError, match=message) as caught:
        parse_sample(line, "terminal", "terminal_test.jsonl:3")
    assert str(caught.value).startswith("terminal_test.jsonl:3: ")


def test_a_file_with_hostile_lines_keeps_its_good_ones(tmp_path: Path) -> None:
    data = tmp_path / "terminal_test.jsonl"
    deep = '{"task": "terminal", "prompt": ' + "[" * 50_000 + "]" * 50_000 + "}"
    huge = '{"task": "terminal", "turn_idx": ' + "7" * 5000 + "}"
    action = "### Turn 1\n**Action:**\n```json\n" + "[" * 50_000 + "]" * 50_000 + "\n```"
    data.write_text(
        "\n".join([deep, record(), huge, record(id="t-2", current_prompt=action)]) + "\n"
    )
    found = load_samples(data)
    assert [s.id for s in found.samples] == ["t-1", "t-2"]
    assert found.problems == [
        "terminal_test.jsonl:1: JSON nested too deeply to read",
        "terminal_test.jsonl:3: a number too long to read",
    ]


def test_a_lone_surrogate_in_an_id_does_not_break_a_run_or_its_resumption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # The JSON escape \ud800 reads back as a lone surrogate, which UTF-8 cannot encode.
    (data / "terminal_test.jsonl").write_text(
        record(id="odd-\ud800") + "\n" + record(id="t-2") + "\n"
    )
    out = tmp_path / "run"
    with FaultServer(default=Reply(content=[ANSWER])) as server:
        assert main(world_args(data, out, server)) == 0
        assert main(world_args(data, out, server)) == 0
        asked = len(server.chat_requests())
    assert asked == 2  # each sample once: the second run found both done
    assert "resumed: 2 samples were already predicted" in capsys.readouterr().err
    saved = records(out / "predictions.jsonl")
    assert sorted(r["id"] for r in saved) == ["odd-\ud800", "t-2"]


# -- the whole path, world model and judge on real test servers -------------------------------
SCORES = {"format": 4, "factuality": 4, "consistency": 4, "realism": 4, "quality": 4}


def verdict_reply(scores: dict[str, object] = SCORES) -> Reply:
    body = json.dumps({"strengths": [], "weaknesses": [], "scores": scores})
    return Reply(content=[f"Weighing it.</think><final_evaluation>{body}</final_evaluation>"])


def judge_args(server: FaultServer, *extra: str) -> list[str]:
    return ["--judge-server", server.url, "--judge-model", "world-model", *extra]


def one_file(tmp_path: Path, *lines: str, domain: str = "terminal") -> Path:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / f"{domain}_test.jsonl").write_text("".join(line + "\n" for line in lines))
    return data


def user_message(request: Any) -> str:
    return str(request.body["messages"][-1]["content"])


def test_an_empty_generation_is_not_judged_and_counts_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = one_file(tmp_path, record(id="a"), record(id="b"))
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        world.queue(Reply(content=[""]))  # the first sample: nothing generated at all
        code = main([*world_args(data, tmp_path / "run", world), *judge_args(judge), "--json"])
        judged = judge.chat_requests()
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(judged) == 1  # only the sample that has a generation
    assert "not judged (empty generation) 1" in captured.err
    (scores,) = json.loads(captured.out)
    terminal = scores["domains"]["terminal"]
    assert (terminal["valid"], terminal["failed_empty_generation"]) == (1, 1)
    assert terminal["score"]["total"] == 75.0  # not pulled down by a score of 1
    # The judge settings line counts the one judged, not the one never judged.
    assert list(scores["judged_with"].values()) == [1]


def test_thinking_on_without_a_closing_tag_the_whole_text_is_judged(tmp_path: Path) -> None:
    data = one_file(tmp_path, record())
    with (
        FaultServer(default=Reply(content=["total 8\nroot@box:/app# "])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        assert main([*world_args(data, tmp_path / "run", world), *judge_args(judge)]) == 0
        (request,) = judge.chat_requests()
    assert "**World Model Output (Simulated):**\n```\ntotal 8\nroot@box:/app#\n```" in (
        user_message(request)
    )
    (saved,) = records(tmp_path / "run" / "predictions.jsonl")
    assert saved["status"] == "no_answer"  # the app's own reading found no answer
    assert saved["raw"].startswith("total 8\nroot@box:/app#")


def test_the_marker_goes_from_prediction_and_reference_and_tags_match_in_any_case(
    tmp_path: Path,
) -> None:
    data = one_file(tmp_path, record(response=["**Environment Observation:**\nreal screen"]))
    answer = (
        "plan</think><PREDICTED_OBSERVATION>**Environment Observation:**\nmy screen"
        "</Predicted_Observation>"
    )
    with (
        FaultServer(default=Reply(content=[answer])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        assert main([*world_args(data, tmp_path / "run", world), *judge_args(judge)]) == 0
        (request,) = judge.chat_requests()
    text = user_message(request)
    assert "**World Model Output (Simulated):**\n```\nmy screen\n```" in text
    assert "**Ground Truth (Real Output):**\n```\nreal screen\n```" in text
    assert "Environment Observation" not in text and "PREDICTED" not in text


def test_an_empty_system_str_sends_no_system_message_and_empty_history_turns_stay(
    tmp_path: Path,
) -> None:
    turns = ["### Turn 1\nsleep 2", "### Turn 2\nls"]
    data = one_file(
        tmp_path,
        record(
            system_str="",
            prompt=turns,
            response=["", "a b"],
            current_prompt=turns[1],
            turn_idx=2,
            total_turns=2,
        ),
    )
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        assert main([*world_args(data, tmp_path / "run", world), *judge_args(judge)]) == 0
        (sent,) = world.chat_requests()
        (judged,) = judge.chat_requests()
    assert sent.body["messages"] == [
        {"role": "user", "content": turns[0]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": turns[1]},
    ]
    assert user_message(judged).startswith(
        "# Context (Historical Interactions):\n\n### Turn 1\nsleep 2\n\n\n\n\n# Current Turn:"
    )


def test_the_overall_is_the_mean_over_samples_not_over_domains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "terminal_test.jsonl").write_text("".join(record(id=f"t{i}") + "\n" for i in range(4)))
    call = "### Turn 1\n**Action:**\n```json\n{}\n```"
    (data / "mcp_test.jsonl").write_text(
        record(task="mcp", id="m", prompt=[call], current_prompt=call) + "\n"
    )
    low = dict.fromkeys(SCORES, 1)
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply(dict.fromkeys(SCORES, 5))) as judge,
    ):
        judge.queue(verdict_reply(low))  # mcp's file is read first
        args = [*world_args(data, tmp_path / "run", world), *judge_args(judge)]
        assert main([*args, "--judge-concurrency", "1"]) == 0
    table = capsys.readouterr().out
    overall = next(x for x in table.splitlines() if x.startswith("Overall")).split()
    # (4 x 5 + 1) / 5 = 4.2 -> 80.00; the mean of the domains would be (100 + 0) / 2 = 50.
    assert overall[6] == "80.00" and overall[-1] == "50.00"


def test_the_progress_bar_and_the_summary_count_the_same_things_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = one_file(tmp_path, record(id="a"), record(id="b"), record(id="c"))
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        judge.queue(Reply(content=["no idea"]), Reply(status=500, error_message="down"))
        args = [*world_args(data, tmp_path / "run", world), *judge_args(judge)]
        code = main([*args, "--judge-concurrency", "1", "--judge-attempts", "1"])
    err = capsys.readouterr().err
    assert code == 1  # a judge request failed: run again to judge it
    bar = [x for x in err.splitlines() if x.startswith("judge   [")][-1]
    assert bar.endswith("unreadable 1, judge failed 1")
    assert "judged 1, unreadable 1, judge failed 1" in err
    assert " failed" not in bar.replace("judge failed", "")


def test_judging_with_a_prompts_folder_says_so_and_judges_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "release" / "prompts" / "terminal"
    folder.mkdir(parents=True)
    (folder / "judge_system_prompt.txt").write_text("You judge terminal simulations.")
    data = one_file(tmp_path, record())
    out = tmp_path / "run"
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        assert main([*world_args(data, out, world), *judge_args(judge)]) == 0
        release = ["--judge-prompts", str(tmp_path / "release")]
        assert main(["bench", "judge", str(out), *judge_args(judge, *release)]) == 0
        first, second = judge.chat_requests()
        assert main(["bench", "judge", str(out), *judge_args(judge, *release)]) == 0
        assert len(judge.chat_requests()) == 2  # the same settings: nothing judged again
    assert first.body["messages"][0]["content"].startswith("You judge a world model")
    assert second.body["messages"][0] == {
        "role": "system",
        "content": "You judge terminal simulations.",
    }
    table = capsys.readouterr().out.split("Run: ")[-1]
    assert f"prompts: {tmp_path / 'release'} (user template: the project's" in table
    assert "temperature 0.6, max_tokens 32768, up to 3 attempts (1 samples)" in table


def test_a_verdict_recorded_by_an_earlier_version_is_read_again_by_the_official_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "old"
    run.mkdir()
    (run / "run.json").write_text(
        json.dumps({"format": "agentworld-bench", "version": 1, "data": "/d", "model": "m"})
    )
    (run / "predictions.jsonl").write_text(
        json.dumps(
            {
                "key": "k",
                "domain": "web",
                "status": "complete",
                "prediction": "p",
                "prediction_sha": "s",
            }
        )
        + "\n"
    )
    scores = '{"scores": {"format": 4.6, "factuality": 4, "consistency": 4, "realism": 4}}'
    (run / "judgements.jsonl").write_text(
        json.dumps(
            {
                "key": "k",
                "prediction_sha": "s",
                "judgement": None,
                "error": "unreadable judgement: no quality score",
                "answer": f"<final_evaluation>{scores}</final_evaluation>",
            }
        )
        + "\n"
    )
    assert main(["bench", "score", str(run), "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    web = found["domains"]["web"]
    # 4.6 -> 5, quality absent: (5 + 4 + 4 + 4) / 4 = 4.25 -> 81.25.
    assert (web["valid"], web["score"]["total"], web["strict"]["judged"]) == (1, 81.25, 0)
    assert found["judged_with"] == {"judge settings not recorded (judged by an earlier version)": 1}


# -- a verdict that cannot be read is unreadable, whatever it holds ------------------------------
HUGE = "1" + "0" * 400


def test_an_absurd_score_is_read_and_a_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = one_file(tmp_path, record(id="a"), record(id="b"))
    huge = (
        '<final_evaluation>{"scores": {"format": ' + HUGE + ', "factuality": 4, '
        '"consistency": 4, "realism": 4, "quality": 4}}</final_evaluation>'
    )
    negative = huge.replace(HUGE, "-" + HUGE)
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=Reply(content=[negative])) as judge,
    ):
        judge.queue(Reply(content=[huge]))
        args = [*world_args(data, tmp_path / "run", world), *judge_args(judge), "--json"]
        code = main([*args, "--judge-concurrency", "1"])
        asked = len(judge.chat_requests())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    # The first is read as the official rules read it (above 5 is 5); the second cannot be
    # averaged: unreadable, asked three times in all, then recorded as such.
    assert asked == 1 + 3
    assert "judged 1, unreadable 1, judge failed 0" in captured.err
    (scores,) = json.loads(captured.out)
    terminal = scores["domains"]["terminal"]
    assert (terminal["valid"], terminal["failed_unreadable"]) == (1, 1)
    assert terminal["score"]["format"] == 100.0
    assert terminal["score"]["total"] == 80.0  # (5 + 4 * 4) / 5 = 4.2
    assert terminal["strict"]["judged"] == 0  # outside 1-5 for the project's reading
    # The run is scored again from its files without trouble.
    assert main(["bench", "score", str(tmp_path / "run")]) == 0


# -- where the official evaluator's arithmetic and messages decide --------------------------------
def test_a_reasoning_parser_that_leaves_content_empty_fails_the_sample_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = one_file(tmp_path, record(id="a"), record(id="b"))
    with (
        FaultServer(default=Reply(reasoning=["still thinking"], content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        # The first sample never left its reasoning: the server's content field is empty.
        world.queue(Reply(reasoning=["thinking and thinking"], content=[], finish_reason="length"))
        code = main([*world_args(data, tmp_path / "run", world), *judge_args(judge), "--json"])
        judged = judge.chat_requests()
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(judged) == 1
    assert "not judged (empty generation) 1" in captured.err
    (scores,) = json.loads(captured.out)
    terminal = scores["domains"]["terminal"]
    assert (terminal["valid"], terminal["failed_empty_generation"]) == (1, 1)
    # The judged one was judged on the content alone, never on the reasoning.
    assert "still thinking" not in user_message(judged[0])
    assert "**World Model Output (Simulated):**\n```\nPREDICTED\n```" in user_message(judged[0])


def test_the_world_model_is_sent_the_prompt_list_turn_and_the_judge_the_current_prompt(
    tmp_path: Path,
) -> None:
    turns = ["### Turn 1\nls", "### Turn 2\ncat a"]
    data = one_file(
        tmp_path,
        record(
            prompt=turns,
            response=["a", "x"],
            current_prompt="### Turn 2\ncat a  # as the file's current_prompt says",
            turn_idx=2,
            total_turns=2,
        ),
    )
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        assert main([*world_args(data, tmp_path / "run", world), *judge_args(judge)]) == 0
        (sent,) = world.chat_requests()
        (judged,) = judge.chat_requests()
    assert sent.body["messages"][-1] == {"role": "user", "content": turns[1]}
    assert "# Current Turn:\n\n### Turn 2\ncat a  # as the file's current_prompt says" in (
        user_message(judged)
    )


def test_a_domain_mean_is_computed_as_statistics_mean_computes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Eight verdicts whose mean total prints 49.37 by sum / len but 49.38 by
    # statistics.mean, which the official evaluator uses.
    verdicts = [
        [2, 1, 2, 4, 5],
        [4, 5, 2, 5, 4],
        [2, 5, 1, 4, 5],
        [3, 4, 1, 3, 2],
        [2, 1, 3, 1, 1],
        [3, 3, 2, 4, 5],
        [3, 2, 1, 5, 1],
        [5, 2, 5, 4, 2],
    ]
    totals = [sum(v) / len(v) for v in verdicts]
    assert f"{(sum(totals) / len(totals) - 1) / 4 * 100:.2f}" == "49.37"
    assert f"{(statistics.mean(totals) - 1) / 4 * 100:.2f}" == "49.38"
    data = one_file(tmp_path, *(record(id=f"t{i}") for i in range(len(verdicts))))
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer() as judge,
    ):
        judge.queue(*(verdict_reply(dict(zip(SCORES, v, strict=True))) for v in verdicts))
        args = [
            *world_args(data, tmp_path / "run", world, "--concurrency", "1"),
            *judge_args(judge),
        ]
        assert main([*args, "--judge-concurrency", "1"]) == 0
    table = capsys.readouterr().out
    row = next(x for x in table.splitlines() if x.startswith("terminal")).split()
    assert row[6] == "49.38"


def test_a_prompts_folder_without_a_user_template_says_the_projects_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "release" / "terminal"
    folder.mkdir(parents=True)
    (folder / "judge_system_prompt.txt").write_text("You judge terminal simulations.")
    data = one_file(tmp_path, record())
    with (
        FaultServer(default=Reply(content=[ANSWER])) as world,
        FaultServer(default=verdict_reply()) as judge,
    ):
        release = ["--judge-prompts", str(tmp_path / "release")]
        assert main([*world_args(data, tmp_path / "run", world), *judge_args(judge, *release)]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [x for x in err if "no judge user template" in x]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"agentworld: bench: {tmp_path / 'release'}: ")
    assert "the project's template is used" in warnings[0]
