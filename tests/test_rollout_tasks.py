"""Rollout tasks files (issue 30 item 4): JSONL and TOML, every bad task reported with its
line and what is wrong while the others are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentworld_tui.agents.env.tasks import TasksError, load_tasks

GOOD = {"id": "a", "instruction": "List the files.", "domain": "terminal"}


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_bad_lines_are_reported_by_line_and_the_rest_is_kept(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "tasks.jsonl",
        [
            GOOD,
            "{not json",
            {"instruction": "No domain."},
            {"instruction": "x", "domain": "tty"},
            {"instruction": "x", "domain": "terminal", "scenario": "moon"},
            {
                "instruction": "x",
                "domain": "terminal",
                "schedule": [{"calls": [1], "preset": "nope"}],
            },
            {"id": "a", "instruction": "Again.", "domain": "terminal"},
            {"instruction": "x", "domain": "web", "reward": 1},
            "",
            {"instruction": "  ", "domain": "web"},
            {"instruction": "x", "domain": "search", "world": "atlantis"},
            {"instruction": "x", "domain": "os", "max_steps": 0},
            {"instruction": "Search.", "domain": "search", "world": "harrowmere", "max_steps": 5},
            [1, 2],
        ],
    )
    found = load_tasks(path)
    assert len(found.tasks) == 2 and found.tasks[0].key == "a"
    assert found.tasks[1].key.startswith("task-") and found.tasks[1].where == "tasks.jsonl:13"
    assert found.tasks[1].world == "harrowmere" and found.tasks[1].max_steps == 5
    problems = found.problems
    assert [p.split(":")[1] for p in problems] == [
        "2", "3", "4", "5", "6", "7", "8", "10", "11", "12", "14",
    ]  # fmt: skip
    assert problems[0].startswith("tasks.jsonl:2: not valid JSON")
    assert problems[1] == "tasks.jsonl:3: the domain is missing"
    assert problems[2].startswith("tasks.jsonl:4: unknown domain 'tty'; choose from terminal")
    assert problems[3].startswith("tasks.jsonl:5: terminal has no scenario 'moon'")
    assert "schedule: rule 1: no terminal perturbation named 'nope'" in problems[4]
    assert problems[5] == "tasks.jsonl:7: the id 'a' is already used by another task"
    assert problems[6].startswith("tasks.jsonl:8: unknown key 'reward'")
    assert problems[7] == "tasks.jsonl:10: the instruction is missing or empty"
    assert "no fictional world 'atlantis'" in problems[8]
    assert "max_steps must be a whole number from 1" in problems[9]
    assert problems[10] == "tasks.jsonl:14: a task is a JSON object"


def test_toml_tasks(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(
        '[[task]]\nid = "fix"\ninstruction = "Fix the build."\ndomain = "terminal"\n'
        'scenario = "data-pipeline"\n[[task.schedule]]\ncalls = [2]\npreset = "disk-full"\n\n'
        '[[task]]\ninstruction = "Nothing else."\n'
    )
    found = load_tasks(path)
    assert [t.key for t in found.tasks] == ["fix"]
    assert found.tasks[0].schedule == {"seed": 0, "rule": [{"calls": [2], "preset": "disk-full"}]}
    assert found.problems == ["tasks.toml: task 2: the domain is missing"]


def test_a_file_that_cannot_be_read_at_all(tmp_path: Path) -> None:
    with pytest.raises(TasksError, match="no such file"):
        load_tasks(tmp_path / "missing.jsonl")
    broken = tmp_path / "broken.toml"
    broken.write_text("[[task]\n")
    with pytest.raises(TasksError, match="not valid TOML"):
        load_tasks(broken)
