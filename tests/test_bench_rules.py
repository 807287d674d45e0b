"""``agentworld bench`` holds to the official evaluator's rules: a test per rule, each on a
case written here, through the real command with real OpenAI-compatible test servers as
the world model and the judge (tests/faultserver.py)."""

from __future__ import annotations

import json
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
