"""``agentworld predict`` for every domain, on a scripted GGUF model run by real llama.cpp.

The scripted model writes its reasoning, then the observation in tags, whatever the prompt:
what these tests show is that each domain's action, written as that domain writes it on the
command line, goes through validation, the session and the engine, and that the
observation comes back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentworld_tui import cli
from agentworld_tui.world.sanitize import sanitize

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
ENGINE_FLAGS = ["--ctx", "8192", "--max-tokens", "300", "--threads", "2"]

# Small starting states, each in the file form its domain is usually given: prompt
# evaluation on the CPU grows with the prompt, so the shipped scenarios (several thousand
# tokens each) are used only where they are the point.
STATE_FILES: dict[str, tuple[str, str]] = {
    "web": (
        "page.toml",
        """[[scenario]]
name = "tiny-shop"
description = "A tiny shop."
goal = "Buy the pack."
state = '''
RootWebArea 'Pack', focused
\t[a36] button 'Add to cart'
\t[a18] link 'Cart (0)'
'''
""",
    ),
    "android": (
        "screen.xml",
        '<hierarchy><node class="android.widget.Button" text="Sign in" clickable="true" '
        'bounds="[90,1560][990,1710]" /></hierarchy>',
    ),
    "swe": (
        "repo.toml",
        'description = "A Python repo in /testbed."\ntask = "Fix the slug bug."\n'
        'state = "/testbed\\n  slug.py"\n',
    ),
    "os": (
        "desktop.toml",
        'instruction = "Save the file."\nstate = "tag\\tname\\npush-button\\tSave"\n',
    ),
}

CASES: dict[str, tuple[str, str]] = {
    # domain: (action as written on the command line, observation the model writes)
    "terminal": ("ls", "user@devbox:~/project$ ls\nREADME.md  src\nuser@devbox:~/project$"),
    "mcp": (
        '{"name": "list_directory", "arguments": {"path": "/home/maya/notes"}}',
        "[FILE] inbox.md\n[DIR] journal\n[DIR] projects",
    ),
    "web": ('click("a36")', "RootWebArea 'Pack', focused\n\t[a18] link 'Cart (1)'"),
    "android": (
        '{"action": "tap", "element": "Sign in", "x": 540, "y": 1635}',
        '<hierarchy><node class="android.widget.TextView" text="Chats" '
        'bounds="[0,0][1080,200]" /></hierarchy>',
    ),
    "search": (
        '{"name": "web_search", "arguments": {"query": ["Kvaløysletta footbridge"]}}',
        '## Results for "Kvaløysletta footbridge"\n1. [Gangbru](https://nordlys.example/a)',
    ),
    "swe": (
        '{"name": "execute_bash", "arguments": {"command": "cd /testbed && git status"}}',
        "On branch main\nnothing to commit, working tree clean",
    ),
    "os": (
        "import pyautogui\npyautogui.click(328, 355)",
        "tag\tname\ttext\nfile-chooser\tSave As\tq2-sales.ods",
    ),
}


def predict(model: Path, domain: str, action: str, *extra: str) -> list[str]:
    return ["predict", "--domain", domain, "--model", str(model), *ENGINE_FLAGS, *extra, action]


@pytest.mark.parametrize("domain", list(CASES))
def test_predict_each_domain(
    domain: str, tmp_path: Path, scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    action, observation = CASES[domain]
    model = scripted_model(
        f"Thinking about the {domain} step.</think>\n"
        f"<predicted_observation>{observation}</predicted_observation>",
        n_ctx_train=8192,
    )
    extra: list[str] = []
    if domain in STATE_FILES:
        name, text = STATE_FILES[domain]
        (tmp_path / name).write_text(text, encoding="utf-8")
        extra = ["--state", str(tmp_path / name)]
    code = cli.main([*predict(model, domain, action, *extra), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["domain"] == domain
    assert result["observation"] == observation
    assert result["reasoning"] == f"Thinking about the {domain} step."
    assert result["status"] == "complete"


def test_predict_prints_the_observation_from_a_shipped_scenario(
    scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    observation = "[FILE] inbox.md\n[DIR] journal\n[DIR] projects"
    model = scripted_model(
        f"ok</think><predicted_observation>{observation}</predicted_observation>",
        n_ctx_train=8192,
    )
    state = ["--state", str(PROMPTS / "mcp" / "scenarios.toml")]
    good = '{"name": "list_directory", "arguments": {"path": "/home/maya/notes"}}'
    assert cli.main(predict(model, "mcp", good, *state)) == 0
    assert capsys.readouterr().out == sanitize(observation) + "\n"
    # The first scenario's tools (the filesystem server) are what calls are checked against.
    bad = '{"name": "list_directory", "arguments": {"dir": "/home/maya/notes"}}'
    assert cli.main(predict(model, "mcp", bad, *state)) == 2
    assert "arguments.path is required" in capsys.readouterr().err


def test_predict_validates_mcp_calls_against_a_saved_tools_list(
    tmp_path: Path, scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "tools": [
                        {
                            "name": "echo",
                            "description": "Return the text",
                            "inputSchema": {
                                "type": "object",
                                "properties": {"text": {"type": "string"}},
                                "required": ["text"],
                            },
                        }
                    ]
                },
            }
        ),
        encoding="utf-8",
    )
    model = scripted_model(
        'ok</think><predicted_observation>{"content": [{"type": "text", "text": "hi"}]}'
        "</predicted_observation>",
        n_ctx_train=8192,
    )
    state = ["--state", str(tools)]
    assert cli.main(predict(model, "mcp", '{"name": "echo", "arguments": {}}', *state)) == 2
    assert capsys.readouterr().err == (
        "agentworld: invalid action: echo: arguments.text is required\n"
    )
    assert cli.main(predict(model, "mcp", '{"name": "shout", "arguments": {}}', *state)) == 2
    assert "unknown tool 'shout'; available tools: echo" in capsys.readouterr().err
    good = '{"name": "echo", "arguments": {"text": "hi"}}'
    assert cli.main([*predict(model, "mcp", good, *state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["observation"] == (
        '{"content": [{"type": "text", "text": "hi"}]}'
    )
    # Without a tool list the same unknown tool is sent as written.
    assert cli.main(predict(model, "mcp", '{"name": "shout", "arguments": {}}')) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("domain", "action", "reason"),
    [
        ("web", 'click("a42"', "invalid action: not a browser call"),
        ("web", "eval('1')", "unknown browser action 'eval'"),
        ("android", '{"action": "fly"}', "invalid action: unknown action 'fly'"),
        ("os", "pyautogui.click(", "invalid action: not valid Python (line 1"),
        (
            "search",
            '{"name": "web_search", "arguments": {"query": 5}}',
            "must be an array or a string",
        ),
        (
            "mcp",
            '{"name": "count", "arguments": {"n": ' + "7" * 5000 + "}}",
            "a number of 5,000 digits; numbers may have at most 1,000",
        ),
        (
            "swe",
            '{"name": "execute_bash", "arguments": {"command": ' + "[" * 5000 + "]" * 5000 + "}}",
            "nested too deeply (more than 100 levels)",
        ),
        (
            "swe",
            '{"name": "str_replace_editor", "arguments": {"command": "view"}}',
            "arguments.path is required",
        ),
    ],
)
def test_bad_actions_exit_2_with_one_line(
    domain: str, action: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before any model is needed: the model path does not even exist.
    code = cli.main(predict(tmp_path / "absent.gguf", domain, action))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("agentworld: ")
    assert reason in err


def test_unusable_state_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("state = ", encoding="utf-8")
    code = cli.main(predict(tmp_path / "absent.gguf", "terminal", "ls", "--state", str(broken)))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"agentworld: --state: {broken}: not valid TOML")
    assert err.count("\n") == 1


def test_predict_says_when_no_tool_list_checks_an_mcp_call(
    scripted_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    model = scripted_model("ok</think><predicted_observation>done</predicted_observation>")
    call = '{"name": "any_tool_at_all", "arguments": {}}'
    assert cli.main(predict(model, "mcp", call)) == 0
    out, err = capsys.readouterr()
    assert out == "done\n"
    assert (
        "agentworld: no tool list is in use, so the call is checked against no tool: give "
        "one with --state (a tools/list .json or a scenario .toml)\n"
    ) in err
    state = ["--state", str(PROMPTS / "mcp" / "scenarios.toml")]
    good = '{"name": "list_directory", "arguments": {"path": "/home/maya/notes"}}'
    assert cli.main(predict(model, "mcp", good, *state)) == 0
    assert "no tool list" not in capsys.readouterr().err
