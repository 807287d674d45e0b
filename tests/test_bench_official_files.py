"""The official evaluator's files: ``predictions.jsonl`` and ``judged.jsonl`` are scored
as its score step scores them, judged here, compared with a run of this program's, and
written from a run, through the real command (judges are real test servers on 127.0.0.1).

The files here are written by hand in the layout the official evaluator writes: each
benchmark line's object with ``gen`` added, then the judge's outcome (docs/judging.md)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply

from agentworld_tui.cli import main

ANSWER = "<predicted_observation>PREDICTED</predicted_observation>"
DIMS = ("format", "factuality", "consistency", "realism", "quality")


def line(task: str, sid: str, turns: list[str], responses: list[str], idx: int) -> dict[str, Any]:
    return {
        "task": task,
        "id": sid,
        "prompt": turns,
        "response": responses,
        "current_prompt": turns[idx - 1],
        "system_str": f"You simulate {task}.",
        "turn_idx": idx,
        "total_turns": len(turns),
        "extra": {"kept": True},  # a field the official evaluator carries along untouched
    }


BENCH = {
    "mcp_test.jsonl": [line("mcp", "m-1", ["### Turn 1\ncall"], ['{"ok": 1}'], 1)],
    "terminal_test.jsonl": [
        line("terminal", "t-1", ["### Turn 1\nls", "### Turn 2\ncat a"], ["a b", "x"], 1),
        line("terminal", "t-1", ["### Turn 1\nls", "### Turn 2\ncat a"], ["a b", "x"], 2),
        line("terminal", "t-2", ["### Turn 1\nwhoami"], ["root"], 1),
    ],
}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    data = tmp_path / "AgentWorldBench"
    data.mkdir()
    for name, lines in BENCH.items():
        (data / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return data


def jobs() -> list[dict[str, Any]]:
    """The benchmark's lines in the order the official evaluator reads them."""
    return [dict(x) for name in sorted(BENCH) for x in BENCH[name]]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def judged_ok(job: dict[str, Any], scores: list[int], gen: str = ANSWER) -> dict[str, Any]:
    present = [v for v in scores if v > 0]
    return {
        **job,
        "gen": gen,
        "total_score": sum(present) / len(present),
        **dict(zip(DIMS, scores, strict=True)),
        "failed": 0.0,
        "strengths": [],
        "weaknesses": [],
        "extracted_output": "PREDICTED",
        "judge_raw_output": "<final_evaluation>{}</final_evaluation>",
    }


def verdict(scores: list[int]) -> Reply:
    body = json.dumps(
        {"strengths": ["s"], "weaknesses": ["w"], "scores": dict(zip(DIMS, scores, strict=True))}
    )
    return Reply(content=[f"Weighing.</think><final_evaluation>{body}</final_evaluation>"])


def table_rows(text: str) -> dict[str, list[str]]:
    return {r.split()[0]: r.split()[1:] for r in text.splitlines() if r.split()}


def normalised(values: list[float]) -> str:
    return f"{(statistics.mean(values) - 1) / 4 * 100:.2f}"


