"""Rollouts given hostile or awkward tasks files (issue 38 items 6, 7, 10 and the tasks
file's paths): a bad task is reported with its line and the others run; resume knows a
task by its content, never by its place; a tasks file names only files in its own folder;
what is printed about a task is bounded.

The command runs in-process against real servers on 127.0.0.1: a scripted policy
(``policyserver``) and an OpenAI-compatible world model (``slotserver``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policyserver import Call, PolicyServer, Say
from slotserver import SlotServer

from agentworld_tui.agents.env import open_simulator
from agentworld_tui.agents.env.rollout import PolicySpec, RolloutSettings, run_rollout
from agentworld_tui.agents.env.tasks import load_tasks
from agentworld_tui.cli import main

LS = Call("send_keystrokes", {"keystrokes": "ls\n"})


@pytest.fixture
def world_model() -> SlotServer:
    with SlotServer(slots=4, latency=0.0) as server:
        yield server


def write_lines(path: Path, lines: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def rollout(tasks: Path, out: Path, world: str, policy: str, *more: str) -> list[str]:
    return [
        "rollout", str(tasks), "--server", world, "--policy-server", policy,
        "--out", str(out), "--parallel", "2", *more,
    ]  # fmt: skip


# -- a bad task is reported with its line; the others run ----------------------------------
def test_a_lone_surrogate_is_a_bad_task_and_the_others_run(
    world_model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            '{"id": "bad\\ud800id", "instruction": "x", "domain": "terminal"}',
            {"id": "good", "instruction": "List the files.", "domain": "terminal"},
            '{"instruction": "Say \\udfff.", "domain": "terminal"}',
            '{"instruction": "x", "domain": "terminal", "schedule": '
            '[{"calls": [1], "instruction": "\\ud83d"}]}',
        ],
    )
    found = load_tasks(tasks)
    assert [t.key for t in found.tasks] == ["good"]
    assert [p.split(":")[1] for p in found.problems] == ["1", "3", "4"]
    assert "the id holds a lone surrogate" in found.problems[0]
    assert "the instruction holds a lone surrogate" in found.problems[1]
    assert "the schedule holds a lone surrogate" in found.problems[2]
    out = tmp_path / "run"
    with PolicyServer([LS, Say("Done.")]) as policy:
        code = main(rollout(tasks, out, world_model.url, policy.url))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "tasks.jsonl:1: the id holds a lone surrogate" in err and "(left out" in err
    (record,) = records(out)
    assert record["key"] == "good#1" and record["finished"]


def test_an_episode_that_breaks_fails_alone(world_model, tmp_path: Path, monkeypatch) -> None:
    """Whatever goes wrong inside one episode fails that episode, with what happened, and
    the others are played and written."""
    from agentworld_tui.agents.env import rollout as module

    real = module.Environment

    def broken(domain: str, **kwargs: object):
        if kwargs.get("scenario") == "data-pipeline":
            raise RuntimeError("this episode cannot start")
        return real(domain, **kwargs)

    monkeypatch.setattr(module, "Environment", broken)
    tasks = load_tasks(
        write_lines(
            tmp_path / "tasks.jsonl",
            [
                {"id": "a", "instruction": "x", "domain": "terminal", "scenario": "data-pipeline"},
                {"id": "b", "instruction": "y", "domain": "terminal"},
            ],
        )
    ).tasks
    simulator = open_simulator(world_model.url)
    try:
        with PolicyServer([LS, Say("Done.")]) as policy:
            summary = run_rollout(
                tasks, simulator, PolicySpec(policy.url), RolloutSettings(out=tmp_path / "run")
            )
    finally:
        simulator.close()
    found = {r["key"]: r for r in records(tmp_path / "run")}
    assert found["b#1"]["finished"]
    assert found["a#1"]["ended"] == "crashed" and not found["a#1"]["finished"]
    assert "RuntimeError: this episode cannot start" in found["a#1"]["detail"]
    assert (summary.finished, summary.failed) == (1, 1)


# -- resume knows a task by its content ------------------------------------------------------
def test_resume_knows_id_less_tasks_by_their_content(world_model, tmp_path: Path) -> None:
    first = {"instruction": "List the files.", "domain": "terminal"}
    second = {"instruction": "Print the directory.", "domain": "terminal"}
    inserted = {"instruction": "Show the date.", "domain": "terminal"}
    path = write_lines(tmp_path / "tasks.jsonl", [first, second])
    out = tmp_path / "run"

    def play() -> None:
        simulator = open_simulator(world_model.url)
        try:
            with PolicyServer([LS, Say("Done.")]) as policy:
                run_rollout(
                    load_tasks(path).tasks,
                    simulator,
                    PolicySpec(policy.url),
                    RolloutSettings(out=out),
                )
        finally:
            simulator.close()

    play()
    write_lines(path, [inserted, first, second])
    play()
    played = [r["task"]["instruction"] for r in records(out)]
    assert sorted(played[:2]) == ["List the files.", "Print the directory."]
    assert played[2:] == ["Show the date."]  # the new task, once; nothing played twice
    keys = [r["key"] for r in records(out)]
    assert len(set(keys)) == 3
    assert [r["where"] for r in records(out)][2] == "tasks.jsonl:1"


def test_the_same_task_twice_is_reported(tmp_path: Path) -> None:
    task = {"instruction": "List the files.", "domain": "terminal"}
    spaced = {"domain": "terminal", "instruction": "List the files.  "}
    found = load_tasks(write_lines(tmp_path / "tasks.jsonl", [task, {"id": "own", **task}, spaced]))
    assert len(found.tasks) == 2
    assert found.problems == [
        "tasks.jsonl:3: the same task as tasks.jsonl:1 (give it an id to play it again, "
        "or ask for more --episodes)"
    ]


def test_two_ids_never_share_a_session_file(world_model, tmp_path: Path) -> None:
    tasks = load_tasks(
        write_lines(
            tmp_path / "tasks.jsonl",
            [
                {"id": "run/7", "instruction": "x", "domain": "terminal"},
                {"id": "run-7", "instruction": "y", "domain": "terminal"},
                {"id": "Run-7", "instruction": "z", "domain": "terminal"},
            ],
        )
    ).tasks
    simulator = open_simulator(world_model.url)
    try:
        with PolicyServer([LS, Say("Done.")]) as policy:
            run_rollout(tasks, simulator, PolicySpec(policy.url), RolloutSettings(out=tmp_path))
    finally:
        simulator.close()
    files = [r["session_file"] for r in records(tmp_path)]
    assert len({f.lower() for f in files}) == 3
    assert all((tmp_path / f).is_file() for f in files)


# -- a tasks file names only files in its own folder ------------------------------------------
def test_a_tasks_file_names_files_only_inside_its_folder(
    world_model, tmp_path: Path, monkeypatch
) -> None:
    secret = tmp_path / "creds.json"
    secret.write_text('{"state": "TOP SECRET"}')
    folder = tmp_path / "tasks"
    (folder / "scenarios").mkdir(parents=True)
    (folder / "scenarios" / "shop.toml").write_text(
        'name = "shop"\nstate = "root@shop:/srv# "\n', encoding="utf-8"
    )
    (folder / "link.json").symlink_to(secret)
    (folder / "world.toml").symlink_to(tmp_path / "elsewhere.toml")
    lines = [
        {"id": "up", "instruction": "x", "domain": "terminal", "scenario": "../creds.json"},
        {"id": "abs", "instruction": "x", "domain": "terminal", "scenario": str(secret)},
        {"id": "link", "instruction": "x", "domain": "terminal", "scenario": "link.json"},
        {"id": "world", "instruction": "x", "domain": "search", "world": "world.toml"},
        {"id": "ok", "instruction": "x", "domain": "terminal", "scenario": "scenarios/shop.toml"},
        {"id": "named", "instruction": "x", "domain": "terminal", "scenario": "web-server"},
    ]
    path = write_lines(folder / "tasks.jsonl", lines)
    monkeypatch.chdir(tmp_path)  # paths are the tasks file's, not the working folder's
    found = load_tasks(path)
    assert [t.key for t in found.tasks] == ["ok", "named"]
    assert [p.split(":")[1] for p in found.problems] == ["1", "2", "3", "4"]
    assert all(
        "outside the tasks file's folder" in p for p in found.problems[:1] + found.problems[2:]
    )
    assert "an absolute path" in found.problems[1]
    out = tmp_path / "run"
    with PolicyServer([Say("Done.")]) as policy:
        simulator = open_simulator(world_model.url)
        try:
            run_rollout(found.tasks, simulator, PolicySpec(policy.url), RolloutSettings(out=out))
        finally:
            simulator.close()
        sent = json.dumps(policy.requests)
    assert "root@shop:/srv#" in sent and "TOP SECRET" not in sent
    kept = {r["key"]: r for r in records(out)}
    assert kept["ok#1"]["task"]["scenario"] == "scenarios/shop.toml"


# -- what is printed about a task is bounded -------------------------------------------------
def test_a_huge_task_id_is_printed_bounded(
    world_model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "x" * 10_000
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            {"id": huge, "instruction": "x", "domain": "terminal"},
            {"id": huge, "instruction": "y", "domain": "terminal"},
            {"id": "\x1b]0;owned\x07" + "y" * 500, "instruction": "z", "domain": "tty" + huge},
        ],
    )
    with PolicyServer([LS, Say("Done.")]) as policy:
        code = main(rollout(tasks, tmp_path / "run", world_model.url, policy.url))
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("x" * 80) >= 2  # the id is named...
    assert "x" * 300 not in err  # ...never whole
    assert max(len(line) for line in err.splitlines()) < 400
    assert "\x1b" not in err


# -- what a run tells as it goes (issue 44, minor items) -------------------------------------
def test_each_step_is_told_as_it_ends_and_the_step_limit_is_explained(
    world_model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            {"id": "own", "instruction": "x", "domain": "terminal", "max_steps": 2},
            {"id": "refused", "instruction": "y", "domain": "terminal", "max_steps": 2},
        ],
    )
    script = lambda body: (  # noqa: E731
        Call("send_keystrokes", {"keystrokes": ""}) if '"y' in json.dumps(body) else LS
    )
    with PolicyServer(script) as policy:
        code = main(
            rollout(tasks, tmp_path / "run", world_model.url, policy.url, "--max-steps", "5")
        )
    err = capsys.readouterr().err.splitlines()
    assert code == 0, err
    assert any("2 tasks set their own max_steps, which wins over --max-steps 5" in e for e in err)
    own = [e for e in err if e.startswith("agentworld: own#1")]
    assert own[0].startswith("agentworld: own#1 step 1: send_keystrokes: complete (64 tokens,")
    assert own[1].startswith("agentworld: own#1 step 2: send_keystrokes: complete")
    assert own[2] == "agentworld: own#1: step_limit after 2 steps"
    refused = [e for e in err if e.startswith("agentworld: refused#1")]
    assert refused[0].startswith(
        "agentworld: refused#1 step 1: send_keystrokes: refused: entry 1: "
    )
    assert refused[-1] == (
        "agentworld: refused#1: step_limit after 2 tool calls, all refused "
        "(the environment took none)"
    )
    kept = {r["key"]: r for r in records(tmp_path / "run")}
    assert kept["refused#1"]["detail"] == "2 tool calls, 2 of them refused"
    assert kept["refused#1"]["session_file"] is None  # nothing was simulated: no file
    assert (tmp_path / "run" / kept["own#1"]["session_file"]).is_file()


def test_the_policy_s_tool_choice_is_sent(world_model, tmp_path: Path) -> None:
    tasks = [
        load_tasks(
            write_lines(
                tmp_path / "t.jsonl", [{"id": "a", "instruction": "x", "domain": "terminal"}]
            )
        ).tasks[0]
    ]
    sent = {}
    for choice in ("", "required", "send_keystrokes"):
        simulator = open_simulator(world_model.url)
        try:
            with PolicyServer([Say("Done.")]) as policy:
                run_rollout(
                    tasks,
                    simulator,
                    PolicySpec(policy.url, tool_choice=choice),
                    RolloutSettings(out=tmp_path / (choice or "none")),
                )
                sent[choice] = policy.requests[0].get("tool_choice")
        finally:
            simulator.close()
    assert sent == {
        "": None,
        "required": "required",
        "send_keystrokes": {"type": "function", "function": {"name": "send_keystrokes"}},
    }


def test_a_tool_choice_no_task_offers_is_refused_before_the_run(
    world_model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [{"id": "a", "instruction": "x", "domain": "terminal"}],
    )
    with PolicyServer([LS]) as policy:
        code = main(
            rollout(
                tasks,
                tmp_path / "run",
                world_model.url,
                policy.url,
                "--policy-tool-choice",
                "browser_action",
            )
        )
        assert policy.requests == []
    err = capsys.readouterr().err
    assert code == 2
    assert "the tool choice 'browser_action' is no tool of task a (terminal: it offers " in err
    assert "send_keystrokes" in err


def test_a_world_model_that_never_closes_its_reasoning_points_at_the_thinking_switch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from faultserver import FaultServer, Reply

    tasks = write_lines(
        tmp_path / "tasks.jsonl", [{"id": "a", "instruction": "x", "domain": "terminal"}]
    )
    with (
        FaultServer(default=Reply(content=["root@box:/app# ls\nindex.html\n"])) as world,
        PolicyServer([LS, LS, Say("Done.")]) as policy,
    ):
        code = main(rollout(tasks, tmp_path / "run", world.url, policy.url))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "no answer: the model stopped while reasoning (end of text)" in err
    assert err.count("hint: the world model ended without closing its reasoning") == 1
    assert "warning: 2 steps gave no answer:" in err and "--no-thinking" in err
    (record,) = records(tmp_path / "run")
    assert all("--no-thinking" in step["hint"] for step in record["steps"])


def test_no_lock_file_is_left_in_the_run_s_folder(world_model, tmp_path: Path) -> None:
    tasks = load_tasks(
        write_lines(
            tmp_path / "tasks.jsonl",
            [{"id": n, "instruction": "x", "domain": "terminal"} for n in ("a", "b", "c")],
        )
    ).tasks
    simulator = open_simulator(world_model.url)
    try:
        with PolicyServer([LS, LS, Say("Done.")]) as policy:
            run_rollout(
                tasks, simulator, PolicySpec(policy.url), RolloutSettings(out=tmp_path / "run")
            )
    finally:
        simulator.close()
    left = sorted(p.name for p in (tmp_path / "run").rglob("*") if p.name.endswith(".lock"))
    assert left == []
    assert len(list((tmp_path / "run" / "sessions").glob("*.json"))) == 3
