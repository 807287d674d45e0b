"""``agentworld mcp serve`` from the command line: bad input is one line before anything
starts, and the HTTP server runs until Ctrl+C, losing no turn."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultserver import FaultServer
from mcp import Client
from mcpfixtures import TESTS_DIR, received_text, reply_with, session_turns, write_tools

from agentworld_tui.cli import main


def one_line(capsys: pytest.CaptureFixture[str], words: list[str]) -> str:
    code = main(words)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    return err.removeprefix("agentworld: ").rstrip("\n")


def test_a_tools_file_that_is_not_json_schema_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [
        {"name": "fine", "inputSchema": {"type": "object"}},
        {"name": "broken", "inputSchema": {"type": "object", "required": "path"}},
    ]
    file = write_tools(tmp_path / "tools.json", tools)
    said = one_line(capsys, ["mcp", "serve", str(file)])
    assert said == (
        f"{file}: tool 'broken': its inputSchema is not valid JSON Schema at required: "
        "'path' is not of type 'array'"
    )


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ([], "say what to serve: a TOOLS file, --tools-from-command, --tools-from-url or --domain"),
        (["--domain", "terminal", "x.json"], "give one source of tools, not TOOLS and --domain"),
        (["--domain", "web", "--scenario", "nope"], "no web scenario named 'nope'; the scenarios"),
        (
            ["--domain", "os", "--world", "atlantis"],
            "--world: no world named 'atlantis'; the worlds",
        ),
        (["--domain", "os", "--schedule-seed", "3"], "--schedule-seed goes with --schedule"),
        (
            ["--domain", "os", "--transport", "http", "--host", "0.0.0.0"],
            "listening on 0.0.0.0 needs a token: put one in $AGENTWORLD_MCP_TOKEN",
        ),
    ],
)
def test_bad_flags_are_one_line(
    capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    assert one_line(capsys, ["mcp", "serve", *words]).startswith(said)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--session-idle-timeout", "0", "must be a number of seconds from 1 to 604800"),
        ("--max-sessions", "nan", "must be a whole number from 1 to 100000"),
    ],
)
def test_session_bounds_out_of_range_are_refused(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, said: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "serve", "--domain", "os", flag, value])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_the_session_bounds_say_the_server_s_defaults() -> None:
    from agentworld_tui.agents.mcp import server
    from agentworld_tui.cli import mcp

    assert (mcp.IDLE_SECONDS, mcp.MAX_SESSIONS) == (server.IDLE_SECONDS, server.MAX_SESSIONS)


def test_a_bad_schedule_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule = tmp_path / "faults.toml"
    schedule.write_text('[[rule]]\npreset = "meteor"\n', encoding="utf-8")
    said = one_line(capsys, ["mcp", "serve", "--domain", "mcp", "--schedule", str(schedule)])
    assert said.startswith(f"{schedule}: rule 1: no mcp perturbation named 'meteor'")


def test_a_port_in_use_is_one_line_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        said = one_line(
            capsys,
            ["mcp", "serve", "--domain", "terminal", "--transport", "http", "--port", str(port),
             "--model", str(tmp_path / "never-loaded.gguf")],
        )  # fmt: skip
    finally:
        taken.close()
    assert (
        said == f"cannot listen on 127.0.0.1:{port}: the port is in use (pick another with --port)"
    )


def test_a_model_that_cannot_load_ends_the_server_with_its_reason(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file at all")
    process = subprocess.Popen(
        [sys.executable, "-m", "agentworld_tui", "mcp", "serve", "--domain", "terminal",
         "--model", str(broken)],
        stdin=subprocess.PIPE,  # left open: the client is still there
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS_DIR.parent,
    )  # fmt: skip
    try:
        code = process.wait(120)
        assert process.stdout is not None and process.stderr is not None
        out, err = process.stdout.read(), process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
        assert process.stdin is not None
        process.stdin.close()
    assert code == 1
    assert out == ""  # stdout is the MCP stream: nothing else ever goes there
    last = err.strip().splitlines()[-1]
    assert last.startswith("agentworld: ") and "broken.gguf" in last


async def test_the_http_server_serves_until_interrupted_and_keeps_every_turn(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "sessions"
    tools = write_tools(tmp_path / "tools.json")
    with FaultServer() as fault:
        fault.default = reply_with("a note")
        process = subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", "mcp", "serve", str(tools),
             "--transport", "http", "--port", "0", "--server", fault.url,
             "--sessions", str(folder)],
            stderr=subprocess.PIPE,
            text=True,
            cwd=TESTS_DIR.parent,
            env=dict(os.environ),
        )  # fmt: skip
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            assert line.startswith("agentworld: serving 2 tools ("), line
            url = line.split(" at ", 1)[1].split(" ", 1)[0]
            async with Client(url) as client:
                result = await client.call_tool("read_note", {"title": "a"})
            process.send_signal(signal.SIGINT)
            code = process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert code == 0
    assert received_text(result) == "a note"
    [turns] = session_turns(folder).values()
    assert turns[0]["observation"] == "a note"
    # The file is a normal session file: the export command reads it.
    [file] = folder.glob("*.json")
    exported = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "export", str(file), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=TESTS_DIR.parent,
    )
    assert exported.returncode == 0, exported.stderr
    assert "a note" in exported.stdout
    assert json.loads(exported.stdout)


def test_the_serve_help_names_every_source(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["mcp", "serve", "--help"])
    out = capsys.readouterr().out
    for flag in ("--tools-from-command", "--tools-from-url", "--domain", "--transport"):
        assert flag in out


def test_ctrl_c_ends_a_stdio_server_whose_client_holds_stdin_open(tmp_path: Path) -> None:
    with FaultServer() as fault:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentworld_tui", "mcp", "serve", "--domain", "terminal",
             "--server", fault.url, "--sessions", str(tmp_path / "s")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=TESTS_DIR.parent,
        )  # fmt: skip
        try:
            assert process.stderr is not None
            assert "over stdio" in process.stderr.readline()
            process.send_signal(signal.SIGINT)
            code = process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
            assert process.stdin is not None
            process.stdin.close()
    assert code == 0


def test_a_client_that_leaves_before_a_failing_model_load_leaves_one_clean_line(
    tmp_path: Path,
) -> None:
    from faultserver import FaultServer, Reply

    tools = write_tools(tmp_path / "tools.json")
    with FaultServer() as fault:
        fault.models_reply = Reply(status=500, error_message="no such model", trickle_s=0.05)
        done = subprocess.run(
            [sys.executable, "-m", "agentworld_tui", "mcp", "serve", str(tools),
             "--server", fault.url, "--sessions", str(tmp_path / "s")],
            input="", capture_output=True, text=True, timeout=120,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        time.sleep(3)  # the load fails after the process is gone: nothing more is said
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"agentworld: serving 2 tools ({tools}) over stdio",
    ]
