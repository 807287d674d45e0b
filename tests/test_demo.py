"""``agentworld demo``: a script typed into the real app (headless) on a scripted tiny
model, every turn awaited, an SVG saved after each action; bad scripts refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ggufgen import write_scripted_model
from test_wheel import wheel  # noqa: F401  (the built wheel, a fixture)

from agentworld_tui.cli import main
from agentworld_tui.domains import DOMAINS
from agentworld_tui.ui.demo_script import DemoScriptError, load_demo
from agentworld_tui.world.prompts import load_scenarios
from agentworld_tui.world.workspace import load_workspace

SCRIPT = "ok</think><predicted_observation>alpha output\n$</predicted_observation>"

DEMO = """
chars_per_second = 400
pause = 0.1
start_pause = 0

[[tab]]
domain = "terminal"
scenario = "web-server"
actions = ["ls", { type = "echo hi", press = ["f2"] }, { type = "pwd", pause = 0.2 }]

[[tab]]
domain = "mcp"
actions = ['''{
  "name": "read_text_file",
  "arguments": {"path": "/home/maya/notes/inbox.md"}
}''']
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Byte-level tokens make the MCP system prompt long: give the model room.
    path = tmp_path_factory.mktemp("m") / "alpha.gguf"
    return write_scripted_model(path, SCRIPT, n_ctx_train=16384)


def run_demo(script: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", "demo", str(script), "--headless", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )


def test_demo_types_each_action_waits_for_it_and_saves_screenshots(
    model: Path, tmp_path: Path
) -> None:
    script = tmp_path / "demo.toml"
    script.write_text(DEMO, encoding="utf-8")
    shots, session = tmp_path / "shots", tmp_path / "demo-session.json"
    done = run_demo(
        script,
        "--model", str(model), "--threads", "2", "--size", "110x32",
        "--screenshots", str(shots), "--session", str(session),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in shots.iterdir())
    # One picture per action, the queued line included (it starts no turn of its own).
    assert names == ["01-terminal-1.svg", "02-terminal-2.svg", "03-terminal-3.svg", "04-mcp-1.svg"]
    first = (shots / "01-terminal-1.svg").read_text("utf-8")
    assert first.lstrip().startswith("<svg") and "alpha" in first
    assert "agentworld&#160;·&#160;terminal-1" in first or "agentworld · terminal-1" in first
    assert "screenshot" in done.stderr and "04-mcp-1.svg" in done.stderr

    tabs = {s.domain.name: s for s in load_workspace(session).tabs}
    terminal = tabs["terminal"]
    assert terminal.scenario.name == "web-server"
    assert [t.action.payload for t in terminal.turns] == [
        [{"keystrokes": "ls\n", "duration": 1.0}],
        [{"keystrokes": "echo hi\n", "duration": 1.0}, {"keystrokes": "pwd\n", "duration": 1.0}],
    ]
    assert all(
        t.status == "complete" and t.observation == "alpha output\n$" for t in terminal.turns
    )
    # The multi-line call went in key by key and reads back as the same call.
    (mcp_turn,) = tabs["mcp"].turns
    assert mcp_turn.action.payload == {
        "name": "read_text_file",
        "arguments": {"path": "/home/maya/notes/inbox.md"},
    }
    assert mcp_turn.status == "complete"


def test_an_action_the_tab_refuses_stops_the_demo_with_the_reason(
    model: Path, tmp_path: Path
) -> None:
    script = tmp_path / "bad.toml"
    script.write_text(
        'chars_per_second = 0\npause = 0\n[[tab]]\ndomain = "mcp"\nactions = ["{oops"]\n',
        encoding="utf-8",
    )
    done = run_demo(script, "--model", str(model), "--threads", "2")
    assert done.returncode == 1
    assert "demo stopped: mcp action 1: the tab refused it: invalid JSON" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[tab]]\ndomain = "kitchen"\n', "tab 1: domain must be one of terminal, mcp"),
        ('[[tab]]\ndomain = "web"\nscenario = "moon"\n', "no web scenario 'moon' (ready ones: "),
        ('[[tab]]\ndomain = "os"\nactions = [{ typo = "x" }]\n', "unknown key 'typo'"),
        ('[[tab]]\ndomain = "os"\nactions = [{ pause = 1 }]\n', "nothing to type"),
        ('pause = -1\n[[tab]]\ndomain = "os"\n', "pause must be between 0 and 600"),
        ("chars_per_second = 'fast'\n", "chars_per_second must be a number"),
        ("speed = 3\n", "unknown key 'speed'"),
        ("", "no [[tab]] tables"),
        ("[[tab]\n", "not valid TOML"),
    ],
)
def test_bad_scripts_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    script = tmp_path / "demo.toml"
    script.write_text(text, encoding="utf-8")
    with pytest.raises(DemoScriptError, match=None) as raised:
        load_demo(script)
    assert message in str(raised.value)
    assert main(["demo", str(script), "--model", "unused.gguf"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_script_and_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "none.toml")]) == 2
    assert "none.toml: no such file" in capsys.readouterr().err
    script = tmp_path / "ok.toml"
    script.write_text('[[tab]]\ndomain = "terminal"\nactions = ["ls"]\n', encoding="utf-8")
    assert main(["demo", str(script), "--headless", "--stay"]) == 2
    assert "--stay needs the app on screen" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", str(script), "--size", "huge"])
    assert "WIDTHxHEIGHT" in capsys.readouterr().err
    # Without a model the demo says how to give one, before any window opens.
    assert main(["demo", str(script)]) == 2
    assert "no model configured" in capsys.readouterr().err


