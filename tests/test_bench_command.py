"""``agentworld bench``: a small benchmark folder in AgentWorldBench's layout, run with a
scripted world model and a scripted judge, resumed after a kill, scored by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Reply
from ggufgen import CHATML_THINK_TEMPLATE

from agentworld_tui.cli import main
from agentworld_tui.domains import get_domain
from agentworld_tui.evaluation.results import ResultLog
from agentworld_tui.world.trajectories import Sample, parse_sample

WORLD_SCRIPT = "recalling the box</think><predicted_observation>PREDICTED</predicted_observation>"
SCORES = {"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 2}
JUDGE_SCRIPT = (
    "Comparing the two screens.</think><final_evaluation>"
    + json.dumps({"strengths": ["prompt kept"], "weaknesses": ["output differs"], "scores": SCORES})
    + "</final_evaluation>"
)
ANSWER = "<predicted_observation>PREDICTED</predicted_observation>"


def turn(domain: str, number: int, action: str) -> str:
    d = get_domain(domain)
    return d.render_turn(number, d.parse_action(action, _scenario()), None)


def _scenario() -> Any:
    from agentworld_tui.world.domain import Scenario

    return Scenario("t", "T")


def line(
    task: str, sid: str, system: str, prompts: list[str], responses: list[str], idx: int
) -> str:
    record = {
        "task": task,
        "id": sid,
        "prompt": prompts,
        "response": responses,
        "current_prompt": prompts[idx - 1],
        "system_str": system,
        "turn_idx": idx,
        "total_turns": len(prompts),
    }
    return json.dumps(record) + "\n"


@pytest.fixture
def bench_data(tmp_path: Path) -> Path:
    """Five samples: terminal (a two-turn trajectory scored at both turns, and a one-turn
    one), mcp (two one-turn trajectories), and a search file that --domains leaves out."""
    data = tmp_path / "AgentWorldBench"
    data.mkdir()
    ta = [turn("terminal", 1, "ls"), turn("terminal", 2, "cat notes.txt")]
    ra = ["notes.txt  src\nroot@box:/app# ", "buy milk\nroot@box:/app# "]
    tb = [turn("terminal", 1, "whoami")]
    (data / "terminal_test.jsonl").write_text(
        line("terminal", "t-a", "You are terminal A.", ta, ra, 1)
        + line("terminal", "t-a", "You are terminal A.", ta, ra, 2)
        + "\n"
        + line("terminal", "t-b", "You are terminal B.", tb, ["root\nroot@box:/app# "], 1)
    )
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    (data / "mcp_test.jsonl").write_text(
        line("mcp", "m-1", "Tools: get_weather.", [turn("mcp", 1, call)], ['{"temp": 11}'], 1)
        + line("mcp", "m-2", "Tools: get_time.", [turn("mcp", 1, call)], ['{"error": "x"}'], 1)
    )
    search_call = '{"name": "web_search", "arguments": {"query": ["x"]}}'
    (data / "search_test.jsonl").write_text(
        line("search", "s-1", "Search.", [turn("search", 1, search_call)], ["1. x"], 1)
    )
    return data


def samples_of(data: Path, *files: str) -> list[Sample]:
    out = []
    for name in files:
        for number, text in enumerate((data / name).read_text().splitlines(), 1):
            if text.strip():
                out.append(parse_sample(text, "", f"{name}:{number}"))
    return out


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def count_prompt_tokens(model: Path, messages: list[dict[str, str]]) -> int:
    """Counted apart from the app: jinja2 renders the template, llama.cpp's tokenizer counts."""
    import jinja2
    import llama_cpp

    text = jinja2.Template(CHATML_THINK_TEMPLATE).render(
        messages=messages, add_generation_prompt=True
    )
    vocab = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    try:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    finally:
        vocab.close()


