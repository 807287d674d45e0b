"""Every schedule the docs show is one the code reads: the MCP file, the environment's
inline rules and the rollout tasks' schedules are the same format."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

from agentworld_tui.agents.env.tasks import check_task
from agentworld_tui.agents.schedule import parse_schedule

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_schedule_file_in_agents_md_reads() -> None:
    text = (DOCS / "agents.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[[rule]]" in b]
    assert blocks
    for block in blocks:
        schedule = parse_schedule(tomllib.loads(block), "mcp")
        assert schedule.seed == 7 and len(schedule.rules) == 2


def test_the_schedules_in_training_md_read() -> None:
    text = (DOCS / "training.md").read_text(encoding="utf-8")
    inline = re.findall(r"schedule=(\[.*\]),(?:\s*#.*)?$", text, re.M)
    assert inline
    for value in inline:
        assert parse_schedule(ast.literal_eval(value), "terminal")
    tasks = [json.loads(line) for line in re.findall(r"^\{.*\"schedule\".*\}$", text, re.M)]
    assert tasks
    for task in tasks:
        assert check_task(task, "training.md").schedule["rule"]
