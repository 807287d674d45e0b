"""config.toml: a change touches only its keys, a file that cannot be parsed is never
replaced, flags are never written, every numeric setting has a range, and a file full of
mistakes is summed up in a few lines."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hubserver import HubServer

from agentworld_tui.config import (
    MAX_THREADS,
    PROBLEMS_SHOWN,
    SettingsFileError,
    load_settings,
    settings_path,
    update_settings_file,
)

USER_FILE = """\
# My settings: hand-written, keep my notes.
log_level = "DEBUG"   # noisy on purpose

[generation]
temperature = 0.3  # calm
# max_tokens = 100   (tried, too short)
top_k = 40

[model]
# the file I use most
path = "/models/old.gguf"   # was the 9B
threads = 2
mystery = "a key this version does not know"

[ui]
show_reasoning = false
"""


def config_file(isolated_dirs: dict[str, Path], text: str) -> Path:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_change_keeps_the_rest_of_the_file_byte_for_byte(isolated_dirs: dict) -> None:
    path = config_file(isolated_dirs, USER_FILE)
    path.chmod(0o640)
    update_settings_file({"model.path": "/models/new one.gguf", "server.url": ""})
    expected = USER_FILE.replace('"/models/old.gguf"', '"/models/new one.gguf"')
    assert path.read_text(encoding="utf-8") == expected
    assert path.stat().st_mode & 0o777 == 0o640
    assert load_settings().settings.model.path == "/models/new one.gguf"


def test_a_missing_key_or_section_is_added_and_a_default_is_not_written(
    isolated_dirs: dict,
) -> None:
    path = config_file(isolated_dirs, "# only a comment\n[ui]\nwait_seconds = 2.0\n")
    update_settings_file({"model.path": "/m.gguf", "server.url": ""})
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# only a comment\n[ui]\nwait_seconds = 2.0\n")
    assert '[model]\npath = "/m.gguf"\n' in text
    assert "[server]" not in text  # no URL in the file already means "no server"
    update_settings_file({"server.url": "http://gpu:8000/v1"})
    update_settings_file({"server.url": ""})  # present now: it is changed, not left
    loaded = load_settings()
    assert loaded.problems == []
    assert (loaded.settings.server.url, loaded.settings.ui.wait_seconds) == ("", 2.0)


def test_dotted_keys_and_inline_tables_are_changed_in_place(isolated_dirs: dict) -> None:
    path = config_file(isolated_dirs, 'model.path = "a.gguf"  # dotted\nmodel.threads = 1\n')
    update_settings_file({"model.path": "b.gguf"})
    assert path.read_text() == 'model.path = "b.gguf"  # dotted\nmodel.threads = 1\n'
    path.write_text('model = {path = "a.gguf", n_ctx = 4096}\n')
    update_settings_file({"model.path": "b.gguf"})
    assert path.read_text() == 'model = {path = "b.gguf", n_ctx = 4096}\n'


def test_a_missing_file_is_created_with_the_key_alone(isolated_dirs: dict) -> None:
    written = update_settings_file({"model.path": "/m.gguf"})
    assert written == settings_path()
    assert written.read_text(encoding="utf-8") == '[model]\npath = "/m.gguf"\n'


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('[model]\npath = "/a.gguf"\nthreads = 2\n[generation\ntemperature = 0.3\n', "line 4"),
        ('[model]\npath = "/a.gguf\n', "line 2"),
        ("[model]\nn_ctx = " + "9" * 5000 + "\n", "digits"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
        ("model = 5\n", "[model] is not a table"),
    ],
)
def test_a_file_that_cannot_be_parsed_is_refused_and_left_untouched(
    isolated_dirs: dict, text: str, reason: str
) -> None:
    path = config_file(isolated_dirs, text)
    before = path.read_bytes()
    with pytest.raises(SettingsFileError) as refused:
        update_settings_file({"model.path": "/new.gguf", "server.url": ""})
    message = str(refused.value)
    assert str(path) in message and reason in message and "not changed" in message
    assert len(message.splitlines()) == 1
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary left


def test_a_file_that_is_not_utf8_is_left_untouched(isolated_dirs: dict) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b'[model]\npath = "caf\xe9.gguf"\n')
    with pytest.raises(SettingsFileError, match="not UTF-8"):
        update_settings_file({"model.path": "/new.gguf"})
    assert path.read_bytes() == b'[model]\npath = "caf\xe9.gguf"\n'


def test_a_symlinked_config_stays_a_symlink(isolated_dirs: dict, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "agentworld.toml"
    real.parent.mkdir()
    real.write_text('[model]\npath = "a.gguf"\n')
    link = settings_path()
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    update_settings_file({"model.path": "b.gguf"})
    assert link.is_symlink() and real.read_text() == '[model]\npath = "b.gguf"\n'


def test_unknown_keys_and_bad_values_are_refused_by_the_function(isolated_dirs: dict) -> None:
    with pytest.raises(ValueError, match="no setting"):
        update_settings_file({"model.pth": "x"})
    with pytest.raises(ValueError, match="from 0 to"):
        update_settings_file({"model.n_ctx": -5})
    assert not settings_path().exists()


def agentworld(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


TINY_CATALOG = """
[[model]]
name = "tiny"
repo = "tester/Tiny-AgentWorld-GGUF"
quant = "Q4_K_M"
size_gb = 0.001
"""


def pull_env(hub: HubServer) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HF_HUB_OFFLINE", None)
    env["HF_ENDPOINT"] = hub.url
    return env


@pytest.fixture
def hub(isolated_dirs: dict[str, Path], scripted_model: Callable[..., Path]) -> Iterator[HubServer]:
    server = HubServer().start()
    model = scripted_model("<predicted_observation>ok</predicted_observation>")
    server.add_repo("tester/Tiny-AgentWorld-GGUF", {"Tiny-Q4_K_M.gguf": model.read_bytes()})
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "models.toml").write_text(TINY_CATALOG, encoding="utf-8")
    yield server
    server.stop()


def test_pull_use_changes_only_the_model_path(hub: HubServer, isolated_dirs: dict) -> None:
    path = config_file(isolated_dirs, USER_FILE)
    done = agentworld("models", "pull", "tiny", "--use", env=pull_env(hub))
    assert done.returncode == 0, done.stderr
    pulled = done.stdout.strip()
    assert path.read_text() == USER_FILE.replace("/models/old.gguf", pulled)


def test_pull_use_leaves_a_broken_config_alone_and_says_why(
    hub: HubServer, isolated_dirs: dict
) -> None:
    broken = USER_FILE.replace("[ui]", "[ui")
    path = config_file(isolated_dirs, broken)
    done = agentworld("models", "pull", "tiny", "--use", env=pull_env(hub))
    assert done.returncode == 2
    assert path.read_text() == broken
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("agentworld: ") and "is downloaded, but" in last
    assert "line 15" in last and "not changed" in last and "Traceback" not in done.stderr


def test_flags_given_for_one_run_are_never_written(hub: HubServer, isolated_dirs: dict) -> None:
    from agentworld_tui.cli import build_parser
    from agentworld_tui.cli.launch import settings_from_args

    path = config_file(isolated_dirs, USER_FILE)
    args = build_parser().parse_args(
        ["predict", "--max-tokens", "7", "--temperature", "0", "--ctx", "512", "ls"]
    )
    settings = settings_from_args(args)  # what the app holds: the file with the flags on top
    assert (settings.generation.max_tokens, settings.model.n_ctx) == (7, 512)
    update_settings_file({"model.path": "/picked.gguf", "server.url": ""})  # F3 "Use file"
    assert path.read_text() == USER_FILE.replace("/models/old.gguf", "/picked.gguf")
    done = agentworld(
        *("--max-tokens", "7", "--temperature", "0", "models", "pull", "tiny", "--use"),
        env=pull_env(hub),
    )
    assert done.returncode == 2  # the flags do not apply to `models`: refused, not saved
    assert (
        "--temperature, --max-tokens are given before 'models', which does not take them"
        in done.stderr
    )
    assert path.read_text() == USER_FILE.replace("/models/old.gguf", "/picked.gguf")


# -- ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("[model]\nn_ctx = -5", "[model].n_ctx"),
        ("[model]\nn_ctx = 99999999999", "[model].n_ctx"),
        ("[model]\ngpu_layers = -2", "[model].gpu_layers"),
        (f"[model]\nthreads = {MAX_THREADS + 1}", "[model].threads"),
        ("[model]\nthreads = 70000", "[model].threads"),
        ("[server]\nidle_timeout = 0", "[server].idle_timeout"),
        ("[generation]\ntemperature = nan", "[generation].temperature"),
        ("[generation]\ntemperature = inf", "[generation].temperature"),
        ("[generation]\ntemperature = -0.1", "[generation].temperature"),
        ("[generation]\ntop_p = 1.5", "[generation].top_p"),
        ("[generation]\ntop_k = -2", "[generation].top_k"),
        ("[generation]\nmax_tokens = 0", "[generation].max_tokens"),
        ("[generation]\nmax_tokens = -100", "[generation].max_tokens"),
        ("[generation]\nseed = -2", "[generation].seed"),
        ("[generation]\nseed = 4294967296", "[generation].seed"),
        ("[generation]\nreasoning_budget = -1", "[generation].reasoning_budget"),
        ("[ui]\nwait_seconds = 0", "[ui].wait_seconds"),
        ("[ui]\nwait_seconds = 1e9", "[ui].wait_seconds"),
        ('log_level = "LOUD"', "log_level"),
    ],
)
def test_a_setting_out_of_range_is_a_problem_and_its_default_is_used(
    isolated_dirs: dict, line: str, key: str
) -> None:
    config_file(isolated_dirs, line + "\n")
    loaded = load_settings()
    (problem,) = loaded.problems
    assert key in problem and "default used" in problem
    assert loaded.settings == type(loaded.settings)()


def test_settings_in_range_are_read(isolated_dirs: dict) -> None:
    config_file(
        isolated_dirs,
        "[model]\nn_ctx = 8192\nthreads = 1\ngpu_layers = 0\n"
        "[server]\nidle_timeout = 30\n"
        "[generation]\ntemperature = 0\ntop_p = 1\ntop_k = 0\nmax_tokens = 1\nseed = 0\n",
    )
    loaded = load_settings()
    assert loaded.problems == []
    assert loaded.settings.server.idle_timeout == 30.0
    assert (loaded.settings.model.n_ctx, loaded.settings.generation.max_tokens) == (8192, 1)


def test_a_huge_number_and_deep_nesting_are_reported_not_raised(isolated_dirs: dict) -> None:
    config_file(isolated_dirs, "[model]\nn_ctx = " + "9" * 5000 + "\n")
    (problem,) = load_settings().problems
    assert "using defaults" in problem and len(problem) < 300
    config_file(isolated_dirs, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    (problem,) = load_settings().problems
    assert "nested too deeply" in problem


def test_thousands_of_problems_are_summed_up(isolated_dirs: dict) -> None:
    keys = "\n".join(f"unknown_{i} = {i}" for i in range(20_000))
    path = config_file(isolated_dirs, f"[model]\n{keys}\n")
    loaded = load_settings()
    assert len(loaded.problems) == 20_000
    summary = loaded.summary()
    assert len(summary) == PROBLEMS_SHOWN
    assert summary[-1] == f"... and {20_000 - PROBLEMS_SHOWN + 1} more problems in {path}"
    done = agentworld("predict", "--model", "/nowhere.gguf", "ls")
    lines = done.stderr.splitlines()
    assert [line for line in lines if line.startswith("agentworld: config:")] == [
        f"agentworld: config: {s}" for s in summary
    ]


def test_a_long_or_hostile_key_is_quoted_short_and_escaped(isolated_dirs: dict) -> None:
    config_file(isolated_dirs, '[model]\n"\\u001b]0;pwned\\u0007' + "k" * 5000 + '" = 1\n')
    (problem,) = load_settings().problems
    assert "\x1b" not in problem and "\x07" not in problem and len(problem) < 200


def test_doctor_says_where_the_settings_file_and_the_log_are(isolated_dirs: dict) -> None:
    done = agentworld("doctor")
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["config", str(settings_path()), "(none", "yet)"] in rows
    config_file(isolated_dirs, "[model]\nthreads = 1\n")
    done = agentworld("doctor")
    assert any(
        line.split() == ["config", str(settings_path())] for line in done.stdout.splitlines()
    )
    assert any(line.split()[:1] == ["log"] for line in done.stdout.splitlines())


def test_each_key_is_checked_strictly_against_its_declared_type(isolated_dirs: dict) -> None:
    config_file(
        isolated_dirs,
        '[model]\nthreads = true\npath = 5\nengine = "vllm"\nslots = 2.0\n'
        '[ui]\nshow_reasoning = 1\nwait_seconds = 2\n[server]\nidle_timeout = "30"\n',
    )
    loaded = load_settings()
    where = f"{settings_path()}: "
    assert [p.removeprefix(where) for p in loaded.problems] == [
        "[model].threads: expected int, got True (default used)",
        "[model].path: expected str, got 5 (default used)",
        "[model].engine: 'vllm' must be one of llama-cpp-python, xllamacpp (default used)",
        "[model].slots: expected int, got 2.0 (default used)",
        "[ui].show_reasoning: expected bool, got 1 (default used)",
        "[server].idle_timeout: expected float, got '30' (default used)",
    ]
    assert loaded.settings.ui.wait_seconds == 2.0 and isinstance(
        loaded.settings.ui.wait_seconds, float
    )


def test_a_start_without_a_settings_file_does_not_load_pydantic(isolated_dirs: dict) -> None:
    # pydantic's import would cost the first frame more than the startup target allows:
    # it loads when a settings or session file is read, not before.
    code = (
        "import sys\nfrom agentworld_tui.config import load_settings\n"
        "import agentworld_tui.world.workspace\n"
        "assert load_settings().problems == []\nprint('pydantic' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
