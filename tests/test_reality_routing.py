"""Routing rules: the rule file (read from real files), the shipped defaults over every
combination of MCP annotations, and one consistent world after a simulated write."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentworld_tui.reality.routing import (
    HINTS,
    Decision,
    Route,
    Router,
    RuleFileError,
    ToolHints,
    ToolInfo,
    default_rules,
    load_rules,
    parse_rules,
)
from agentworld_tui.world.folders import shipped

BENCH = Path(__file__).resolve().parents[1] / "bench"


def tool(name: str, server: str = "", **hints: bool) -> ToolInfo:
    return ToolInfo(name, ToolHints.from_annotations(hints), server)


def write(tmp_path: Path, text: str, name: str = "routes.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the shipped defaults ---------------------------------------------------------------------
COMBINATIONS = list(itertools.product((True, False, None), repeat=4))
"""Each hint given true, given false, or absent: the 16 combinations of given hints and
every way of leaving some out (all absent: a tool with no annotations)."""


@pytest.mark.parametrize("values", COMBINATIONS, ids=lambda v: "-".join(map(str, v)))
def test_the_defaults_send_only_declared_reads_to_reality(values: tuple[bool | None, ...]) -> None:
    annotations = {h: v for h, v in zip(HINTS, values, strict=True) if v is not None}
    read_only = annotations.get("readOnlyHint") is True
    decision = Router(default_rules()).decide(tool("t", **annotations), turn=1)

    assert decision.route is (Route.REAL if read_only else Route.SIM)
    assert decision.reaches_reality is read_only
    if not annotations:
        assert decision.reason == "rule 1 (unknown): no annotations"
    elif read_only:
        assert decision.reason == "rule 2 (reads): readOnlyHint=true"
    else:
        assert decision.reason == "rule 3 (may write or act): any tool"
    assert decision.changes_state is not read_only


@pytest.mark.parametrize("odd", ["true", 1, None, [True], {"x": True}])
def test_a_hint_that_is_not_a_boolean_counts_as_absent(odd: object) -> None:
    hints = ToolHints.from_annotations({"readOnlyHint": odd, "destructiveHint": False})
    assert hints.get("readOnlyHint") is None
    assert hints.read_only is False
    decision = Router(default_rules()).decide(ToolInfo("t", hints), turn=1)
    assert decision.route is Route.SIM
    assert ToolHints.from_annotations("readOnlyHint").annotated is False


def test_the_shipped_rule_file_is_the_one_read() -> None:
    text = shipped("prompts").joinpath("mcp", "routing.toml").read_text(encoding="utf-8")
    assert parse_rules(text, "x").rules == default_rules().rules
    assert [r.route for r in default_rules().rules] == [Route.SIM, Route.REAL, Route.SIM]
    assert default_rules().default is Route.SIM


def test_tools_come_from_their_mcp_definitions() -> None:
    found = ToolInfo.from_definition(
        {"name": " read_note ", "annotations": {"readOnlyHint": True, "title": "x"}}, "notes"
    )
    assert found == ToolInfo("read_note", ToolHints((("readOnlyHint", True),)), "notes")
    assert ToolInfo.from_definition({"name": "x", "annotations": "junk"}).hints.annotated is False
    with pytest.raises(ValueError):
        ToolInfo.from_definition({"annotations": {}})


# -- rules ----------------------------------------------------------------------------------
RULES = """
version = 1
default = "shadow"

[[rule]]
name = "never"
tool = ["delete_*", "drop_*"]
route = "sim"

[[rule]]
destructiveHint = false     # explicitly not destructive
route = "real"

[[rule]]
openWorldHint = "absent"
idempotentHint = true
route = "shadow"

