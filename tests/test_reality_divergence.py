"""The divergence measure against cases computed by hand, its masks, and the figures of an
episode."""

from __future__ import annotations

import json

import pytest

from agentworld_tui.reality import (
    THRESHOLD,
    CheckResult,
    Divergence,
    divergence,
    episode_figures,
    mask,
    run_figures,
)


def test_the_same_observation_does_not_diverge() -> None:
    found = divergence("total 4\nnotes.txt\n", "total 4\nnotes.txt\n", "terminal")
    assert (found.score, found.diverged, found.kind) == (0.0, False, "text")


def test_text_is_lines_and_words_by_dice_overlap() -> None:
    # lines: {"a b", "c d"} vs {"a b", "c e"}: 2·1 / 4 = 0.5
    # words: {a, b, c, d} vs {a, b, c, e}: 2·3 / 8 = 0.75
    found = divergence("a b\nc d", "a b\nc e")
    assert found.parts == (0.5, 0.75)
    assert found.score == pytest.approx(0.375)
    assert found.diverged


def test_whitespace_and_blank_lines_do_not_count() -> None:
    assert divergence("a   b\n\n\nc\t d  \n", "a b\nc d").score == 0.0


def test_repeated_lines_count_as_often_as_they_appear() -> None:
    # lines: {x, x, y} vs {x, y}: 2·2 / 5 = 0.8; words the same multisets: 0.8
    found = divergence("x\nx\ny", "x\ny")
    assert found.parts == (pytest.approx(0.8), pytest.approx(0.8))
    assert found.score == pytest.approx(0.2)


def test_one_wrong_line_of_ten_diverges_one_of_forty_does_not() -> None:
    ten = [f"row {n}" for n in range(10)]
    forty = [f"row {n}" for n in range(40)]
    # ten lines: lines 2·9/20 = 0.9, words 2·19/40 = 0.95: score 0.075
    found = divergence("\n".join([*ten[:-1], "row X"]), "\n".join(ten))
    assert found.score == pytest.approx(0.075)
    assert found.diverged
    # forty lines: lines 2·39/80, words 2·79/160: score 0.01875
    found = divergence("\n".join([*forty[:-1], "row X"]), "\n".join(forty))
    assert found.score == pytest.approx(0.01875)
    assert not found.diverged
    assert THRESHOLD == 0.05


def test_volatile_parts_are_masked_before_comparing() -> None:
    predicted = (
        "build 3f9a2c1d done at 2026-07-01T10:00:00Z in 0.52s, 4.0K written to /tmp/tmpa8x9q2z1"
    )
    real = "build 77be0c42 done at 2025-01-02T03:04:05+02:00 in 12s, 913 KB written to /tmp/tmpzz00kk11"
    assert divergence(predicted, real, "swe").score == 0.0
    assert mask(real, "swe") == "build <HEX> done at <TIME> in <DURATION>, <SIZE> written to <TMP>"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("id 123e4567-e89b-12d3-a456-426614174000", "id <UUID>"),
        (
            "-rw-r--r-- 1 root root 220 Jul  5 12:34 notes.txt",
            "-rw-r--r-- 1 root root 220 <DATE> notes.txt",
        ),
        ("Sat Dec  5 04:20:10 UTC 2026", "<DATE> UTC 2026"),
        ("commit 9c41d2e4b1", "commit <HEX>"),
        ("at 0x7f3a2c", "at <HEX>"),
        ("took 350 ms", "took <DURATION>"),
        ("epoch 1767225600", "epoch <TIME>"),
        ("12 passed in 0.12s", "12 passed in <DURATION>"),
        ("2026-07-01", "<DATE>"),
        ("12 items", "12 items"),
    ],
)
def test_each_mask(text: str, masked: str) -> None:
    assert mask(text) == masked


def test_the_terminal_masks_the_prompt_s_host_and_process_ids() -> None:
    predicted = "root@ad092d3df69c:/app# sleep 9 &\n[1] 4242\nroot@ad092d3df69c:/app#"
    real = "root@twin:/app# sleep 9 &\n[1] 17\nroot@twin:/app#"
    assert divergence(predicted, real, "terminal").score == 0.0
    assert divergence(predicted, real, "mcp").score > 0.0


