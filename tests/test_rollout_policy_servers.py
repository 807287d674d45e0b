"""Rollouts against a real llama-cpp-python policy server (issue 44 item 3, issue 39 item 9).

``python -m llama_cpp.server`` serves a scripted GGUF whose every answer is the JSON of a
``send_keystrokes`` call. With the chat format the model file names (the server's
default), it fills ``tool_calls`` only when the request names the tool as its
``tool_choice``: without one (or with "auto" or "required") the call arrives as prose and
no episode takes a step. With ``--chat_format chatml-function-calling`` "auto" works too,
and "required" answers HTTP 500. The run says so, and names what to do.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import free_port
from ggufgen import write_scripted_model
from slotserver import SlotServer

from agentworld_tui.cli import main

START_LIMIT_S = 120.0
CALL = '{"keystrokes": "ls\\n"}'


def serve(folder: Path, *flags: str) -> Iterator[str]:
    model = write_scripted_model(folder / "policy.gguf", CALL)
    port = free_port()
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            "scripted-policy",
            "--n_ctx",
            "4096",
            "--n_threads",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *flags,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + START_LIMIT_S
    try:
        while True:
            if process.poll() is not None:
                log.flush()
                pytest.fail(f"llama_cpp.server exited: {(folder / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "llama_cpp.server did not become ready"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def llama_policy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The model file's own chat format (the server's default)."""
    yield from serve(tmp_path_factory.mktemp("llama-policy"))


@pytest.fixture(scope="module")
def function_calling_policy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(
        tmp_path_factory.mktemp("llama-policy-fc"), "--chat_format", "chatml-function-calling"
    )


@pytest.fixture(scope="module")
def world_model() -> Iterator[SlotServer]:
    with SlotServer(slots=2, latency=0.0) as server:
        yield server


def run(tmp_path: Path, world: str, policy: str, *more: str) -> tuple[int, list[dict], str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "look", "instruction": "List the files.", "domain": "terminal"}) + "\n"
    )
    out = tmp_path / "run"
    code = main(
        [
            "rollout",
            str(tasks),
            "--server",
            world,
            "--policy-server",
            policy,
            "--out",
            str(out),
            "--max-steps",
            "2",
            "--parallel",
            "1",
            *more,
        ]
    )
    lines = (out / "episodes.jsonl").read_text().splitlines()
    return code, [json.loads(line) for line in lines], str(out)


def test_without_a_tool_choice_no_step_is_taken_and_the_run_says_why(
    llama_policy: str, world_model: SlotServer, tmp_path: Path, capsys
) -> None:
    code, (record,), _out = run(tmp_path, world_model.url, llama_policy)
    err = capsys.readouterr().err
    assert code == 0
    assert (record["ended"], record["steps"]) == ("no_tool_call", [])
    assert json.loads(record["detail"]) == {"keystrokes": "ls\n"}  # the call, as prose
    assert "warning: no episode made a tool call" in err
    assert "--policy-tool-choice TOOL" in err and "llama_cpp.server" in err


def test_a_named_tool_choice_makes_llama_cpp_python_call_it(
    llama_policy: str, world_model: SlotServer, tmp_path: Path, capsys
) -> None:
    code, (record,), _out = run(
        tmp_path, world_model.url, llama_policy, "--policy-tool-choice", "send_keystrokes"
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert record["ended"] == "step_limit" and len(record["steps"]) == 2
    assert [s["action"][0]["keystrokes"] for s in record["steps"]] == ["ls\n"] * 2
    assert "no episode made a tool call" not in err


def test_auto_and_required_are_prose_with_the_model_s_chat_format(
    llama_policy: str, world_model: SlotServer, tmp_path: Path, capsys
) -> None:
    for choice in ("auto", "required"):
        code, (record,), _out = run(
            tmp_path / choice, world_model.url, llama_policy, "--policy-tool-choice", choice
        )
        assert code == 0 and (record["ended"], record["steps"]) == ("no_tool_call", [])
        assert "warning: no episode made a tool call" in capsys.readouterr().err


def test_with_chatml_function_calling_auto_works(
    function_calling_policy: str, world_model: SlotServer, tmp_path: Path, capsys
) -> None:
    code, (record,), _out = run(
        tmp_path, world_model.url, function_calling_policy, "--policy-tool-choice", "auto"
    )
    assert code == 0, capsys.readouterr().err
    assert record["ended"] == "step_limit" and len(record["steps"]) == 2


def test_required_fails_there_and_the_run_names_the_way_out(
    function_calling_policy: str, world_model: SlotServer, tmp_path: Path, capsys
) -> None:
    code, (record,), _out = run(
        tmp_path, world_model.url, function_calling_policy, "--policy-tool-choice", "required"
    )
    err = capsys.readouterr().err
    assert code == 1
    assert record["ended"] == "policy_error" and "500" in record["detail"]
    assert "warning: the policy server failed with tool_choice 'required'" in err
    assert "--policy-tool-choice send_keystrokes" in err