[[rule]]
server = "files"
openWorldHint = false
route = "real"
"""


def test_rules_match_hints_by_value_absence_name_and_server(tmp_path: Path) -> None:
    rules = load_rules(write(tmp_path, RULES))

    def decide(t: ToolInfo) -> Decision:
        return Router(rules).decide(t, turn=1)  # a fresh session: nothing simulated yet

    first = decide(tool("delete_all", destructiveHint=False))
    assert (first.route, first.rule) == (Route.SIM, 1)
    assert first.reason == "rule 1 (never): tool delete_all matches delete_* or drop_*"

    assert decide(tool("edit", destructiveHint=False)).rule == 2
    assert decide(tool("edit")).rule != 2  # absent: the spec's default, true

    shadow = decide(tool("fetch", idempotentHint=True))
    assert (shadow.route, shadow.rule) == (Route.SHADOW, 3)
    assert shadow.reason == "rule 3: idempotentHint=true, no openWorldHint"
    assert decide(tool("fetch", idempotentHint=True, openWorldHint=True)).rule == 0

    local = decide(tool("stat", "files", openWorldHint=False))
    assert (local.route, local.rule) == (Route.REAL, 4)
    assert local.reason == "rule 4: server files, openWorldHint=false"
    assert decide(tool("stat", "web", openWorldHint=False)).rule == 0

    nothing = decide(tool("other", "web"))
    assert (nothing.route, nothing.rule) == (Route.SHADOW, 0)
    assert nothing.reason == "no rule matched: the default, shadow"


def test_a_condition_on_a_default_value_says_so(tmp_path: Path) -> None:
    rules = parse_rules('[[rule]]\ndestructiveHint = true\nroute = "sim"\n')
    decision = Router(rules).decide(tool("w"), turn=1)
    assert decision.reason == "rule 1: destructiveHint=true (absent: the MCP default)"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("[[rule]]\nroute = sim\n", 2, "not valid TOML: Invalid value"),
        ("verison = 1\n", 1, "unknown key 'verison'"),
        ("version = 2\n", 1, "version must be 1, the version of rule files this program reads"),
        ('default = "live"\n', 1, "default must be one of real, sim, shadow (got 'live')"),
        (
            '[[rule]]\nroute = "real"\n\n[[rule]]\nname = "x"\nroute = "live"\n',
            6,
            "rule 2: route must be one of real, sim, shadow (got 'live')",
        ),
        ('[[rule]]\nname = "no route"\n', 1, "rule 1: route is missing"),
        (
            '[[rule]]\nroute = "sim"\nreadOnlyHint = "yes"\n',
            3,
            "rule 1: readOnlyHint must be true, false or \"absent\" (got 'yes')",
        ),
        ('[[rule]]\nroute = "sim"\nread_only = true\n', 3, "rule 1: unknown key 'read_only'"),
        (
            'default = "sim"\n\n[rules]\nx = 1\n',
            3,
            "unknown key 'rules' (known: default, on_failure, rule, version)",
        ),
        ('[[rule]]\nroute = "sim"\ntool = ""\n', 3, "rule 1: tool must not hold an empty pattern"),
        ('[[rule]]\nroute = "sim"\ntool = 3\n', 3, "rule 1: tool must be a pattern or a list"),
        (
            '[[rule]]\nroute = "sim"\nannotated = "no"\n',
            3,
            "rule 1: annotated must be true or false",
        ),
        ('[[rule]]\nroute = "sim"\non_failure = "retry"\n', 3, "rule 1: on_failure must be one of"),
        ('rule = "all"\n', 1, "rule must be written as [[rule]] tables"),
    ],
)
def test_a_rule_file_with_an_error_is_refused_with_the_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RuleFileError) as caught:
        load_rules(path)
    assert str(caught.value).startswith(f"{path}:{line}: {problem}")
    assert caught.value.problems[0][0] == line


def test_every_problem_is_listed_in_line_order(tmp_path: Path) -> None:
    text = '[[rule]]\nroute = "x"\n\n[[rule]]\nroute = "sim"\nfoo = 1\n\n[[rule]]\n'
    with pytest.raises(RuleFileError) as caught:
        parse_rules(text, "r.toml")
    assert [line for line, _ in caught.value.problems] == [2, 6, 8]
    assert str(caught.value).endswith("(and 2 more problems)")


def test_files_that_cannot_be_read_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RuleFileError, match="cannot read"):
        load_rules(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[[rule]]\nname = "caf\xe9"\nroute = "sim"\n')
    with pytest.raises(RuleFileError, match=r"latin1\.toml:2: not UTF-8 text"):
        load_rules(bad)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"#" * 1_000_001)
    with pytest.raises(RuleFileError, match="larger than"):
        load_rules(huge)
    many = "".join('[[rule]]\nroute = "sim"\n' for _ in range(1001))
    with pytest.raises(RuleFileError, match="rule must be at most 1,000 rules, not 1,001"):
        parse_rules(many)


def test_shown_values_from_a_rule_file_are_sanitized() -> None:
    with pytest.raises(RuleFileError) as caught:
        parse_rules('[[rule]]\nroute = "\\u001b]0;pwned\\u0007"\n')
    assert "\x1b" not in str(caught.value) and "\x07" not in str(caught.value)


# -- one consistent world -------------------------------------------------------------------
READ = tool("read_file", readOnlyHint=True)
WRITE = tool("write_file", readOnlyHint=False, destructiveHint=True)
LIST = tool("list_dir", readOnlyHint=True)


def test_after_a_simulated_write_the_server_is_answered_by_the_world_model() -> None:
    router = Router(default_rules())
    assert router.decide(READ, turn=1).route is Route.REAL

    write_ = router.decide(WRITE, turn=2)
    assert (write_.route, write_.changes_state) == (Route.SIM, True)

    read = router.decide(READ, turn=3)
    assert read.route is Route.SIM
    assert (read.ruled, read.rule) == (Route.REAL, 2)
    assert read.reason.startswith(
        "sim: write_file was simulated at turn 2, read_file may observe it"
    )
    assert read.forced_by is not None and read.forced_by.turn == 2
    assert read.changes_state is False  # a read changes nothing
    assert router.decide(LIST, turn=4).route is Route.SIM

    other_server = tool("read_file", "elsewhere", readOnlyHint=True)
    assert router.decide(other_server, turn=5).route is Route.REAL


def test_a_rule_narrows_what_a_simulated_write_affects(tmp_path: Path) -> None:
    rules = load_rules(
        write(
            tmp_path,
            '[[rule]]\ntool = "write_file"\nroute = "sim"\naffects = ["read_*"]\n\n'
            '[[rule]]\ntool = "notify"\nroute = "sim"\naffects = []\n\n'
            '[[rule]]\nreadOnlyHint = true\nroute = "real"\n',
        )
    )
    router = Router(rules)
    router.decide(tool("notify"), turn=1)
    assert router.changes == ()
    assert router.decide(READ, turn=2).route is Route.REAL

    router.decide(WRITE, turn=3)
    assert router.decide(READ, turn=4).route is Route.SIM
    assert router.decide(LIST, turn=5).route is Route.REAL


def test_reads_routed_to_simulation_change_nothing_and_real_writes_stay_real(
    tmp_path: Path,
) -> None:
    rules = parse_rules('[[rule]]\ntool = "list_dir"\nroute = "sim"\n\n[[rule]]\nroute = "real"\n')
    router = Router(rules)
    assert router.decide(LIST, turn=1).changes_state is False
    assert router.decide(WRITE, turn=2).route is Route.REAL
    assert router.decide(READ, turn=3).route is Route.REAL
    assert router.changes == ()


def test_a_write_the_rules_send_to_reality_is_simulated_once_the_world_forked() -> None:
    rules = parse_rules(
        '[[rule]]\ntool = "write_file"\nroute = "sim"\n\n[[rule]]\nroute = "real"\n'
    )
    router = Router(rules)
    router.decide(WRITE, turn=1)
    append = router.decide(tool("append_file"), turn=2)
    assert (append.ruled, append.route, append.changes_state) == (Route.REAL, Route.SIM, True)


def test_a_tool_known_by_name_uses_its_listed_hints() -> None:
    router = Router(default_rules(), [READ, WRITE])
    assert router.decide("read_file", turn=1).route is Route.REAL
    assert router.decide("unlisted", turn=2).reason == "rule 1 (unknown): no annotations"


def test_when_reality_fails_a_call_falls_back_or_fails_as_the_rules_say() -> None:
    rules = parse_rules(
        '[[rule]]\ntool = "pay"\nroute = "real"\non_failure = "fail"\n\n'
        '[[rule]]\nroute = "shadow"\n'
    )
    router = Router(rules)
    pay = router.decide(tool("pay"), turn=1)
    assert router.fall_back(pay, "server gone") is None
    assert router.changes == ()

    save = router.decide(WRITE, turn=2)
    fallen = router.fall_back(save, "the server ended (exit 1)")
    assert fallen is not None
    assert (fallen.route, fallen.answered, fallen.changes_state) == (Route.SIM, "sim", True)
    assert fallen.fallback == "the server ended (exit 1)"
    assert fallen.reason.startswith("sim: reality failed (the server ended (exit 1)); rule 2")
    assert router.decide(READ, turn=3).route is Route.SIM
    assert router.fall_back(fallen, "again") is None  # already simulated


def test_decisions_survive_a_session_file_and_restore_the_router() -> None:
    router = Router(default_rules())
    decisions = [
        router.decide(READ, turn=1),
        router.decide(WRITE, turn=2),
        router.decide(READ, turn=3),
    ]
    saved = json.loads(json.dumps([d.to_dict() for d in decisions]))
    back = [Decision.from_dict(d) for d in saved]
    assert back == decisions
    assert [d["answered"] for d in saved] == ["real", "sim", "sim"]

    reopened = Router(default_rules())
    reopened.restore(back)
    assert reopened.changes == router.changes
    assert reopened.decide(LIST, turn=4).route is Route.SIM

    reopened.restore(back[:1])  # a branch taken before the write
    assert reopened.decide(LIST, turn=2).route is Route.REAL


def test_a_damaged_record_reads_as_simulated() -> None:
    decision = Decision.from_dict({"route": "everywhere", "turn": "3", "rule": True})
    assert (decision.route, decision.turn, decision.rule) == (Route.SIM, 0, 0)
    assert decision.reaches_reality is False
    shadow = Decision.from_dict({"route": "shadow"})
    assert (shadow.answered, shadow.delivered) == ("both", "real")


@pytest.mark.bench
def test_the_routing_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "routing.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "routing's added latency per call" in result.stdout
    assert "p95" in result.stdout