# -- the whole path on local scripted models ----------------------------------------------------
def test_local_world_model_and_local_judge_then_the_scores(
    bench_data: Path, tmp_path: Path, scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    world = scripted_model(WORLD_SCRIPT)
    judge = scripted_model(JUDGE_SCRIPT, n_ctx_train=8192)
    out = tmp_path / "run"
    args = [
        "bench",
        str(bench_data),
        "--domains",
        "terminal",
        "--model",
        str(world),
        "--ctx",
        "2048",
        "--max-tokens",
        "64",
        "--threads",
        "2",
        "--out",
        str(out),
        "--judge-model-path",
        str(judge),
        "--judge-ctx",
        "8192",
        "--judge-max-tokens",
        "256",
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "judged 3, unreadable 0, judge failed 0" in captured.err
    assert "temperature 0.6, max_tokens 256, up to 3 attempts" in captured.err
    assert "predict [########################] 3/3 100%" in captured.err

    samples = {s.source: s for s in samples_of(bench_data, "terminal_test.jsonl")}
    predicted = records(out / "predictions.jsonl")
    assert sorted(r["key"] for r in predicted) == sorted(samples)
    for record in predicted:
        assert (record["status"], record["prediction"]) == ("complete", "PREDICTED")
        # Each sample was sent its own system prompt and the history its lists give.
        expected = samples[record["key"]].conversation()
        assert record["stats"]["prompt_tokens"] == count_prompt_tokens(world, expected)
    history_turn = samples["terminal_test.jsonl:2"].conversation()
    assert [m["role"] for m in history_turn] == ["system", "user", "assistant", "user"]

    verdicts = records(out / "judgements.jsonl")
    assert len(verdicts) == 3
    assert all(v["judgement"]["total"] == pytest.approx(3.6) for v in verdicts)
    # The table: every dimension normalised, total (3.6 - 1) / 4 * 100 = 65.00, two decimals.
    table = captured.out
    assert "terminal" in table and "mcp" not in table and "search" not in table
    overall = next(x for x in table.splitlines() if x.startswith("Overall"))
    scores, counts = overall.split()[1:7], overall.split()[7:]
    assert scores == ["75.00", "50.00", "100.00", "75.00", "25.00", "65.00"]
    assert counts == ["3", "0", "0", "65.00"]  # valid, failed, pending, strict
    assert (
        "Judged with judge scripted-2.gguf, prompts: the project's judge prompts; "
        "temperature 0.6, max_tokens 256, up to 3 attempts (3 samples)"
    ) in table

    # The same command again finds everything done and redoes nothing.
    assert main(args) == 0
    again = capsys.readouterr()
    assert "resumed: 3 samples were already predicted" in again.err
    assert "judged 0," in again.err
    assert len(records(out / "predictions.jsonl")) == 3
    assert len(records(out / "judgements.jsonl")) == 3


# -- a killed run resumes ---------------------------------------------------------------------------
def wait_until(condition: Any, proc: subprocess.Popen[bytes], limit: float = 120.0) -> None:
    """Poll ``condition`` (bounded); fail early if the process ends first."""
    deadline = time.monotonic() + limit
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(
                f"bench ended early: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.05)


def test_a_killed_run_resumes_without_redoing_finished_samples(
    bench_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    predictions = out / "predictions.jsonl"
    with FaultServer(default=Reply(content=[ANSWER])) as server:
        # Two answers, then a request that never ends: the run is stuck on its third sample.
        server.queue(Reply(content=[ANSWER]), Reply(content=[ANSWER]), Reply(hang=True))
        args = [
            "bench",
            str(bench_data),
            "--domains",
            "terminal",
            "mcp",
            "--server",
            server.url,
            "--server-model",
            "world-model",
            "--max-tokens",
            "64",
            "--out",
            str(out),
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", *args, "--concurrency", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        try:
            wait_until(lambda: len(server.chat_requests()) >= 3, proc)
            wait_until(lambda: predictions.exists() and len(records(predictions)) == 2, proc)
        finally:
            proc.kill()
            proc.wait(timeout=30)
        assert proc.returncode != 0
        finished = {r["key"] for r in records(predictions)}
        asked = len(server.chat_requests())

        assert main([*args, "--concurrency", "3"]) == 0
        resumed = server.chat_requests()[asked:]
    assert "resumed: 2 samples were already predicted" in capsys.readouterr().err

    samples = samples_of(bench_data, "mcp_test.jsonl", "terminal_test.jsonl")
    remaining = [s for s in samples if s.source not in finished]
    assert len(remaining) == 3 and len(resumed) == 3
    sent = sorted(json.dumps(r.body["messages"]) for r in resumed)
    assert sent == sorted(json.dumps(s.conversation()) for s in remaining)
    final = records(predictions)
    assert sorted(r["key"] for r in final) == sorted(s.source for s in samples)  # each once


# -- concurrency, a remote judge, an unreadable verdict -------------------------------------------
class MeetingServer(FaultServer):
    """Holds the first two chat requests until both have arrived: a run that sends one
    request at a time never gets past the first (the wait is bounded)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.barrier = threading.Barrier(2, timeout=60)
        self.met = 0
        self.lock = threading.Lock()

    def next_reply(self) -> Reply:
        with self.lock:
            self.met += 1
            first_two = self.met <= 2
        if first_two:
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                return Reply(status=500, error_message="requests came one at a time")
        return super().next_reply()


def verdict(scores: dict[str, int]) -> Reply:
    body = json.dumps({"strengths": [], "weaknesses": [], "scores": scores})
    return Reply(reasoning=["judging"], content=[f"<final_evaluation>{body}</final_evaluation>"])


def test_concurrent_server_requests_remote_judge_and_unreadable_verdicts(
    bench_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    unsure = Reply(content=["I cannot decide."])
    with MeetingServer(default=Reply(content=[ANSWER])) as world, FaultServer() as judge:
        # The judge answers in sample order (one request at a time): mcp:1, mcp:2 (asked
        # three times, never readable), terminal:1, terminal:2, terminal:4.
        judge.queue(
            verdict({"format": 2, "factuality": 2, "consistency": 2, "realism": 2, "quality": 2}),
            unsure,
            unsure,
            unsure,
            verdict({"format": 5, "factuality": 4, "consistency": 3, "realism": 2, "quality": 1}),
            verdict(
                {"format": 3.6, "factuality": 4, "consistency": 4.4, "realism": 4, "quality": "4/5"}
            ),
            Reply(content=['<final_evaluation>{"scores": {"format": 9}}</final_evaluation>']),
        )
        code = main(
            [
                "bench",
                str(bench_data),
                "--domains",
                "terminal,mcp",
                "--server",
                world.url,
                "--server-model",
                "world-model",
                "--concurrency",
                "3",
                "--out",
                str(out),
                "--judge-server",
                judge.url,
                "--judge-model",
                "world-model",
                "--judge-concurrency",
                "1",
                "--json",
            ]
        )
        assert world.barrier.broken is False
        assert len(world.chat_requests()) == 5
        assert len(judge.chat_requests()) == 7
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "judged 4, unreadable 1, judge failed 0" in captured.err
    (scores,) = json.loads(captured.out)
    mcp, terminal = scores["domains"]["mcp"], scores["domains"]["terminal"]
    # An unreadable verdict is a failed sample, left out, never counted as zero.
    assert (mcp["valid"], mcp["failed"], mcp["failed_unreadable"]) == (1, 1, 1)
    assert mcp["score"]["total"] == 25.0
    # terminal: totals 3, 4 (3.6 -> 4, 4.4 -> 4, "4/5" -> 4) and 5 (format 9 -> 5, the
    # four missing dimensions absent) -> mean 4 -> 75.
    assert terminal["valid"] == 3
    assert terminal["mean"]["total"] == pytest.approx(4.0)
    assert terminal["score"]["total"] == 75.0
    assert terminal["score"]["format"] == pytest.approx(91.67)  # (5 + 4 + 5) / 3
    assert terminal["score"]["factuality"] == 75.0  # 4 and 4; absent in the third
    assert terminal["score"]["quality"] == 37.5  # 1 and 4
    # The overall is the mean over the valid samples: (2 + 3 + 4 + 5) / 4 = 3.5 -> 62.5,
    # not the mean of the domains (50).
    assert scores["overall"]["score"]["total"] == 62.5
    # The project's stricter view, beside: terminal keeps 3.0 and 4.0 (floats as given),
    # the partial verdict is unreadable there; its overall is the mean of the domains.
    assert terminal["strict"] == {"judged": 2, "mean": 3.5, "score": 62.5}
    assert scores["overall"]["strict"]["score"] == pytest.approx((25.0 + 62.5) / 2)


# -- the score step on hand-written runs --------------------------------------------------------------
def write_run(folder: Path, model: str, rows: list[tuple[str, str, dict[str, int] | None]]) -> None:
    """A run folder as bench writes it; ``None`` scores make an unreadable verdict."""
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(
        json.dumps({"format": "agentworld-bench", "version": 1, "data": "/d", "model": model})
    )
    with (
        (folder / "predictions.jsonl").open("w") as p,
        (folder / "judgements.jsonl").open("w") as j,
    ):
        for key, domain, scores in rows:
            p.write(
                json.dumps(
                    {
                        "key": key,
                        "domain": domain,
                        "status": "complete",
                        "prediction": key,
                        "prediction_sha": key,
                    }
                )
                + "\n"
            )
            judgement = None
            if scores is not None:
                judgement = {"scores": scores, "strengths": [], "weaknesses": []}
            j.write(
                json.dumps(
                    {
                        "key": key,
                        "domain": domain,
                        "prediction_sha": key,
                        "judgement": judgement,
                        "official": judgement,
                        "error": "" if scores else "unreadable",
                    }
                )
                + "\n"
            )


def flat(value: int) -> dict[str, int]:
    return dict.fromkeys(SCORES, value)


def test_score_arithmetic_against_hand_computed_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "a"
    write_run(
        run,
        "q4.gguf",
        [
            (
                "t1",
                "terminal",
                {"format": 5, "factuality": 4, "consistency": 3, "realism": 2, "quality": 1},
            ),
            ("t2", "terminal", flat(4)),
            ("t3", "terminal", None),
            ("m1", "mcp", flat(2)),
        ],
    )
    # A verdict on an earlier prediction does not count for the new one, nor does a failure.
    with (run / "predictions.jsonl").open("a") as p:
        p.write(
            json.dumps(
                {
                    "key": "m2",
                    "domain": "mcp",
                    "status": "complete",
                    "prediction": "again",
                    "prediction_sha": "new",
                }
            )
            + "\n"
        )
        p.write(
            json.dumps({"key": "m3", "domain": "mcp", "status": "error", "prediction_sha": "x"})
            + "\n"
        )
    with (run / "judgements.jsonl").open("a") as j:
        j.write(
            json.dumps({"key": "m2", "prediction_sha": "old", "judgement": {"scores": flat(5)}})
            + "\n"
        )
        j.write(
            '{"key": "torn',
        )  # a line cut by a kill

    assert main(["bench", "score", str(run)]) == 0
    table = capsys.readouterr().out.splitlines()
    rows = {
        r.split()[0]: r.split()[1:]
        for r in table
        if r.split() and r.split()[0] in ("terminal", "mcp", "Overall")
    }
    # terminal: format (5+4)/2 = 4.5 -> 87.5, factuality 4 -> 75, consistency 3.5 -> 62.5,
    # realism 3 -> 50, quality 2.5 -> 37.5, total 3.5 -> 62.5; 2 valid, 1 failed (unreadable).
    assert rows["terminal"] == [
        "87.50",
        "75.00",
        "62.50",
        "50.00",
        "37.50",
        "62.50",
        "2",
        "1",
        "0",
        "62.50",
    ]
    # mcp: 2 everywhere -> 25.00; m2's verdict is stale and m3 failed to predict: pending.
    assert rows["mcp"] == ["25.00"] * 6 + ["1", "0", "2", "25.00"]
    # overall: the mean over the valid samples, (3 + 4 + 2) / 3 = 3 -> 50.00; the strict
    # column keeps the project's mean of the domains, (62.5 + 25) / 2 = 43.75.
    # Each dimension pooled the same way: format (5 + 4 + 2) / 3 -> 66.67, and so on.
    assert rows["Overall"][:6] == ["66.67", "58.33", "50.00", "41.67", "33.33", "50.00"]
    assert rows["Overall"][6:] == ["3", "1", "2", "43.75"]

    assert main(["bench", "score", str(run), "--raw"]) == 0
    raw = capsys.readouterr().out
    assert next(x for x in raw.splitlines() if x.startswith("terminal")).split()[1:7] == [
        "4.50",
        "4.00",
        "3.50",
        "3.00",
        "2.50",
        "3.50",
    ]


def test_two_runs_side_by_side_on_the_samples_both_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "q4", "q4.gguf", [("t1", "terminal", flat(3)), ("m1", "mcp", flat(2))])
    write_run(
        tmp_path / "q8",
        "q8.gguf",
        [("t1", "terminal", flat(4)), ("m1", "mcp", flat(2)), ("m9", "mcp", flat(5))],
    )
    assert main(["bench", "score", str(tmp_path / "q4"), str(tmp_path / "q8")]) == 0
    text = capsys.readouterr().out
    assert "Compared on the 2 samples valid in both runs (A has 0 more, B 1 more)." in text
    rows = {r.split()[0]: r.split()[1:] for r in text.splitlines() if r.split()}
    assert rows["terminal"] == ["50.00", "75.00", "+25.00", "1"]
    assert rows["mcp"] == ["25.00", "25.00", "+0.00", "1"]
    assert rows["Overall"] == ["37.50", "50.00", "+12.50", "2"]


# -- bad input: one line, exit 2 --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "{tmp}/nowhere"], "no such file or folder"),
        (["bench", "{data}", "--domains", "chess"], "unknown domain 'chess'"),
        (["bench", "{data}", "--limit", "0"], "--limit must be 1 or more"),
        (["bench", "{data}", "--judge-model", "x"], "give the server too"),
        (["bench", "{data}", "--judge-model-path", "{tmp}/none.gguf"], "no such file"),
        (["bench", "score", "{tmp}"], "no bench run here"),
        (["bench", "score"], "usage: agentworld bench score"),
        (["bench", "judge", "{tmp}"], "give a judge"),
        (
            [
                "bench",
                "{data}",
                "--judge-model-path",
                "{data}/mcp_test.jsonl",
                "--judge-prompts",
                "{tmp}/none",
            ],
            "--judge-prompts: {tmp}/none: no such folder",
        ),
        (
            [
                "bench",
                "{data}",
                "--judge-model-path",
                "{data}/mcp_test.jsonl",
                "--judge-prompts",
                "{data}",
            ],
            "no judge system prompt found",
        ),
        (
            [
                "bench",
                "{data}",
                "--judge-model-path",
                "{data}/mcp_test.jsonl",
                "--judge-temperature",
                "nan",
            ],
            "--judge-temperature must be from 0 to 2",
        ),
        (
            [
                "bench",
                "{data}",
                "--judge-model-path",
                "{data}/mcp_test.jsonl",
                "--judge-attempts",
                "0",
            ],
            "--judge-attempts must be 1 or more",
        ),
        (["bench", "{data}", "{data}"], "one DATA_DIR at a time"),
        (
            ["bench", "{data}", "--server", "http://127.0.0.1:9/v1", "--out", "{tmp}/o"],
            "127.0.0.1:9",
        ),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str],
    message: str,
    bench_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [a.format(tmp=tmp_path, data=bench_data) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and message.format(tmp=tmp_path) in err[-1]
    assert "Traceback" not in "\n".join(err)


def test_a_folder_of_another_model_is_not_mixed_in(
    bench_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    write_run(out, "other.gguf", [])
    with FaultServer(default=Reply(content=[ANSWER])) as server:
        code = main(
            [
                "bench",
                str(bench_data),
                "--server",
                server.url,
                "--server-model",
                "world-model",
                "--out",
                str(out),
            ]
        )
    assert code == 2
    assert "holds predictions by 'other.gguf', not 'world-model'" in capsys.readouterr().err


def test_limit_and_domains_pick_the_first_samples(
    bench_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with FaultServer(default=Reply(content=[ANSWER])) as server:
        code = main(
            [
                "bench",
                str(bench_data),
                "--domains",
                "terminal",
                "--limit",
                "2",
                "--server",
                server.url,
                "--server-model",
                "world-model",
                "--out",
                str(out),
            ]
        )
    assert code == 0, capsys.readouterr().err
    assert [r["key"] for r in records(out / "predictions.jsonl")] in (
        ["terminal_test.jsonl:1", "terminal_test.jsonl:2"],
        ["terminal_test.jsonl:2", "terminal_test.jsonl:1"],
    )


def test_a_torn_last_line_is_dropped_before_appending(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "p.jsonl")
    log.append({"key": "a", "n": 1})
    with log.path.open("ab") as handle:
        handle.write(b'{"key": "b", "n"')
    assert set(log.read()) == {"a"}
    log.drop_torn_tail()
    log.append({"key": "b", "n": 2})
    log.append({"key": "a", "n": 3})
    assert log.read() == {"a": {"key": "a", "n": 3}, "b": {"key": "b", "n": 2}}
    assert log.skipped == 0
