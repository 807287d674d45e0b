"""The trace store: real SQLite files, BM25 retrieval per tool, imports from session files
and AgentWorldBench lines, and stores that are huge, damaged or hostile."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agentworld_tui.domains.mcp import McpDomain
from agentworld_tui.domains.tool_call import tool_call_action
from agentworld_tui.reality import traces
from agentworld_tui.reality.traces import (
    MAX_OBSERVATION_CHARS,
    Exchange,
    ImportReport,
    TraceStore,
    TraceStoreError,
    call_of,
    repair_store,
)
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import Session
from agentworld_tui.world.workspace import Workspace

BENCH = Path(__file__).resolve().parents[1] / "bench"
MCP = McpDomain()


def store(
    tmp_path: Path, exchanges: Sequence[Exchange] = (), name: str = "traces.db"
) -> TraceStore:
    found = TraceStore(tmp_path / name, create=True)
    if exchanges:
        found.add_many(exchanges)
    return found


def read(path: str, text: str, source: str = "twin") -> Exchange:
    return Exchange("read_file", {"path": path}, text, source)


# -- keeping and finding ----------------------------------------------------------------------
def test_exchanges_are_kept_in_a_file_and_read_back(tmp_path: Path) -> None:
    with store(tmp_path) as kept:
        first = kept.add(read("src/app.py", "print('hi')\n"))
        assert first == 1
        assert kept.add(read("src/app.py", "print('hi')\n")) is None  # the same exchange
        kept.add(Exchange("terminal", [{"keystrokes": "ls\n"}], "a b\n", "twin", 5.0, "terminal"))
    with TraceStore(tmp_path / "traces.db", writable=False) as again:
        assert again.count() == 2
        assert again.tools() == [("mcp", "read_file", 1), ("terminal", "terminal", 1)]
        found, missing = again.get([2, 1, 99])
        assert [e.id for e in found] == [2, 1] and missing == 1
        assert found[0] == Exchange(
            "terminal", [{"keystrokes": "ls\n"}], "a b\n", "twin", 5.0, "terminal", 2
        )
        with pytest.raises(TraceStoreError, match="read-only"):
            again.add(read("x", "y"))


def test_the_most_similar_exchanges_of_the_same_tool_come_first(tmp_path: Path) -> None:
    exchanges = [read(f"docs/chapter{i}.md", f"chapter {i}") for i in range(30)]
    exchanges += [
        read("src/billing/invoice.py", "class Invoice: ..."),
        read("src/billing/tax.py", "RATE = 0.2"),
        Exchange("write_file", {"path": "src/billing/invoice.py"}, "written", "twin"),
    ]
    with store(tmp_path, exchanges) as kept:
        found = kept.similar("mcp", "read_file", {"path": "src/billing/invoice.py"}, limit=3)
        paths = [m.exchange.arguments["path"] for m in found.matches]
        assert paths[:2] == ["src/billing/invoice.py", "src/billing/tax.py"]
        assert {m.exchange.tool for m in found.matches} == {"read_file"}
        assert [m.how for m in found.matches][:2] == ["bm25", "bm25"]
        assert found.matches[0].score > found.matches[1].score > 0
        assert (found.skipped, found.problem) == (0, "")

        nothing_alike = kept.similar("mcp", "read_file", {"path": "zzz"}, limit=2)
        assert [m.how for m in nothing_alike.matches] == ["recent", "recent"]
        assert [m.exchange.id for m in nothing_alike.matches] == [32, 31]

        best = found.matches[0].exchange.id
        without = kept.similar(
            "mcp", "read_file", {"path": "src/billing/invoice.py"}, exclude={best}
        )
        assert best not in [m.exchange.id for m in without.matches]
        assert kept.similar("mcp", "no_such_tool", {"path": "src"}).matches == ()
        assert kept.similar("terminal", "read_file", {"path": "src"}).matches == ()


def test_a_call_of_common_words_is_still_answered(tmp_path: Path) -> None:
    exchanges = [read(f"src/main.py {i}", f"v{i}") for i in range(traces.POSTINGS_BUDGET + 10)]
    with store(tmp_path, exchanges) as kept:
        found = kept.similar("mcp", "read_file", {"path": "src/main.py"}, limit=2)
        assert [m.how for m in found.matches] == ["word", "word"]
        assert [m.exchange.id for m in found.matches] == [len(exchanges), len(exchanges) - 1]
        assert all(m.exchange.arguments["path"].startswith("src/main.py") for m in found.matches)


def test_calls_are_read_from_every_kind_of_action() -> None:
    action = tool_call_action("mcp", {"name": "read_file", "arguments": {"path": "a"}})
    assert call_of("mcp", action.payload) == ("read_file", {"path": "a"})
    openai = {"type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    assert call_of("mcp", openai) == ("f", {"x": 1})
    keys = [{"keystrokes": "ls\n", "duration": 1}]
    assert call_of("terminal", keys) == ("terminal", keys)
    assert call_of("os", "pyautogui.click(1, 2)") == ("os", "pyautogui.click(1, 2)")


def test_a_store_of_100000_exchanges(tmp_path: Path) -> None:
    tools = [f"tool_{t}" for t in range(20)]

    def made() -> Iterator[Exchange]:
        for i in range(100_000):
            yield Exchange(
                tools[i % 20],
                {"path": f"src/pkg{i % 300}/mod{i % 7}.py", "query": f"term{i % 1000} common"},
                f"result {i}",
                "bench",
            )

    with store(tmp_path) as kept:
        report = kept.add_many(made())
        assert (report.read, report.added, report.skipped) == (100_000, 100_000, 0)
        planted = kept.add(
            Exchange("tool_3", {"path": "vendor/rare/thing.py", "query": "needle"}, "found it")
        )
        assert kept.count() == 100_001
        found = kept.similar("mcp", "tool_3", {"path": "vendor/rare/thing.py", "query": "x"})
        assert found.matches[0].exchange.id == planted
        assert found.matches[0].exchange.observation == "found it"
        alike = kept.similar("mcp", "tool_5", {"path": "src/pkg5/mod5.py", "query": "term5"})
        assert len(alike.matches) == 3
        assert all(m.exchange.tool == "tool_5" for m in alike.matches)
        assert alike.matches[0].how == "bm25"
        assert alike.matches[0].exchange.arguments["path"] == "src/pkg5/mod5.py"


# -- bounds ---------------------------------------------------------------------------------
def test_what_cannot_be_kept_is_skipped_and_counted(tmp_path: Path) -> None:
    huge = "x" * (MAX_OBSERVATION_CHARS + 10)
    report = store(tmp_path).add_many(
        [
            read("big", huge),
            read("a" * 30_000, "long arguments"),
            Exchange("", {}, "no tool", "s1"),
            Exchange("t", {"x": {1, 2}}, "a set", "s2"),
            Exchange("t", {}, "lone \ud800 surrogate", "s3"),
            Exchange("t", {}, "\x1b]0;evil\x07", "\x1b[2J source"),
        ]
    )
    assert (report.read, report.added, report.skipped) == (6, 2, 4)
    assert len(report.problems) == 4
    assert not any("\x1b" in p for p in report.problems)
    with TraceStore(tmp_path / "traces.db", writable=False) as kept:
        big = kept.similar("mcp", "read_file", {"path": "big"}).matches[0].exchange
        assert big.observation.startswith("x" * 1000)
        assert big.observation.endswith("[… 10 more characters not kept]")
        hostile = kept.similar("mcp", "t", {}).matches[0].exchange
        assert hostile.observation == "\x1b]0;evil\x07"  # kept raw ...
        assert "\x1b" not in hostile.label() and "\x07" not in hostile.label()  # ... shown clean


def test_files_that_are_not_trace_stores_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceStoreError, match="no such trace store"):
        TraceStore(tmp_path / "missing.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(TraceStoreError, match="not a trace store"):
        TraceStore(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (x)")
    with pytest.raises(TraceStoreError, match="another program's SQLite file"):
        TraceStore(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(TraceStoreError, match="an empty file"):
        TraceStore(empty, writable=False)
    with pytest.raises(TraceStoreError, match="not a file"):
        TraceStore(tmp_path)
    assert junk.read_bytes() == b"\x00garbage" * 1000


def test_a_store_with_objects_of_its_own_is_refused(tmp_path: Path) -> None:
    store(tmp_path, [read("a", "b")]).close()
    with sqlite3.connect(tmp_path / "traces.db") as db:
        db.execute(
            "CREATE TRIGGER sneaky AFTER INSERT ON exchanges BEGIN DELETE FROM exchanges; END"
        )
    with pytest.raises(TraceStoreError, match="holds a trigger 'sneaky' of its own"):
        TraceStore(tmp_path / "traces.db")

    store(tmp_path, name="newer.db").close()
    with sqlite3.connect(tmp_path / "newer.db") as db:
        db.execute("PRAGMA user_version = 2")
    with pytest.raises(TraceStoreError, match="format 2; this version reads format 1"):
        TraceStore(tmp_path / "newer.db")


def test_damaged_rows_are_skipped_with_a_count(tmp_path: Path) -> None:
    store(tmp_path, [read(f"file{i}", f"text {i}") for i in range(8)]).close()
    with sqlite3.connect(tmp_path / "traces.db") as db:  # ids 1..8 hold file0..file7
        db.execute("UPDATE exchanges SET arguments = 'not json' WHERE id = 1")
        db.execute("UPDATE exchanges SET observation = X'00ff' WHERE id = 2")
        db.execute("UPDATE exchanges SET at = 'yesterday' WHERE id = 3")
        db.execute("UPDATE exchanges SET arguments = ? WHERE id = 4", ("[" * 200 + "]" * 200,))
        db.execute("DELETE FROM exchanges WHERE id = 5")
        db.execute("UPDATE exchanges SET observation = ? WHERE id = 7", ("y" * 5_000_000,))
        db.execute("UPDATE exchanges SET observation = ? WHERE id = 8", ("z" * 3_000_000,))
    with TraceStore(tmp_path / "traces.db", writable=False) as kept:
        every = " ".join(f"file{i}" for i in range(8))
        found = kept.similar("mcp", "read_file", {"path": every}, limit=8)
        assert sorted(m.exchange.id for m in found.matches) == [6, 8]
        assert {m.how for m in found.matches} == {"bm25"}
        assert found.skipped == 6  # five damaged rows, one the index still names
        assert found.problem == ""
        cut = next(m.exchange for m in found.matches if m.exchange.id == 8)
        assert len(cut.observation) == traces.MAX_OBSERVATION_CHARS + 200


def test_a_damaged_index_is_a_problem_not_an_exception_and_can_be_repaired(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.db"
    store(tmp_path, [read(f"file{i}", f"text {i}") for i in range(50)]).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE exchange_terms_data SET block = X'ffffffffffff' WHERE id > 1")
        db.execute("UPDATE exchanges SET arguments = '{' WHERE id = 3")
    with TraceStore(path, writable=False) as kept:
        broken = kept.similar("mcp", "read_file", {"path": "file7"})
        assert broken.matches == ()
        assert broken.problem.startswith("the trace store could not be searched")

    report = repair_store(path)
    assert (report.read, report.added, report.skipped) == (49, 49, 1)
    assert report.problems == ["exchange 3: damaged"]
    assert (tmp_path / "traces.db.damaged").is_file()
    with TraceStore(path, writable=False) as kept:
        fixed = kept.similar("mcp", "read_file", {"path": "file7"})
        assert fixed.problem == ""
        assert fixed.matches[0].exchange.id == 8  # the id it had
        assert fixed.matches[0].exchange.arguments == {"path": "file7"}
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE exchanges (x)")
    with pytest.raises(TraceStoreError, match="not a trace store"):
        repair_store(other)


# -- imports --------------------------------------------------------------------------------
def session_file(tmp_path: Path) -> Path:
    session = Session(MCP, Scenario("notes", "Notes", ""), "system")
    calls = [
        ("read_note", {"title": "todo"}),
        ("write_note", {"title": "todo", "text": "milk"}),
        ("read_note", {"title": "todo"}),
        ("list_notes", {}),
        ("read_note", {"title": "plans"}),
        ("read_note", {"title": "dreams"}),
    ]
    for name, arguments in calls:
        turn = session.begin_turn(tool_call_action("mcp", {"name": name, "arguments": arguments}))
        session.finish_turn(turn, observation=f"simulated {name}", reasoning="", status="complete")
    data = Workspace(tabs=[session]).to_dict()
    turns = data["tabs"][0]["turns"]
    real = {"tool": "read_note", "route": "real", "answered": "real", "reason": "rule 2"}
    turns[0]["route"] = real
    turns[0]["observation"] = "buy bread"
    turns[1]["route"] = {"tool": "write_note", "route": "sim", "answered": "sim", "reason": "r"}
    # A shadow turn: reality's answer beside the prediction (the turn's observation).
    turns[2]["reality"] = {
        "real": {"text": "buy milk", "status": "ok"},
        "divergence": None,
        "delivered": "real",
    }
    turns[2]["route"] = {**real, "route": "shadow", "answered": "both"}
    # Reality failed: the prediction went to the agent, and is not reality's.
    turns[3]["reality"] = {
        "real": {"text": "", "status": "crashed", "error": "the server ended"},
        "divergence": None,
        "delivered": "sim",
    }
    turns[3]["route"] = {**real, "tool": "list_notes", "route": "shadow", "answered": "both"}
    # Routed to reality, but reality failed and the rule said fail; or a person edited it.
    turns[4]["route"] = {**real, "failed": "the server ended"}
    turns[4]["status"] = "error"
    turns[5]["route"] = {**real, "edited": True}
    turns.append({"number": 7, "action": "damaged"})
    path = tmp_path / "notes.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_session_file_gives_the_turns_reality_answered(tmp_path: Path) -> None:
    with store(tmp_path) as kept:
        report = kept.import_session_file(session_file(tmp_path))
        assert (report.read, report.added, report.simulated, report.skipped) == (2, 2, 4, 1)
        found, _ = kept.get([1, 2])
        assert [(e.tool, e.arguments, e.observation) for e in found] == [
            ("read_note", {"title": "todo"}, "buy bread"),
            ("read_note", {"title": "todo"}, "buy milk"),
        ]
        assert found[0].source == "session:notes.json#1/1"
        again = kept.import_session_file(session_file(tmp_path))
        assert (again.added, again.duplicates) == (0, 2)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "damaged (invalid JSON"),
        (b'{"format": "something-else"}', "not an agentworld session file"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "nested more than"),
    ],
)
def test_a_damaged_session_file_is_skipped_with_why(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    report = store(tmp_path).import_session_file(path)
    assert (report.added, report.skipped) == (0, 1)
    assert why in report.problems[0]
    assert path.read_bytes() == content


def bench_line(turns: list[tuple[str, str]], turn_idx: int) -> str:
    def turn(n: int, call: str) -> str:
        return f"### Turn {n}\n\n**Action:**\n```json\n{call}\n```"

    prompts = [turn(i, c) for i, (c, _) in enumerate(turns, 1)]
    return json.dumps(
        {
            "task": "agentworld/mcp",
            "id": "t1",
            "prompt": prompts[:turn_idx],
            "response": [f"**Environment Observation:**\n{o}" for _, o in turns[:turn_idx]],
            "current_prompt": prompts[turn_idx - 1],
            "system_str": "tools...",
            "turn_idx": turn_idx,
            "total_turns": len(turns),
        }
    )


def test_benchmark_lines_give_every_recorded_turn_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [
        ('{"name": "search", "arguments": {"q": "cats"}}', "3 results"),
        ('{"name": "open", "arguments": {"id": 2}}', "A page about cats"),
    ]
    monkeypatch.setattr(traces, "MAX_BENCH_LINE_BYTES", 4000)
    lines = [
        bench_line(turns, 1),
        bench_line(turns, 2),
        "{broken",
        json.dumps({"task": "mcp", "prompt": ["no action here"], "response": ["x"]}),
        "x" * 9000,
        bench_line([('{"name": "late", "arguments": {}}', "still read")], 1),
    ]
    path = tmp_path / "mcp_test.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    with store(tmp_path) as kept:
        report = kept.import_bench(path)
        assert (report.read, report.added, report.skipped) == (3, 3, 4)
        assert any("longer than 4,000 bytes" in p for p in report.problems)
        assert any("no **Action:** block" in p for p in report.problems)
        found, _ = kept.get([1, 2, 3])
        assert [(e.tool, e.arguments, e.observation) for e in found] == [
            ("search", {"q": "cats"}, "3 results"),
            ("open", {"id": 2}, "A page about cats"),
            ("late", {}, "still read"),
        ]
        assert found[0].source == "bench:mcp_test.jsonl:1/1"
    assert (
        store(tmp_path, name="b.db")
        .import_bench(tmp_path / "none")
        .problems[0]
        .endswith("no such file or folder")
    )


def test_import_reports_add_up() -> None:
    total = ImportReport(read=2, added=1, duplicates=1)
    total.merge(ImportReport(read=3, added=1, simulated=2, skipped=1, problems=["x"]))
    assert total.summary() == (
        "5 real exchanges read: 2 added, 1 already there, 2 simulated turns left out, 1 skipped"
    )


@pytest.mark.bench
def test_the_retrieval_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "retrieval.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "retrieval cost per call" in result.stdout
    assert " 1,000 " in result.stdout
