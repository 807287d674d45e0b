"""``agentworld models ...`` and ``agentworld doctor`` in a subprocess, against the local hub."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hubserver import HubFile, HubServer

from agentworld_tui.models.cache import repo_folder
from agentworld_tui.models.hardware import llama_build

REPO = "tester/Tiny-AgentWorld-GGUF"
USER_CATALOG = f"""
[[model]]
name = "tiny"
repo = "{REPO}"
quant = "Q4_K_M"
size_gb = 0.001
description = "a tiny test model"

[[model]]
name = "tiny-big"
repo = "{REPO}"
quant = "Q8_0"
size_gb = 4
"""


@pytest.fixture
def hub(tmp_path: Path, isolated_dirs: dict[str, Path]) -> Iterator[HubServer]:
    server = HubServer().start()
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "models.toml").write_text(USER_CATALOG, encoding="utf-8")
    try:
        yield server
    finally:
        server.stop()


AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'agentworld_tui', *sys.argv[1:]])"
)
"""Start the command with Ctrl+C at its default, as a terminal does: a test run started in
the background of a script inherits SIGINT ignored, and Python then never installs its
KeyboardInterrupt handler (the program rightly ignores the signal it was told to)."""


def cli_env(hub: HubServer | None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HF_HUB_OFFLINE", None)
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    env.update(extra)
    return env


def agentworld(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentworld_tui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agentworld: ")
    return lines[0]


def test_pull_path_use_doctor_rm(hub: HubServer, scripted_model: Callable[..., Path]) -> None:
    model = scripted_model("<predicted_observation>ok</predicted_observation>")
    data = model.read_bytes()
    hub.add_repo(REPO, {"README.md": b"# tiny\n", "Tiny-Q4_K_M.gguf": data})
    env = cli_env(hub)

    listed = agentworld("models", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {m["name"]: m for m in json.loads(listed.stdout)["models"]}
    assert rows["tiny"]["downloaded"] is False and rows["tiny"]["path"] is None
    assert rows["agentworld-35b-q4_k_m"]["default"] is True

    pulled = agentworld("models", "pull", "tiny", "--use", env=env)
    assert pulled.returncode == 0, pulled.stderr
    path = Path(pulled.stdout.strip())
    assert path.read_bytes() == data
    assert f"pulling {REPO}: Tiny-Q4_K_M.gguf" in pulled.stderr
    assert "100.0%" in pulled.stderr
    config = Path(os.environ["AGENTWORLD_CONFIG_DIR"]) / "config.toml"
    assert f'path = "{path}"' in config.read_text()

    again = agentworld("models", "pull", "tiny", env=env)
    assert again.returncode == 0 and "already downloaded" in again.stderr
    assert Path(again.stdout.strip()) == path

    where = agentworld("models", "path", "tiny", env=env)
    assert (where.returncode, where.stdout.strip()) == (0, str(path))

    listed = agentworld("models", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line[2:].startswith("tiny "))
    assert "downloaded" in row and "fits" in row
    assert listed.stdout.splitlines()[0].split() == [
        "NAME",
        "QUANT",
        "SIZE",
        "STATE",
        "FIT",
        "NEEDS",
    ]

    doctor = agentworld("doctor", env=env)
    assert doctor.returncode == 0, doctor.stderr
    assert "llama-cpp-python" in doctor.stdout and "build" in doctor.stdout
    assert str(path) in doctor.stdout
    assert "qwen2, 1 layers (1 with a KV cache)" in doctor.stdout
    assert "fits: needs about" in doctor.stdout
    assert "RAM" in doctor.stdout
    build = llama_build()
    assert build is not None
    if not build.gpu_offload:  # a CPU-only build is told how to get GPU offload
        assert "pipx runpip agentworld-tui install --force-reinstall" in doctor.stdout
        assert "CPU build (no GPU offload)" in doctor.stdout

    removed = agentworld("models", "rm", "tiny", env=env)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith("removed tiny: 1 file(s)")
    assert not path.exists()
    gone = agentworld("models", "path", "tiny", env=env)
    assert "tiny is not downloaded; run: agentworld models pull tiny" in one_line_error(gone)


def test_ctrl_c_stops_cleanly_and_the_rerun_resumes(hub: HubServer) -> None:
    data = b"GGUF" + os.urandom(4_000_000)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": HubFile(data, stall_after=2_500_000)})
    env = cli_env(hub)
    process = subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, "models", "pull", "tiny"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert hub.wait_stalled(60), "the download never started"
        blobs = repo_folder(REPO, Path(os.environ["HF_HOME"]) / "hub") / "blobs"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # bounded wait for the first chunk on disk
            partials = list(blobs.glob("*.incomplete"))
            if partials and partials[0].stat().st_size >= 1 << 20:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "download interrupted; run the same command again to resume" in err
    partials = list(blobs.glob("*.incomplete"))
    assert len(partials) == 1
    kept = partials[0].stat().st_size
    assert 0 < kept < len(data)
    assert partials[0].read_bytes() == data[:kept]

    hub.release()
    rerun = agentworld("models", "pull", "tiny", env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert "already here" in rerun.stderr
    assert Path(rerun.stdout.strip()).read_bytes() == data
    gets = [r.range for r in hub.requests if r.origin == "cdn" and r.method == "GET"]
    assert gets[-1] == f"bytes={kept}-"


def test_offline_with_a_cached_model(hub: HubServer) -> None:
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": b"GGUF" + bytes(10_000)})
    pulled = agentworld("models", "pull", "tiny", env=cli_env(hub))
    assert pulled.returncode == 0, pulled.stderr
    hub.stop()
    offline = cli_env(None, HF_HUB_OFFLINE="1")
    again = agentworld("models", "pull", "tiny", env=offline)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == pulled.stdout.strip()
    missing = agentworld("models", "pull", "tiny-big", env=offline)
    assert "HF_HUB_OFFLINE" in one_line_error(missing)


def test_errors_are_one_line(hub: HubServer) -> None:
    env = cli_env(hub)
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": HubFile(b"GGUF", recorded_size=10**15)})
    unknown = agentworld("models", "pull", "no-such-model", env=env)
    assert "unknown model 'no-such-model'" in one_line_error(unknown)
    missing = agentworld("models", "pull", "someone/Missing-GGUF:Q4_K_M", env=env)
    assert "someone/Missing-GGUF was not found" in one_line_error(missing)
    no_room = agentworld("models", "pull", "tiny", env=env)
    lines = [line for line in no_room.stderr.splitlines() if line.strip()]
    assert no_room.returncode != 0 and "Traceback" not in no_room.stderr
    assert "not enough disk space for tiny" in lines[-1]
    not_here = agentworld("models", "rm", "tiny", env=env)
    assert "tiny is not downloaded" in one_line_error(not_here)


def test_malformed_user_catalog_is_reported_not_fatal(isolated_dirs: dict[str, Path]) -> None:
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "models.toml").write_text("[[model]\nname = 1\n")
    listed = agentworld("models", "list", env=cli_env(None))
    assert listed.returncode == 0
    assert "models.toml" in listed.stderr and "line 1" in listed.stderr
    assert "agentworld-35b-q4_k_m" in listed.stdout


def test_help_stays_light() -> None:
    code = (
        "import sys; from agentworld_tui.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('huggingface_hub', 'gguf', 'llama_cpp', 'textual', 'httpx2') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


CONTROLS = set("\x1b\x07\x9b\x9d\u202e\u2066\x7f\x00")
HOSTILE_TOML = "\\u001b]52;c;b3duZWQ=\\u0007\\u001b[2J\\u009b31m\\u202e\\u007f"
REAL_NAME = "evil2\x1b]52;c;b3duZWQ=\x07\x1b[2J\x9b31m\u202e\x7f"


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert not set(text) & CONTROLS, repr(text)


def test_catalog_and_hub_text_reach_the_terminal_sanitized(hub: HubServer) -> None:
    """Names from a shared models.toml and from a lying Hub are printed without controls."""
    catalog = Path(os.environ["AGENTWORLD_CONFIG_DIR"]) / "models.toml"
    catalog.write_text(
        USER_CATALOG
        + f'\n[[model]]\nname = "evil"\nrepo = "{REPO}"\nquant = "Q5_K_M"\n'
        + f'description = "{HOSTILE_TOML}"\nsize_gb = "{HOSTILE_TOML}"\n'
        + f'\n[[model]]\nname = "evil2{HOSTILE_TOML}"\nrepo = "{REPO}"\nquant = "Q5_K_M"\n',
        encoding="utf-8",
    )
    hub.add_repo(REPO, {"\x1b]0;owned\x07Tiny-Q4_K_M.gguf": b"GGUF" + bytes(100)})
    env = cli_env(hub)
    listed = agentworld("models", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "wrong type" in listed.stderr
    assert "model 'evil2\\x1b]52;c;b3duZWQ=\\x07" in listed.stderr  # shown escaped
    assert_clean(listed.stdout, listed.stderr)
    for args, expected in (
        (("pull", "tiny"), "file name"),
        (("pull", "nothing-like-it"), "unknown model"),
        (("path", REAL_NAME), "evil2"),
        (("rm", REAL_NAME), "evil2"),
        (("pull", f"{REPO}:Q5_K_M"), "Q5_K_M"),
    ):
        done = agentworld("models", *args, env=env)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert expected in done.stderr.splitlines()[-1]
        assert_clean(done.stdout, done.stderr)
    doctor = agentworld("doctor", "--model", f"/nowhere/{REAL_NAME}.gguf", env=env)
    assert doctor.returncode == 1 and "cannot read it" in doctor.stdout
    assert_clean(doctor.stdout, doctor.stderr)


def test_absurd_numbers_in_the_catalog_are_reported_not_fatal(
    isolated_dirs: dict[str, Path],
) -> None:
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "models.toml").write_text(
        '[[model]]\nname = "huge"\nrepo = "a/b"\nquant = "Q4_K_M"\nsize_gb = 1e308\n'
        '[[model]]\nname = "agentworld-35b-q8_0"\nsize_gb = nan\n'
        '[[model]]\nname = "deep"\nrepo = "a/b"\nquant = "Q8_0"\nn_layers = 99999999999\n',
        encoding="utf-8",
    )
    env = cli_env(None)
    for args in (("models", "list"), ("models", "list", "--json"), ("doctor",)):
        done = agentworld(*args, env=env)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "model 'huge': size_gb = 1e+308 is not between 0 and 10000" in done.stderr
        assert "model 'agentworld-35b-q8_0': size_gb = nan" in done.stderr
        assert "model 'deep': n_layers = 99999999999" in done.stderr
    listed = agentworld("models", "list", env=env)
    assert "huge" not in listed.stdout and "agentworld-35b-q8_0" in listed.stdout


def test_models_list_refuses_a_context_out_of_range(isolated_dirs: dict[str, Path]) -> None:
    env = cli_env(None)
    for ctx in ("-5", str(10**400), str(1 << 32)):
        done = agentworld("models", "list", "--ctx", ctx, env=env)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "--ctx" in done.stderr.splitlines()[-1]
    fine = agentworld("models", "list", "--ctx", "65536", env=env)
    assert fine.returncode == 0 and "Fit at 65536 tokens" in fine.stderr


def test_a_file_system_error_during_a_pull_is_one_line(hub: HubServer, tmp_path: Path) -> None:
    """A cache path that runs through a file (a mistyped HF_HUB_CACHE) cannot be written."""
    hub.add_repo(REPO, {"Tiny-Q4_K_M.gguf": b"GGUF" + bytes(500)})
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    pulled = agentworld(
        "models", "pull", "tiny", env=cli_env(hub, HF_HUB_CACHE=str(a_file / "hub"))
    )
    assert pulled.returncode != 0 and "Traceback" not in pulled.stderr
    last = pulled.stderr.splitlines()[-1]
    assert last.startswith("agentworld: cannot write tiny into the cache")
    assert a_file.read_text() == "x"


def test_a_lying_digest_cannot_make_pull_and_rm_delete_a_users_file(
    hub: HubServer, tmp_path: Path
) -> None:
    """The reported attack end to end: lfs.sha256 = a path to a file outside the cache."""
    victim = tmp_path / "my-models" / "precious.gguf"
    victim.parent.mkdir()
    victim.write_bytes(b"GGUF mine")
    hub.add_repo(
        REPO,
        {
            "Tiny-Q8_0.gguf": b"GGUF" + bytes(50),
            "Tiny-Q4_K_M.gguf": HubFile(
                b"GGUF" + bytes(60), recorded_sha256="../../../../my-models/precious.gguf"
            ),
        },
    )
    env = cli_env(hub)
    assert agentworld("models", "pull", "tiny-big", env=env).returncode == 0  # blobs/ exists
    pulled = agentworld("models", "pull", "tiny", env=env)
    assert "'../../../../my-models/precious.gguf', not a sha256" in one_line_error(pulled)
    removed = agentworld("models", "rm", "tiny", env=env)
    assert "tiny is not downloaded" in one_line_error(removed)
    assert victim.read_bytes() == b"GGUF mine" and not victim.is_symlink()
