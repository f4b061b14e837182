"""The house's layering: the import-linter contract holds, covers every top-level unit, and no package has a cycle.

grimp (import-linter's graph) sees every import statement, inside functions and under ``TYPE_CHECKING`` too.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import grimp
import pytest
import tomllib
from importlinter import cli

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "gmiexp"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("gmiexp", "hydra_plugins", include_external_packages=False, cache_dir=None)


def contract_layers() -> list[str]:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in settings["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.split("|")]


def test_the_layers_contract_holds() -> None:
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml")) == cli.EXIT_STATUS_SUCCESS


def test_the_contract_names_every_top_level_unit() -> None:
    units = {f"gmiexp.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    units |= {f"gmiexp.{p.name}" for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert units - set(contract_layers()) == set(), "add these to [tool.importlinter] layers in pyproject.toml"
    assert set(contract_layers()) - units - {"hydra_plugins"} == set(), "the contract names units that do not exist"


def strongly_connected(edges: dict[str, set[str]], nodes: set[str]) -> list[list[str]]:
    """Tarjan's components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                on.discard(w)
                comp.append(w)
            on.discard(v)
            if comp:
                out.append(sorted([v, *comp]))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycles(graph: grimp.ImportGraph) -> list[tuple[str, list[str]]]:
    """Per package: the cycles among its children (modules and sub-packages, each with what is below it)."""
    found = []
    for pkg in sorted(m for m in graph.modules if graph.find_children(m)):
        children = set(graph.find_children(pkg))
        edges: dict[str, set[str]] = defaultdict(set)
        for module in graph.modules:
            if not module.startswith(pkg + "."):
                continue
            a = f"{pkg}.{module[len(pkg) + 1:].split('.')[0]}"
            for imported in graph.find_modules_directly_imported_by(module):
                if imported.startswith(pkg + "."):
                    b = f"{pkg}.{imported[len(pkg) + 1:].split('.')[0]}"
                    if a != b:
                        edges[a].add(b)
        found += [(pkg, c) for c in strongly_connected(edges, children)]
    return found


def test_no_package_has_an_import_cycle(graph: grimp.ImportGraph) -> None:
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert cycles(g) == [("p", ["p.a", "p.b"])]
