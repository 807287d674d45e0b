"""Every package the code imports is declared in pyproject.toml: one that arrives only
through another package's requirements can vanish with any of its releases."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]


def distribution(requirement: str) -> str:
    """The normalised name a requirement line declares (``"textual[syntax]>=8"``: textual)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return normalised(name.group())


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported(folder: Path) -> dict[str, str]:
    """The top-level modules imported anywhere under ``folder`` (inside functions and
    ``TYPE_CHECKING`` too), each with one place that imports it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                found.setdefault(top, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def undeclared(folders: Iterable[str], declared: set[str]) -> list[str]:
    providers = packages_distributions()
    problems = []
    local = {p.stem for folder in folders for p in (ROOT / folder).iterdir()}
    for folder in folders:
        for module, where in sorted(imported(ROOT / folder).items()):
            if module in sys.stdlib_module_names or module in local or module == "agentworld_tui":
                continue
            dists = {normalised(d) for d in providers.get(module, [])}
            if not dists:
                problems.append(f"{where}: {module} is not installed, so its package is unknown")
            elif not dists & declared:
                problems.append(f"{where}: {module} (from {', '.join(sorted(dists))})")
    return problems


def test_every_package_the_app_imports_is_declared() -> None:
    declared = {distribution(r) for r in PROJECT["dependencies"]}
    for extra, requirements in EXTRAS.items():
        if extra != "test":  # the app imports an extra's package only when it is installed
            declared |= {distribution(r) for r in requirements}
    assert undeclared(["agentworld_tui"], declared) == []


def test_every_package_the_tests_and_benchmarks_import_is_in_the_test_extra() -> None:
    declared = {distribution(r) for r in [*PROJECT["dependencies"], *EXTRAS["test"]]}
    assert undeclared(["tests", "bench"], declared) == []


@pytest.mark.parametrize(
    ("requirement", "name"),
    [("textual[syntax]>=8.2.8,<8.3", "textual"), ("llama_cpp.python>=0.3", "llama-cpp-python")],
)
def test_requirement_names_are_read_as_pip_reads_them(requirement: str, name: str) -> None:
    assert distribution(requirement) == name