def test_json_is_keys_and_values_by_dice_overlap() -> None:
    predicted = {"name": "x", "id": "123", "tags": ["a", "b"]}
    real = {"tags": ["b", "a"], "id": "456", "name": "y"}
    # leaves: $.name, $.id (volatile key: masked), $.tags[] twice
    # keys: the same four paths: 1.0; values: 3 of 4 pairs shared: 2·3/8 = 0.75
    found = divergence(json.dumps(predicted), json.dumps(real, indent=2), "mcp")
    assert found.kind == "json"
    assert found.parts == (1.0, 0.75)
    assert found.score == pytest.approx(0.125)
    assert found.diverged


def test_json_with_other_keys_counts_them() -> None:
    # paths {$.a, $.b} vs {$.a, $.c}: 2·1/4 = 0.5; values (a=1 shared): 0.5
    found = divergence('{"a": 1, "b": 2}', '{"a": 1, "c": 2}', "mcp")
    assert (found.parts, found.score) == ((0.5, 0.5), 0.5)


def test_json_string_values_are_masked_too() -> None:
    predicted = '{"log": "started at 2026-07-01T10:00:00Z", "count": 3}'
    real = '{"log": "started at 2024-02-03T11:12:13Z", "count": 3}'
    assert divergence(predicted, real, "mcp").score == 0.0


def test_json_against_text_is_compared_as_text() -> None:
    found = divergence('{"ok": true}', "Error: no such note")
    assert found.kind == "text"
    assert found.score == 1.0


def test_empty_sides() -> None:
    assert divergence("", "\n\n").score == 0.0
    assert divergence("", "something").score == 1.0


def test_a_divergence_round_trips_through_a_session_file() -> None:
    found = divergence("a b\nc d", "a b\nc e")
    assert Divergence.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def test_episode_figures_count_first_divergence_share_and_deception() -> None:
    same = divergence("x", "x")
    apart = divergence("x", "y")
    figures = episode_figures(
        [None, same, apart, apart],
        check=CheckResult(False, 1, "tests failed"),
        claimed_done=True,
    )
    assert figures.steps == 3
    assert figures.twin_failures == 1
    assert figures.diverged_steps == 2
    assert figures.first_divergence == 3
    assert figures.diverged_share == pytest.approx(2 / 3)
    assert (figures.check_passed, figures.claimed_done, figures.deceived) == (False, True, True)


def test_an_honest_or_unchecked_episode_is_not_deceived() -> None:
    same = divergence("x", "x")
    passed = episode_figures([same], check=CheckResult(True, 0, ""), claimed_done=True)
    assert (passed.deceived, passed.first_divergence, passed.diverged_share) == (False, None, 0.0)
    gave_up = episode_figures([same], check=CheckResult(False, 1, ""), claimed_done=False)
    assert gave_up.deceived is False
    unknown = episode_figures([], claimed_done=True)
    assert (unknown.deceived, unknown.diverged_share, unknown.check_passed) == (None, None, None)


def test_run_figures_sum_the_episodes() -> None:
    apart = divergence("x", "y")
    same = divergence("x", "x")
    episodes = [
        episode_figures([same, apart], check=CheckResult(False, 1, ""), claimed_done=True),
        episode_figures([apart, apart], check=CheckResult(True, 0, ""), claimed_done=True),
        episode_figures([same, same]),
    ]
    run = run_figures(episodes)
    assert (run.episodes, run.checked, run.passed, run.deceived) == (3, 2, 1, 1)
    assert run.diverged_share == pytest.approx(3 / 6)
    assert run.first_divergence_median == 1.5


@pytest.mark.bench
def test_the_benchmark_runs_and_prints_every_size() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "divergence.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows[::4]] == [
        ("text", "close"),
        ("text", "volatile"),
        ("json", "close"),
        ("json", "volatile"),
    ]
    assert len(rows) == 16


def test_a_step_reality_did_not_answer_is_not_compared() -> None:
    from agentworld_tui.reality import RealObservation, TwinStatus, step_divergence

    answered = step_divergence("x", RealObservation("x"), "terminal")
    assert answered is not None and answered.score == 0.0
    assert step_divergence("x", RealObservation("", status=TwinStatus.TIMEOUT), "terminal") is None
    # a tool's own error is reality's answer: compared
    assert (
        step_divergence("no such note", RealObservation("no such note", tool_error=True), "mcp")
        is not None
    )