# -- scoring the official evaluator's files --------------------------------------------------------
def test_an_official_judged_file_is_scored_as_its_score_step_scores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp, t1, t2, t3 = jobs()
    judged = write_jsonl(
        tmp_path / "results" / "judged.jsonl",
        [
            judged_ok({**mcp, "task": "bench/mcp"}, [2, 2, 2, 2, 2]),
            judged_ok(t1, [5, 4, 3, 0, 1]),  # realism absent: left out, not a zero
            judged_ok(t2, [4, 4, 4, 4, 4]),
            {
                **t3,
                "gen": ANSWER,
                "total_score": 0,
                "failed": 1.0,
                "error_message": "Judge scoring failed",
                "extracted_output": "PREDICTED",
            },
            {**t3, "id": "t-3", "gen": "", "failed": 1.0, "error_message": "No model generation"},
        ],
    )
    with judged.open("a") as handle:
        handle.write("not json\n")
        handle.write(json.dumps(judged_ok({**t2, "id": "odd"}, [3, 3, 3, 3, 3]) | {"format": "x"}))
        handle.write("\n")
    assert main(["bench", "score", str(judged)]) == 0
    captured = capsys.readouterr()
    rows = table_rows(captured.out)
    totals = [(5 + 4 + 3 + 1) / 4, 4.0]
    assert rows["terminal"] == [
        normalised([5, 4]),
        normalised([4, 4]),
        normalised([3, 4]),
        normalised([4]),  # realism: only the sample that has it
        normalised([1, 4]),
        normalised(totals),
        "2",
        "3",  # the judge that failed, the empty generation, the record with a bad score
        "0",
        "-",  # the stricter reading finds nothing in the stored answers
    ]
    assert rows["mcp"][:7] == ["25.00"] * 6 + ["1"]
    assert rows["Overall"][5] == normalised([2.0, *totals])
    assert "Judged with the official evaluator's file" in captured.out
    err = captured.err.splitlines()
    assert any("judged.jsonl:6: not a JSON object; skipped" in x for x in err)
    assert any("judged.jsonl:7: format is not a number; counted as failed" in x for x in err)
    assert "Traceback" not in captured.err

    # The folder that holds it is read the same way, as JSON too.
    assert main(["bench", "score", str(tmp_path / "results"), "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    terminal = found["domains"]["terminal"]
    assert (terminal["failed_empty_generation"], terminal["failed_unreadable"]) == (1, 2)
    assert terminal["score"]["total"] == float(normalised(totals))


def test_an_official_predictions_file_is_scored_as_awaiting_its_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [{**job, "gen": ANSWER} for job in jobs()]
    records[0]["gen"] = ""  # a request that failed there, or a reasoning that never ended
    predictions = write_jsonl(tmp_path / "results" / "predictions.jsonl", records)
    assert main(["bench", "score", str(predictions)]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows["mcp"][-4:] == ["0", "1", "0", "-"]
    assert rows["terminal"][-4:] == ["0", "0", "3", "-"]


# -- judging it here, and writing the official evaluator's files ----------------------------------
def test_an_official_predictions_file_is_judged_here_resumed_and_written_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [{**job, "gen": f"thinking</think>{ANSWER}"} for job in jobs()]
    records[2]["gen"] = ""  # terminal t-1 turn 2: not judged, failed
    records[1]["current_prompt"] = "### Turn 1\nls  # the judge is shown this"
    predictions = write_jsonl(tmp_path / "results" / "predictions.jsonl", records)
    run = tmp_path / "judged-here"
    judge_flags = ["--judge-server", "", "--judge-model", "world-model", "--judge-concurrency", "1"]
    with FaultServer() as judge:
        judge_flags[1] = judge.url
        judge.queue(verdict([2, 2, 2, 2, 2]), verdict([5, 4, 3, 2, 1]), Reply(content=["?"] * 1))
        judge.queue(Reply(content=["?"]), Reply(content=["?"]))  # t-2: never readable
        args = ["bench", "judge", str(predictions), "--out", str(run), *judge_flags]
        assert main([*args, "--json"]) == 0
        asked = judge.chat_requests()
        assert main(args) == 0  # again: every sample already judged, nothing asked
        assert len(judge.chat_requests()) == len(asked) == 5
    captured = capsys.readouterr()
    assert "4 generations of the official evaluator (4 new)" in captured.err
    assert "judged 2, unreadable 1, judge failed 0; not judged (empty generation) 1" in (
        captured.err
    )
    assert f"agentworld bench export {run} DEST_DIR" in captured.err
    first = asked[1].body["messages"][-1]["content"]
    assert "# Current Turn:\n\n### Turn 1\nls  # the judge is shown this" in first
    assert "**World Model Output (Simulated):**\n```\nPREDICTED\n```" in first

    dest = tmp_path / "official"
    assert main(["bench", "export", str(run), str(dest)]) == 0
    assert "predictions 4, judged 4" in capsys.readouterr().err
    # predictions.jsonl: the benchmark's lines as they were (unknown fields kept), with gen.
    assert read_jsonl(dest / "predictions.jsonl") == records
    mcp, t1, t2, t3 = read_jsonl(dest / "judged.jsonl")
    assert (mcp["failed"], mcp["total_score"], mcp["format"]) == (0.0, 2.0, 2)
    assert mcp["extracted_output"] == "PREDICTED" and "final_evaluation" in mcp["judge_raw_output"]
    assert (t1["total_score"], [t1[d] for d in DIMS], t1["strengths"]) == (
        3.0,
        [5, 4, 3, 2, 1],
        ["s"],
    )
    assert (t2["failed"], t2["error_message"]) == (1.0, "No model generation")
    assert (t3["failed"], t3["total_score"], t3["error_message"]) == (
        1.0,
        0,
        "Judge scoring failed",
    )
    assert t3["extracted_output"] == "PREDICTED" and t3["extra"] == {"kept": True}

    # The written file scores as the run it came from.
    assert main(["bench", "score", str(run)]) == 0
    here = table_rows(capsys.readouterr().out)
    assert main(["bench", "score", str(dest / "judged.jsonl")]) == 0
    there = table_rows(capsys.readouterr().out)
    for name in ("mcp", "terminal", "Overall"):
        assert here[name][:9] == there[name][:9]


def test_a_run_made_here_and_an_official_file_are_compared_sample_by_sample(
    bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    with (
        FaultServer(default=Reply(reasoning=["hm"], content=[ANSWER])) as world,
        FaultServer(default=verdict([4, 4, 4, 4, 4])) as judge,
    ):
        world.queue(Reply(reasoning=["never ends"], content=[]))  # mcp: nothing in content
        code = main(
            [
                "bench",
                str(bench),
                "--server",
                world.url,
                "--server-model",
                "world-model",
                "--concurrency",
                "1",
                "--out",
                str(run),
                "--judge-server",
                judge.url,
                "--judge-model",
                "world-model",
            ]
        )
    assert code == 0, capsys.readouterr().err
    # The official run over the same benchmark, its lines in another order.
    mcp, t1, _t2, t3 = jobs()
    official = write_jsonl(
        tmp_path / "results" / "judged.jsonl",
        [judged_ok(t3, [2, 2, 2, 2, 2]), judged_ok(t1, [3, 3, 3, 3, 3]), judged_ok(mcp, [5] * 5)],
    )
    capsys.readouterr()
    assert main(["bench", "score", str(run), str(official)]) == 0
    text = capsys.readouterr().out
    assert "Compared on the 2 samples valid in both runs (A has 1 more, B 1 more; matched by" in (
        text
    )
    rows = table_rows(text)
    assert rows["terminal"] == ["75.00", "37.50", "-37.50", "2"]  # t-2 and t-1 turn 1

    # The run written as the official evaluator's files: the empty content is its gen.
    assert main(["bench", "export", str(run), str(tmp_path / "out")]) == 0
    (first, *_rest) = read_jsonl(tmp_path / "out" / "judged.jsonl")
    assert (first["id"], first["gen"], first["error_message"]) == ("m-1", "", "No model generation")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "score", "{tmp}/note.txt"], "neither a bench run's folder nor the official"),
        (["bench", "score", "{bench}/terminal_test.jsonl"], "neither a bench run's folder"),
        (["bench", "export", "{tmp}"], "usage: agentworld bench export OUT_DIR DEST_DIR"),
        (["bench", "export", "{tmp}", "{tmp}/x"], "no bench run here"),
    ],
)
def test_what_is_not_a_run_is_said_in_one_line(
    argv: list[str],
    message: str,
    bench: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "note.txt").write_text("hello\n")
    assert main([a.format(tmp=tmp_path, bench=bench) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)
