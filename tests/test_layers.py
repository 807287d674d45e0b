"""The layers as a contract: front-ends above the simulator, engines, domains and models
above the world, config read only by front-ends (pyproject's [tool.importlinter], which
CI runs), and no import cycles anywhere, imports inside functions included."""

from __future__ import annotations

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
    return grimp.build_graph("agentworld_tui", exclude_type_checking_imports=True)


def test_there_is_no_import_cycle(graph: grimp.ImportGraph) -> None:
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
