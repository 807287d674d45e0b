"""The wheel: built from the checkout, installed into a fresh virtual environment, run there.

Part of the normal suite (about two seconds). The fresh environment gets the current
environment's dependencies through a .pth file instead of a download, so it runs offline;
the project itself comes only from the wheel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_PROMPTS = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "prompts").rglob("*")
    if p.is_file() and not p.name.startswith(".")
)


def run(*cmd: str | Path, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{cmd}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, ROOT, cwd=out)
    (built,) = out.glob("agentworld_tui-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    env = home / "env"
    run(sys.executable, "-m", "venv", "--without-pip", env, cwd=home)
    python = env / "bin" / "python"
    site = Path(
        run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=home
        ).stdout.strip()
    )
    # Dependencies from this environment; a plain path entry does not run this
    # environment's own .pth files, so its editable install of the project stays out.
    (site / "outer-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
        "--no-index", "--quiet", wheel, cwd=home,
    )  # fmt: skip
    return env


def test_the_wheel_ships_prompts_and_the_model_catalog(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    from agentworld_tui.domains import DOMAINS

    assert "agentworld_tui/_shipped/models.toml" in names
    for domain in DOMAINS:
        assert f"agentworld_tui/_shipped/prompts/{domain}/system_prompt.txt" in names
    assert {f"agentworld_tui/_shipped/{p}" for p in SHIPPED_PROMPTS} <= names
    styles = {str(p.relative_to(ROOT)) for p in (ROOT / "agentworld_tui").rglob("*.tcss")}
    assert styles <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "agentworld = agentworld_tui.cli:main" in text


def test_installed_version_and_help(venv: Path, tmp_path: Path) -> None:
    from agentworld_tui import __version__

    version = run(venv / "bin" / "agentworld", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"agentworld {__version__}"
    assert "predict" in run(venv / "bin" / "agentworld", "--help", cwd=tmp_path).stdout


def test_the_installed_app_uses_its_own_files(venv: Path, tmp_path: Path) -> None:
    code = (
        "import json, agentworld_tui\n"
        "from agentworld_tui.world.folders import shipped\n"
        "from agentworld_tui.world.prompts import load_template\n"
        "t = load_template('terminal')\n"
        "print(json.dumps([agentworld_tui.__file__, str(shipped('prompts')), t.source,"
        " t.problems, len(t.text)]))\n"
    )
    module, prompts, source, problems, size = json.loads(
        run(venv / "bin" / "python", "-c", code, cwd=tmp_path).stdout
    )
    assert Path(module).is_relative_to(venv)
    assert Path(prompts).is_relative_to(venv) and prompts.endswith("_shipped/prompts")
    assert source == "shipped:terminal/system_prompt.txt" and problems == [] and size > 200


def test_installed_predict_against_a_tiny_model(venv: Path, scripted_model, tmp_path) -> None:
    model = scripted_model(
        "look</think><predicted_observation>user@devbox:~$ ls\nnotes.txt</predicted_observation>"
    )
    result = run(venv / "bin" / "agentworld", "predict", "--model", model, "ls", cwd=tmp_path)
    assert result.stdout == "user@devbox:~$ ls\nnotes.txt\n"
    assert result.stderr == ""
