"""``agentworld predict`` in a real subprocess: clean stdout, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REASONING = "The agent lists the files in ~/project."
OBSERVATION = "user@devbox:~/project$ ls\nREADME.md  src\nuser@devbox:~/project$"
SCRIPT = f"{REASONING}</think>\n<predicted_observation>\n{OBSERVATION}\n</predicted_observation>"


def predict(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "predict", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentworld: ")
    assert "Traceback" not in result.stderr
    for part in expected:
        assert part in lines[0]


@pytest.fixture
def model(scripted_model) -> Path:
    return scripted_model(SCRIPT)


def test_stdout_is_exactly_the_observation(model: Path, isolated_dirs: dict) -> None:
    result = predict("--model", str(model), "--temperature", "0", "ls")
    assert result.returncode == 0, result.stderr
    assert result.stdout == OBSERVATION + "\n"
    assert result.stderr == ""
    # llama.cpp's own messages went to the log file instead.
    log = (isolated_dirs["data"] / "agentworld.log").read_text(encoding="utf-8")
    assert "llama" in log


def test_json_holds_observation_reasoning_and_stats(model: Path) -> None:
    result = predict("--model", str(model), "--json", "ls -la")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert data["observation"] == OBSERVATION
    assert data["reasoning"] == REASONING
    assert data["status"] == "complete"
    assert data["action"] == [{"keystrokes": "ls -la\n", "duration": 1.0}]
    assert data["stats"]["stop_reason"] == "eos"
    assert data["stats"]["prompt_tokens"] == data["stats"]["evaluated_prompt_tokens"] > 0


def test_reasoning_goes_to_stderr(model: Path) -> None:
    result = predict("--model", str(model), "--reasoning", "ls")
    assert result.returncode == 0, result.stderr
    assert result.stdout == OBSERVATION + "\n"
    assert result.stderr.strip() == REASONING


def test_state_file_reaches_the_prompt(model: Path, tmp_path: Path) -> None:
    state = tmp_path / "screen.txt"
    state.write_text("root@box:/app# \n" * 20, encoding="utf-8")
    plain = json.loads(predict("--model", str(model), "--json", "ls").stdout)
    with_state = json.loads(
        predict("--model", str(model), "--json", "--state", str(state), "ls").stdout
    )
    grown = with_state["stats"]["prompt_tokens"] - plain["stats"]["prompt_tokens"]
    assert grown >= len(state.read_text())  # the byte-level test tokenizer: >= 1 per byte


def test_model_output_escape_sequences_never_reach_the_terminal(scripted_model) -> None:
    script = "plan \x1b]0;pwned\x07</think><predicted_observation>\x1b[2Jclean \u202escreen"
    result = predict("--model", str(scripted_model(script)), "--reasoning", "ls")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "clean screen\n"
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert result.stderr.strip() == "plan"


def test_no_answer_exits_non_zero_with_the_reason(scripted_model) -> None:
    model = scripted_model("thinking and thinking and never answering")
    result = predict("--model", str(model), "--max-tokens", "3", "ls")
    assert_one_line_error(result, "no answer", "max tokens")
    assert result.returncode == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "{tmp}/missing.gguf", "ls"], ["not found", "missing.gguf"]),
        (["--model", "{tmp}", "ls"], ["folder"]),
        (["--model", "{model}", "[bad json"], ["invalid action", "JSON"]),
        (["--model", "{model}", '[{"keystrokes": 5}]'], ["invalid action", "keystrokes"]),
        (["--model", "{model}", "   "], ["invalid action", "empty"]),
        (["--model", "{model}", "--domain", "nowhere", "ls"], ["unknown domain", "nowhere"]),
        (["--model", "{model}", "--state", "{tmp}/no-state.txt", "ls"], ["--state"]),
        (["ls"], ["no model configured", "--model"]),
    ],
)
def test_errors_are_one_line_without_a_traceback(
    args: list[str], expected: list[str], model: Path, tmp_path: Path
) -> None:
    filled = [a.replace("{tmp}", str(tmp_path)).replace("{model}", str(model)) for a in args]
    assert_one_line_error(predict(*filled), *expected)


def test_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"\x00" * 64)
    assert_one_line_error(predict("--model", str(fake), "ls"), "not a GGUF")


def test_a_truncated_model(model: Path) -> None:
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 3])
    assert_one_line_error(predict("--model", str(model), "ls"), "could not load", model.name)


def test_a_malformed_config_is_reported_but_does_not_stop_predict(
    model: Path, isolated_dirs: dict
) -> None:
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[generation\ntemperature = 'hot'", encoding="utf-8")
    result = predict("--model", str(model), "ls")
    assert result.returncode == 0
    assert result.stdout == OBSERVATION + "\n"
    assert result.stderr.startswith("agentworld: config:")
    assert "Traceback" not in result.stderr


HEAVY = ("textual", "llama_cpp")


@pytest.mark.parametrize("argv", [None, ["--version"], ["--help"], ["predict", "--help"]])
def test_cheap_commands_do_not_import_textual_or_llama_cpp(argv: list[str] | None) -> None:
    code = (
        "import json, sys\n"
        "import agentworld_tui.cli as cli\n"
        f"argv = {argv!r}\n"
        "if argv is not None:\n"
        "    try:\n"
        "        cli.main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "sys.stderr.write(json.dumps(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr) == []
    if argv == ["--version"]:
        assert result.stdout.startswith("agentworld ")
    elif argv is not None:
        assert "usage:" in result.stdout


def test_a_plain_start_leaves_the_sub_commands_out() -> None:
    # Flags only (a plain start, or a bad flag): the sub-commands' modules are not imported.
    code = (
        "import sys\n"
        "import agentworld_tui.cli as cli\n"
        "try:\n"
        "    cli.main(['--no-such-flag'])\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code)\n"
        "print(sorted(m for m in cli.COMMAND_MODULES if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.splitlines() == ["exit 2", "[]"]
    assert "unrecognized arguments: --no-such-flag" in result.stderr


@pytest.mark.parametrize("word", ["--help", "-h", "--he", "--h"])
def test_help_still_lists_every_sub_command(word: str, capsys: pytest.CaptureFixture[str]) -> None:
    from agentworld_tui.cli import main

    with pytest.raises(SystemExit):
        main([word])  # argparse takes any unambiguous start of --help
    shown = capsys.readouterr().out
    for command in ("predict", "export", "demo", "serve", "models", "doctor", "bench"):
        assert command in shown


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--ctx", "-5"),
        ("--ctx", "99999999999"),
        ("--gpu-layers", "-2"),
        ("--threads", "70000"),
        ("--threads", "-1"),
        ("--temperature", "nan"),
        ("--temperature", "-1"),
        ("--temperature", "inf"),
        ("--top-p", "1.5"),
        ("--top-k", "-5"),
        ("--max-tokens", "0"),
        ("--max-tokens", "-3"),
        ("--seed", "-2"),
        ("--seed", "4294967296"),
        ("--reasoning-budget", "-1"),
        ("--idle-timeout", "0"),
        ("--ctx", "1" * 5000),
        ("--max-tokens", "many"),
    ],
)
def test_numbers_out_of_range_are_refused_when_the_line_is_read(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentworld_tui.cli import main

    with pytest.raises(SystemExit) as refused:
        main(["predict", "--model", "unused.gguf", flag, value, "ls"])
    assert refused.value.code == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"agentworld predict: argument {flag}: ")
    assert "must be" in line and " from " in line and len(line) < 200
    assert captured.out == ""


def test_numbers_in_range_are_accepted() -> None:
    from agentworld_tui.cli import build_parser

    args = build_parser().parse_args(
        [
            *("predict", "--ctx", "0", "--threads", "1", "--temperature", "0", "--top-p", "1"),
            *("--top-k", "-1", "--max-tokens", "1", "--seed", "-1", "--gpu-layers", "-1"),
            *("--idle-timeout", "2.5", "--log-level", "debug", "ls"),
        ]
    )
    assert (args.ctx, args.threads, args.temperature, args.max_tokens) == (0, 1, 0.0, 1)
    assert (args.seed, args.idle_timeout, args.log_level) == (-1, 2.5, "DEBUG")


OK_REPLY = "<predicted_observation>\nfrom the server\n</predicted_observation>"


@pytest.mark.parametrize("order", ["flags first", "command first"])
def test_engine_flags_work_before_and_after_the_sub_command(order: str) -> None:
    from faultserver import FaultServer, Reply

    with FaultServer(default=Reply(content=[OK_REPLY])) as server:
        flags = ["--server", server.url, "--max-tokens", "9", "--temperature", "0.25"]
        argv = [*flags, "predict", "ls"] if order == "flags first" else ["predict", *flags, "ls"]
        result = subprocess.run(
            [sys.executable, "-m", "agentworld_tui", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "from the server\n"
        (request,) = server.chat_requests()
        assert request.body["max_tokens"] == 9 and request.body["temperature"] == 0.25


def test_a_complete_turn_s_note_is_said_on_stderr() -> None:
    from faultserver import FaultServer, Reply

    with FaultServer(default=Reply(content=[OK_REPLY])) as server:
        server.accepted = frozenset(
            {"model", "messages", "stream", "stream_options", "temperature", "top_p"}
            | {"max_tokens", "seed"}
        )
        result = predict("--server", server.url, "ls")
    assert (result.returncode, result.stdout) == (0, "from the server\n"), result.stderr
    assert result.stderr == (
        "agentworld: the server refused chat_template_kwargs, top_k; left out from now on "
        "(the thinking switch no longer reaches it)\n"
    )


def test_the_sub_command_s_own_flag_wins_over_one_given_before_it() -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.launch import merge_leading

    args = build_parser().parse_args(
        ["--temperature", "0.1", "--seed", "4", "predict", "--temperature", "0.9", "ls"]
    )
    assert merge_leading(args) is None
    assert (args.temperature, args.seed) == (0.9, 4)


@pytest.mark.parametrize(
    "argv",
    [
        ["--server", "http://x/v1", "models", "list"],
        ["--max-tokens", "7", "export", "s.json", "--format", "json"],
        ["--session", "s.json", "models", "path", "tiny"],
    ],
)
def test_flags_before_a_sub_command_that_does_not_take_them_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from agentworld_tui.cli import main

    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{argv[0]} is given before {argv[2]!r}, which does not take it" in line


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder no file can be created in, for this user (root ignores permissions, but
    not /proc)."""
    if os.geteuid() == 0:
        return Path("/proc/self")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


def test_a_failed_session_save_still_prints_the_prediction(model: Path, tmp_path: Path) -> None:
    session = unwritable_folder(tmp_path) / "run.json"
    result = predict("--model", str(model), "--session", str(session), "ls")
    assert result.stdout == OBSERVATION + "\n"  # the prediction is not thrown away
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("agentworld: the turn was not saved: cannot ")  # lock or save
    assert str(session) in line and "Traceback" not in result.stderr
    assert not session.exists()


def test_a_failed_session_save_still_prints_the_json(model: Path, tmp_path: Path) -> None:
    session = unwritable_folder(tmp_path) / "run.json"
    result = predict("--model", str(model), "--session", str(session), "--json", "ls")
    assert result.returncode == 1
    assert json.loads(result.stdout)["observation"] == OBSERVATION
    assert "the turn was not saved" in result.stderr
