"""Capturing a real MCP server's tools (a small real server built on the SDK, started by
the test over stdio and over HTTP): every tool as it lists it, and none of them called;
a server that cannot be reached is one line and a non-zero exit."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, free_port
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcpfixtures import NOTES_TOOLS, TESTS_DIR, reply_with

from agentworld_tui.agents.mcp.capture import CaptureError, capture
from agentworld_tui.cli import main

FIXTURE = str(TESTS_DIR / "mcpfixtures.py")


def notes_command(marker: Path) -> list[str]:
    return [sys.executable, FIXTURE, "stdio", str(marker)]


@pytest.fixture
def notes_over_http(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    marker = tmp_path / "called"
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, FIXTURE, "http", str(port_file), str(marker)])
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            assert process.poll() is None, "the notes server ended"
            assert time.monotonic() < deadline, "the notes server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp", marker
    finally:
        process.terminate()
        process.wait(10)


async def test_a_stdio_server_s_tools_are_taken_as_listed_and_none_is_called(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "called"
    captured = await capture(command=notes_command(marker))
    assert captured.tools == NOTES_TOOLS
    assert (captured.name, captured.version) == ("notes-server", "3.1.4")
    assert captured.instructions == "A notebook of short notes."
    assert not marker.exists()


async def test_an_http_server_s_tools_are_taken_as_listed(
    notes_over_http: tuple[str, Path],
) -> None:
    url, marker = notes_over_http
    captured = await capture(url=url)
    assert captured.tools == NOTES_TOOLS
    assert not marker.exists()


async def test_a_captured_server_is_served_under_its_own_name(tmp_path: Path) -> None:
    marker = tmp_path / "called"
    with FaultServer() as fault:
        fault.default = reply_with('{"count": 3}')
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m", "agentworld_tui", "mcp", "serve",
                "--tools-from-command", shlex.join(notes_command(marker)),
                "--server", fault.url, "--sessions", str(tmp_path / "s"),
            ],
            env=dict(os.environ),
            cwd=str(TESTS_DIR.parent),
        )  # fmt: skip
        async with Client(params) as client:
            listed = await client.list_tools()
            result = await client.call_tool("count_notes", {})
            info = client.server_info
    assert [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools] == (
        NOTES_TOOLS
    )
    assert info is not None and (info.name, info.version) == ("notes-server", "3.1.4")
    assert result.structured_content == {"count": 3}
    assert not marker.exists()  # the real server was listed, never called
    # The simulated server's prompt tells the model what the real one said of itself.
    assert "A notebook of short notes." in fault.chat_requests()[0].body["messages"][0]["content"]


def test_mcp_tools_prints_a_tools_list_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "called"
    code = main(["mcp", "tools", "--tools-from-command", shlex.join(notes_command(marker))])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {"tools": NOTES_TOOLS}
    saved = tmp_path / "tools.json"
    assert main(["mcp", "tools", "--domain", "terminal", "--output", str(saved)]) == 0
    assert [t["name"] for t in json.loads(saved.read_text())["tools"]] == ["send_keystrokes"]


@pytest.mark.parametrize(
    ("flags", "start"),
    [
        (lambda: ["--tools-from-url", f"http://127.0.0.1:{free_port()}/mcp"], "cannot list the tools of http://127.0.0.1:"),
        (lambda: ["--tools-from-command", "no-such-mcp-server-here --stdio"], "cannot list the tools of no-such-mcp-server-here --stdio: "),
        (lambda: ["--tools-from-command", "'unclosed"], "cannot read the command"),
    ],
)  # fmt: skip
def test_a_server_that_cannot_be_reached_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], flags: object, start: str
) -> None:
    code = main(["mcp", "serve", *flags()])  # type: ignore[operator]
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"agentworld: {start}")
    assert err.count("\n") == 1


async def test_a_server_that_never_lists_is_given_up_on() -> None:
    with pytest.raises(CaptureError, match="did not list its tools within 1 seconds"):
        await capture(command=[sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)


HOSTILE_SERVER = (
    "import sys; sys.stderr.write('starting\\x1b]0;pwned\\x07\\x1b[2J\\n' + 'noise\\n' * 500"
    " + 'fatal: no config \\x1b[31mred\\x1b[0m\\n'); sys.stderr.flush(); sys.exit(3)"
)


def test_a_failing_server_s_stderr_is_a_clean_bounded_tail_of_the_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "server.py"
    script.write_text(HOSTILE_SERVER, encoding="utf-8")
    command = shlex.join([sys.executable, str(script)])
    code = main(["mcp", "tools", "--tools-from-command", command])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("agentworld: cannot list the tools of ")
    assert "fatal: no config red" in line  # what the server said last, clean
    assert "\x1b" not in err and "\x07" not in err and "starting" not in err
    assert len(line) < 1000


def test_a_command_that_is_no_mcp_server_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "mcp", "tools", "--tools-from-command", "echo hi"],
        capture_output=True, text=True, timeout=120, cwd=TESTS_DIR.parent,
    )  # fmt: skip
    code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("agentworld: cannot list the tools of echo hi")
    assert "Traceback" not in err


def test_one_tool_written_is_one_tool(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "one.json"
    tools.write_text(json.dumps({"tools": NOTES_TOOLS[:1]}), encoding="utf-8")
    assert main(["mcp", "tools", str(tools), "-o", str(tmp_path / "out.json")]) == 0
    assert capfd.readouterr().err == f"agentworld: 1 tool written to {tmp_path / 'out.json'}\n"
