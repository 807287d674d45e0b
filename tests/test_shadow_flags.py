"""The twin flags every front-end adds: parsed into reality's ``TwinSpec`` (which the app
and the Python environment build too), started for real (a sandbox, a real MCP server),
and every mistake or a twin that cannot start said in one line."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import pytest
from realitykit import any_backend

from agentworld_tui.cli.launch import UserError
from agentworld_tui.cli.twin_flags import add_twin_flags, shadow_from_args, twin_spec_from_args
from agentworld_tui.reality import TwinSpec, TwinStatus
from agentworld_tui.reality.spec import public_command, public_url

TWIN_SERVER = str(Path(__file__).resolve().parent / "twinserver.py")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="agentworld x", exit_on_error=False)
    add_twin_flags(parser)
    return parser.parse_args(list(argv))


def test_no_twin_flag_is_no_twin() -> None:
    assert twin_spec_from_args(parse(), "terminal") is None
    assert shadow_from_args(parse(), "web") is None


def test_a_sandbox_twin_s_flags_make_its_spec(tmp_path: Path) -> None:
    spec = twin_spec_from_args(
        parse("--twin", "bwrap", "--twin-seed", str(tmp_path), "--twin-network"), "swe"
    )
    assert spec == TwinSpec("swe", seed=str(tmp_path), backend="bwrap", network=True)
    assert spec.describe() == {
        "domain": "swe",
        "kind": "sandbox",
        "backend": "bwrap",
        "seed": str(tmp_path.resolve()),
        "workdir": "/testbed",
        "network": True,
    }
    host = twin_spec_from_args(parse("--twin-on-host"), "terminal")
    assert host == TwinSpec("terminal", on_host=True)
    assert host.sandbox_options().backend == "host" and host.sandbox_options().unsafe_host
    assert host.describe()["kind"] == "host"


def test_an_mcp_twin_s_flags_make_its_spec_and_its_description_keeps_no_secret() -> None:
    command = f"{sys.executable} server.py --api-key sk-123 --token=abc DB_PASSWORD=pw --verbose"
    spec = twin_spec_from_args(parse("--twin-command", command), "mcp")
    assert spec is not None and spec.command == tuple(shlex.split(command))
    assert spec.describe() == {
        "domain": "mcp",
        "kind": "mcp-command",
        "command": [
            sys.executable,
            "server.py",
            "--api-key",
            "***",
            "--token=***",
            "DB_PASSWORD=***",
            "--verbose",
        ],
    }
    url = twin_spec_from_args(parse("--twin-url", "https://me:pw@tools.example/mcp?key=1"), "mcp")
    assert url is not None and url.describe()["url"] == "https://tools.example/mcp"
    assert public_url("http://[::1]:8080/mcp#x") == "http://[::1]:8080/mcp"
    assert public_command(["srv", "--url", "http://u:p@h/x?token=t"]) == [
        "srv",
        "--url",
        "http://h/x",
    ]


@pytest.mark.parametrize(
    ("argv", "domain", "said"),
    [
        (("--twin",), "web", "the web domain has no twin (twins exist for terminal, swe, mcp)"),
        (("--twin",), "android", "the android domain has no twin"),
        (("--twin-url", "http://h/mcp"), "search", "the search domain has no twin"),
        (
            ("--twin",),
            "mcp",
            "the mcp twin is a real server: give --twin-command CMD or --twin-url URL",
        ),
        (("--twin-command", "x", "--twin-seed", "."), "mcp", "--twin-seed is for terminal and swe"),
        (("--twin-command", "x", "--check", "true"), "mcp", "--check runs in a sandbox"),
        (
            ("--twin-command", "x", "--twin-url", "http://h/"),
            "mcp",
            "its command or its URL, not both",
        ),
        (("--twin-url", "ftp://h/"), "mcp", "must start with http:// or https://"),
        (("--twin-command", "'unclosed"), "mcp", "--twin-command: No closing quotation"),
        (("--twin-command", ""), "mcp", "--twin-command is empty"),
        (("--twin-command", "srv"), "terminal", "--twin-command is for mcp twins"),
        (("--twin", "bwrap", "--twin-on-host"), "terminal", "exclude each other"),
        (("--twin", "bwrap", "--twin-image", "img"), "terminal", "needs podman or docker"),
        (("--twin", "--twin-seed", "/no/such/folder"), "swe", "not a folder: /no/such/folder"),
        (("--deliver", "sim"), "terminal", "--deliver goes with a twin"),
        (("--check", "true"), "terminal", "--check goes with a twin"),
        (("--twin-seed", "."), "swe", "--twin-seed goes with a twin"),
    ],
)
def test_flags_that_do_not_fit_are_one_line(argv: tuple[str, ...], domain: str, said: str) -> None:
    with pytest.raises(UserError) as caught:
        twin_spec_from_args(parse(*argv), domain)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_terminal_twin_starts_in_a_sandbox_from_the_flags(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi")
    args = parse(
        "--twin", any_backend(), "--twin-seed", str(tmp_path), "--deliver", "sim", "--check", "true"
    )
    shadow = shadow_from_args(args, "terminal")
    assert shadow is not None
    try:
        assert (shadow.deliver, shadow.check) == ("sim", "true")
        assert shadow.first is not None and shadow.first.text.rstrip().endswith(":/app#")
        seen = shadow.runner.check("cat hello.txt")
        assert (seen.passed, seen.output) == (True, "hi")
        assert shadow.describe()["check"] == {"command": "true"}
    finally:
        shadow.runner.close()


def test_an_mcp_twin_starts_from_the_flags_and_one_that_cannot_says_why(tmp_path: Path) -> None:
    command = shlex.join([sys.executable, TWIN_SERVER, "stdio", str(tmp_path)])
    shadow = shadow_from_args(parse("--twin-command", command), "mcp")
    assert shadow is not None
    try:
        assert shadow.deliver == "real"
        assert shadow.first is not None and shadow.first.status is TwinStatus.OK
    finally:
        shadow.runner.close()
    with pytest.raises(UserError) as caught:
        shadow_from_args(parse("--twin-command", str(tmp_path / "no-such-program")), "mcp")
    said = str(caught.value)
    assert said.startswith("the mcp twin did not start: ") and "\n" not in said


def test_a_sandbox_that_does_not_work_refuses_the_twin_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentworld_tui.reality.sandbox import clear_probes

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap, no unshare, no container client
    clear_probes()
    try:
        with pytest.raises(UserError) as caught:
            shadow_from_args(parse("--twin"), "terminal")
    finally:
        monkeypatch.undo()
        clear_probes()
    said = str(caught.value)
    assert said.startswith("the terminal twin did not start: no sandbox works here (")
    assert "--twin-on-host" in said and "\n" not in said
