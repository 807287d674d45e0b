"""Headless sessions: ``predict --session FILE`` turn after turn, and ``export``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ggufgen import CHATML_THINK_TEMPLATE

from agentworld_tui.cli import main
from agentworld_tui.domains import get_domain
from agentworld_tui.world.domain import Scenario
from agentworld_tui.world.session import new_session
from agentworld_tui.world.workspace import Workspace

SCRIPT = (
    "a listing follows</think><predicted_observation>notes.txt  src\n"
    "user@box:~$</predicted_observation>"
)


def count_prompt_tokens(model: Path, messages: list[dict[str, str]]) -> int:
    """Tokens of ``messages`` rendered with the model's chat template, counted apart from
    the app: jinja2 for the template, llama.cpp's tokenizer for the count."""
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


def predict(model: Path, session: Path, action: str, *extra: str) -> int:
    return main(
        [
            "predict",
            "--model",
            str(model),
            "--ctx",
            "4096",
            "--max-tokens",
            "96",
            "--temperature",
            "0",
            "--threads",
            "2",
            "--session",
            str(session),
            *extra,
            action,
        ]
    )


def test_predict_twice_appends_turns_and_export_prints_the_conversation(
    tmp_path: Path, scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    model = scripted_model(SCRIPT)
    state = tmp_path / "screen.txt"
    state.write_text("user@box:~$ ")
    file = tmp_path / "run" / "session.json"

    assert predict(model, file, "ls", "--state", str(state)) == 0
    assert capsys.readouterr().out == "notes.txt  src\nuser@box:~$\n"
    assert predict(model, file, "cat notes.txt", "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["turn"], printed["status"]) == (2, "complete")

    raw = json.loads(file.read_text())
    (tab,) = raw["tabs"]
    first, second = tab["turns"]
    assert first["user_message"].startswith("### Turn 1")
    assert "**Current State:**" in first["user_message"]  # --state went into turn 1
    assert '"keystrokes": "ls\\n"' in first["user_message"]
    assert first["observation"] == "notes.txt  src\nuser@box:~$"
    assert second["user_message"].startswith("### Turn 2")
    assert "**Current State:**" not in second["user_message"]

    # turn 2 was sent with turn 1's action and observation: its prompt is exactly the
    # four messages below, counted apart from the app
    with_history = [
        {"role": "system", "content": tab["system_prompt"]},
        {"role": "user", "content": first["user_message"]},
        {"role": "assistant", "content": first["observation"]},
        {"role": "user", "content": second["user_message"]},
    ]
    assert second["omitted_turns"] == 0
    sent_tokens = second["stats"]["prompt_tokens"]
    assert sent_tokens == count_prompt_tokens(model, with_history)
    assert sent_tokens > count_prompt_tokens(model, with_history[:1] + with_history[3:])
    assert first["stats"]["prompt_tokens"] == count_prompt_tokens(model, with_history[:2])

    assert main(["export", str(file), "--format", "agentworldbench"]) == 0
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 2
    last = lines[1]
    assert last["task"] == "terminal" and last["turn_idx"] == 2 and last["total_turns"] == 2
    rebuilt = [{"role": "system", "content": last["system_str"]}]
    for i in range(last["turn_idx"] - 1):
        rebuilt.append({"role": "user", "content": last["prompt"][i]})
        rebuilt.append({"role": "assistant", "content": last["response"][i]})
    rebuilt.append({"role": "user", "content": last["current_prompt"]})
    assert rebuilt == with_history

    out_file = tmp_path / "transcript.md"
    assert main(["export", str(file), "--format", "markdown", "-o", str(out_file)]) == 0
    streams = capsys.readouterr()
    assert streams.out == "" and f"wrote {out_file}" in streams.err
    assert "### Turn 2: cat notes.txt ⏎" in out_file.read_text()

    assert main(["export", str(file), "--format", "json", "--domain", "terminal"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["number"] for t in data["sessions"][0]["turns"]] == [1, 2]


def test_predict_refuses_a_bad_session_file_before_loading_any_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "newer.json"
    file.write_text(json.dumps({"format": "agentworld-session", "schema": 99, "tabs": []}))
    before = file.read_bytes()
    # no model is configured: the session file is checked first
    assert main(["predict", "--session", str(file), "ls"]) == 2
    err = capsys.readouterr().err
    assert "session format 99" in err and "upgrade" in err and err.count("\n") == 1
    assert file.read_bytes() == before


def test_predict_state_only_starts_a_new_session(
    tmp_path: Path, scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    model = scripted_model(SCRIPT)
    file = tmp_path / "s.json"
    assert predict(model, file, "ls") == 0
    before = file.read_bytes()
    state = tmp_path / "screen.txt"
    state.write_text("$ ")
    assert predict(model, file, "pwd", "--state", str(state)) == 2
    assert "--state only sets the starting state" in capsys.readouterr().err
    assert file.read_bytes() == before


def test_export_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": "agentworld-session", "schema": 1, "tabs": [')
    assert main(["export", str(damaged), "--format", "json"]) == 2
    assert "damaged (invalid JSON" in capsys.readouterr().err

    session, _ = new_session(get_domain("terminal"), Scenario("s", "S"))
    good = tmp_path / "good.json"
    Workspace([session]).save(good)
    assert main(["export", str(good), "--format", "markdown", "--domain", "web"]) == 2
    assert "has no web tab (it has: terminal)" in capsys.readouterr().err
    assert main(["export", str(good), "--format", "agentworldbench"]) == 0
    assert capsys.readouterr().out == ""  # no turns, no lines


def test_export_to_a_linked_file_writes_where_the_link_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = new_session(get_domain("terminal"), Scenario("s", "S"))
    good = tmp_path / "good.json"
    Workspace([session]).save(good)
    target = tmp_path / "notes" / "transcript.md"
    target.parent.mkdir()
    link = tmp_path / "latest.md"
    link.symlink_to(target)
    assert main(["export", str(good), "--format", "markdown", "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_text().startswith("# AgentWorld session")


def test_export_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from agentworld_tui.cli import build_parser\n"
        "try:\n"
        "    build_parser().parse_args(['export', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('textual', 'llama_cpp') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--format {agentworldbench,markdown,json}" in done.stdout
    assert done.stdout.strip().endswith("[]")


def test_export_in_a_fresh_process_knows_the_shipped_domains(tmp_path: Path) -> None:
    # The command line registers the shipped domains itself: a fresh `agentworld export`
    # (no test fixture has imported them) reads a session file like the app does.
    session, _ = new_session(get_domain("web"), Scenario("s", "S"))
    good = tmp_path / "good.json"
    Workspace([session]).save(good)
    done = subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "export", str(good), "--format", "markdown"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# AgentWorld session")
