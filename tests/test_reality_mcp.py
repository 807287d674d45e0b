"""The MCP domain's twin against a real server written with the SDK (tests/twinserver.py),
over stdio and over streamable HTTP: calls really change files, results come back as the
simulated server shows them, and a server that errs, stalls, talks junk, answers megabytes,
dies or is no MCP server at all gives a value with a reason, never an exception."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentworld_tui.reality import TwinRunner, TwinStatus
from agentworld_tui.reality.mcp_twin import McpTwin
from agentworld_tui.world.action import Action

SERVER = str(Path(__file__).resolve().parent / "twinserver.py")


def call(tool: str, **arguments: object) -> Action:
    return Action("mcp", {"name": tool, "arguments": arguments}, tool)


def calls_received(folder: Path) -> list[dict[str, object]]:
    log = folder / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "notebook"
    made.mkdir()
    return made


@pytest.fixture
def twin(folder: Path) -> Iterator[McpTwin]:
    made = McpTwin(command=[sys.executable, SERVER, "stdio", str(folder)], call_timeout=3)
    try:
        first = made.start()
        assert first.status is TwinStatus.OK, first.error
        yield made
    finally:
        made.close()


@pytest.fixture
def http_url(folder: Path, tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, SERVER, "http", str(folder), str(port_file)])
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            assert process.poll() is None, "the server ended"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_a_call_really_acts_and_its_result_is_the_observation(twin: McpTwin, folder: Path) -> None:
    wrote = twin.act(call("write_note", name="plan", text="ship it"))
    assert (wrote.status, wrote.text, wrote.tool_error) == (
        TwinStatus.OK,
        "wrote 7 bytes to plan",
        False,
    )
    assert (folder / "notes" / "plan").read_text() == "ship it"
    assert twin.act(call("read_note", name="plan")).text == "ship it"
    assert calls_received(folder) == [
        {"name": "write_note", "arguments": {"name": "plan", "text": "ship it"}},
        {"name": "read_note", "arguments": {"name": "plan"}},
    ]


def test_structured_content_is_the_observation_as_json(twin: McpTwin) -> None:
    twin.act(call("write_note", name="a", text="1"))
    listed = twin.act(call("list_notes"))
    assert json.loads(listed.text) == {"count": 1, "notes": ["a"]}


def test_an_error_result_and_a_protocol_error_are_reality_s_answers(twin: McpTwin) -> None:
    missing = twin.act(call("read_note", name="nothing"))
    assert (missing.status, missing.tool_error, missing.text) == (
        TwinStatus.OK,
        True,
        "no note named nothing",
    )
    unknown = twin.act(call("no_such_tool"))
    assert unknown.status is TwinStatus.OK and unknown.tool_error
    assert json.loads(unknown.text)["error"]["code"] == -32603


def test_a_stalled_call_times_out_and_the_next_one_works(twin: McpTwin) -> None:
    began = time.monotonic()
    stalled = twin.act(call("slow", seconds=60))
    assert time.monotonic() - began < 10
    assert stalled.status is TwinStatus.TIMEOUT
    assert "did not answer within 3 seconds" in stalled.error
    assert twin.act(call("write_note", name="b", text="2")).ok


def test_junk_on_the_server_s_stdout_does_not_break_the_twin(twin: McpTwin) -> None:
    assert twin.act(call("noise")).text == "noisy"
    assert twin.act(call("write_note", name="c", text="3")).text == "wrote 1 bytes to c"


def test_megabytes_of_result_are_cut_with_a_note(folder: Path) -> None:
    twin = McpTwin(command=[sys.executable, SERVER, "stdio", str(folder)], max_output=1000)
    assert twin.start().ok
    try:
        seen = twin.act(call("big", size=3_000_000))
        assert seen.ok
        assert seen.text.startswith("x" * 1000 + "\n[... 2,999,000 characters cut")
    finally:
        twin.close()


def test_a_server_that_dies_is_a_crashed_twin_with_its_last_words(twin: McpTwin) -> None:
    died = twin.act(call("crash"))
    assert died.status is TwinStatus.CRASHED
    assert "the server ended" in died.error
    later = twin.act(call("read_note", name="a"))
    assert later.status is TwinStatus.CRASHED
    assert "the notebook falls over" in later.error


def test_a_program_that_is_no_mcp_server_fails_to_start_in_one_line(tmp_path: Path) -> None:
    junk = McpTwin(
        command=[sys.executable, "-c", "print('hello'); import time; time.sleep(60)"],
        start_timeout=2,
    )
    first = junk.start()
    assert first.status is TwinStatus.CRASHED
    assert first.error.startswith("the twin did not start:")
    assert "\n" not in first.error
    junk.close()
    absent = McpTwin(command=[str(tmp_path / "no-such-server")])
    assert "No such file or directory" in absent.start().error
    nowhere = McpTwin(url="http://127.0.0.1:9/mcp", start_timeout=10)
    assert nowhere.start().status is TwinStatus.CRASHED
    assert nowhere.act(call("read_note", name="a")).status is TwinStatus.CRASHED


def test_a_server_over_http_is_a_twin_too(http_url: str, folder: Path) -> None:
    runner = TwinRunner(McpTwin(url=http_url))
    try:
        assert runner.start().ok
        assert (
            runner.act(call("write_note", name="web", text="over http")).text
            == "wrote 9 bytes to web"
        )
        assert (folder / "notes" / "web").read_text() == "over http"
    finally:
        runner.close()


def test_only_the_calls_made_reach_the_server(folder: Path) -> None:
    twin = McpTwin(command=[sys.executable, SERVER, "stdio", str(folder)])
    assert twin.start().ok
    twin.close()
    assert calls_received(folder) == []
    assert twin.act(call("write_note", name="late", text="x")).status is TwinStatus.CRASHED
    assert calls_received(folder) == []


def test_an_mcp_twin_runs_no_check() -> None:
    verdict = McpTwin(url="http://127.0.0.1:9/mcp").check("true")
    assert (verdict.passed, verdict.status) == (False, TwinStatus.ERROR)


def test_killing_the_twin_mid_call_ends_the_call_and_the_server(folder: Path) -> None:
    twin = McpTwin(command=[sys.executable, SERVER, "stdio", str(folder)], call_timeout=50)
    runner = TwinRunner(twin)
    assert runner.start().ok

    def server() -> list[str]:
        found = subprocess.run(
            ["pgrep", "-f", f"twinserver.py stdio {folder}"], capture_output=True, text=True
        )
        return found.stdout.split()

    pending = runner.submit_act(call("slow", seconds=40))
    time.sleep(1)
    assert len(server()) == 1
    began = time.monotonic()
    twin.kill()
    seen = pending.result(20)
    assert time.monotonic() - began < 15
    assert seen.status is TwinStatus.CRASHED
    deadline = time.monotonic() + 10
    while server() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server() == []
    runner.close()
