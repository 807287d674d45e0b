"""The layers as a contract: front-ends above the simulator, engines, domains and models
above the world, config read only by front-ends (pyproject's [tool.importlinter], which
CI runs), and no import cycles anywhere, imports inside functions and imports for type
checking only included; and the app's keys found where they are defined."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")  # what CI runs
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 kept, 0 broken" in done.stdout


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("agentworld_tui", exclude_type_checking_imports=False)


def test_there_is_no_import_cycle(graph: grimp.ImportGraph) -> None:
    """A part of the app is handed the app as a Protocol of what it uses: it never imports
    the app, not even for its type."""
    assert {"agentworld_tui.ui.app", "agentworld_tui.ui.tab_actions"} <= graph.modules
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.append(" -> ".join((module, *chain)))
    assert cycles == []


def test_the_world_knows_no_domain_and_reads_no_settings(graph: grimp.ImportGraph) -> None:
    for below in ("agentworld_tui.world", "agentworld_tui.engines", "agentworld_tui.domains"):
        for above in ("agentworld_tui.config", "agentworld_tui.ui", "agentworld_tui.cli"):
            assert not graph.chain_exists(importer=below, imported=above, as_packages=True)
    assert not graph.chain_exists(
        importer="agentworld_tui.world", imported="agentworld_tui.domains", as_packages=True
    )


def test_every_key_s_action_is_a_method_written_in_the_app() -> None:
    """grep finds what a key does: each binding's action is an ``action_`` method written
    in the app's class (none is added with setattr), and nothing in ui/ adds methods so."""
    from agentworld_tui.ui.keys import BINDINGS

    source = ROOT / "agentworld_tui" / "ui" / "app.py"
    [app] = [
        node
        for node in ast.parse(source.read_text("utf-8")).body
        if isinstance(node, ast.ClassDef) and node.name == "AgentWorldApp"
    ]
    written = {n.name for n in app.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    actions = {"action_" + binding.action.partition("(")[0] for binding in BINDINGS}
    assert sorted(actions - written) == []
    for module in (ROOT / "agentworld_tui" / "ui").rglob("*.py"):
        calls = [
            node
            for node in ast.walk(ast.parse(module.read_text("utf-8")))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
        ]
        assert calls == [], module