def test_shipped_example_script_is_valid() -> None:
    example = Path(__file__).resolve().parent.parent / "screenshots" / "demo.toml"
    script = load_demo(example)
    assert {t.domain for t in script.tabs} >= {"terminal", "mcp"}
    assert script.steps == sum(len(t.actions) for t in script.tabs) > 0
    for tab in script.tabs:
        scenario = next(s for s in load_scenarios(tab.domain)[0] if s.name == tab.scenario)
        for action in tab.actions:  # every action is one its tab accepts
            DOMAINS[tab.domain].parse_action(action.text, scenario)


def test_the_shipped_examples_are_valid_and_listed() -> None:
    from agentworld_tui.ui.demo_script import SHIPPED_DEMOS, shipped_demo

    folder = shipped_demo(SHIPPED_DEMOS[0]).parent
    assert sorted(p.stem for p in folder.glob("*.toml")) == sorted(SHIPPED_DEMOS)
    for name in SHIPPED_DEMOS:
        script = load_demo(shipped_demo(name))
        assert script.steps > 0
        for tab in script.tabs:
            scenario = next(s for s in load_scenarios(tab.domain)[0] if s.name == tab.scenario)
            for action in tab.actions:
                DOMAINS[tab.domain].parse_action(action.text, scenario)


def test_a_shipped_example_is_played_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentworld_tui.ui.demo_script import demo_script_path, shipped_demo

    monkeypatch.chdir(tmp_path)
    assert demo_script_path("tour") == shipped_demo("tour")
    # Found and checked: what stops it now is the missing model, not a missing file.
    assert main(["demo", "tour"]) == 2
    assert "no model configured" in capsys.readouterr().err
    (tmp_path / "tour").write_text("# a file of that name wins\n", encoding="utf-8")
    assert demo_script_path("tour") == Path("tour")
    assert main(["demo", "nosuch"]) == 2
    assert "nosuch: no such file" in capsys.readouterr().err


def test_demo_help_explains_the_format_and_the_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import tomllib

    from agentworld_tui.ui.demo_script import SHIPPED_DEMOS, parse_demo

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    shown = capsys.readouterr().out
    for part in ("[[tab]]", "chars_per_second", "start_pause", "press", "scenario"):
        assert part in shown
    for name in SHIPPED_DEMOS:
        assert f"agentworld demo {name} --model" in shown
    # The format shown is itself a script that plays.
    example = shown.split("A demo script is a TOML file:\n", 1)[1].split("\nAn action", 1)[0]
    script = parse_demo(tomllib.loads(example), "the help's example")
    assert script.tabs[0].domain == "terminal" and script.steps == 3


def test_the_wheel_ships_the_examples_and_textual_serve(wheel: Path) -> None:  # noqa: F811
    import zipfile

    from agentworld_tui.cli.demo import SHIPPED_DEMOS

    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert {f"agentworld_tui/demos/{n}.toml" for n in SHIPPED_DEMOS} <= names
    metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    requires = [
        line for line in metadata.decode().splitlines() if line.startswith("Requires-Dist:")
    ]
    assert any("textual-serve" in line and "extra ==" not in line for line in requires)
    assert any(line.startswith("Requires-Dist: tomlkit") for line in requires)
