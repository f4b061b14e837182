"""gmiexp imports inside functions are left only where they keep a heavy package out of a light path on purpose.

An ``import gmiexp...`` inside a function is *justified* when

* HEAVY: the importing module is imported (at module level, transitively) by ``mode=plan``, ``mode=doctor`` or
  ``--help`` (:data:`LIGHT_ROOTS`, and every module of ours under ``hydra_plugins``: Hydra's plugin discovery
  imports them all at start-up), and the module it imports brings in, at module level, a :data:`HEAVY` package
  the importing module does not bring in already; or
* ORDER: the importing module is in :data:`ORDER` (a package must be imported late in it for a reason other than
  weight), and the module it imports brings in, at module level, one of the packages named there.

Everything else belongs in the module's top-level imports: the layers contract (``lint-imports``,
tests/test_layers.py) already keeps the import graph acyclic. "Module level" means the statements that run when
a module is imported (not function bodies, not ``if TYPE_CHECKING:`` blocks); importing ``a.b.c`` also runs
``a`` and ``a.b``. External packages are matched by the names gmiexp imports (their own imports are not
followed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
OURS = ("gmiexp", "hydra_plugins.gmiexp_")  # hydra_plugins also holds other projects' plugins (submitit, optuna)


def _forbidden_in_plan() -> tuple[str, ...]:
    """``HEAVY`` of tests/test_app.py (test_plan_and_doctor_import_nothing_heavy): what mode=plan must not import."""
    tree = ast.parse((ROOT / "tests" / "test_app.py").read_text())
    (value,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "HEAVY" for t in n.targets)]
    return tuple(ast.literal_eval(value))


#: Packages mode=plan/doctor/--help must not import: what test_app forbids (rl_games, matplotlib, envpool, wandb,
#: mujoco, gymnasium.envs.mujoco), and the optional simulators, which may be absent (an ImportError there would
#: break mode=plan) and bring in mujoco themselves. torch and numpy are not heavy here: mode=plan imports them.
HEAVY = (*_forbidden_in_plan(), "isaacgym", "mjlab", "mujoco_warp", "warp")

#: The entry points of mode=plan, mode=doctor and --help.
LIGHT_ROOTS = ("gmiexp.__main__", "gmiexp.app", "gmiexp.planner.build", "gmiexp.config.compose",
               "gmiexp.tools.doctor")

#: module -> (packages it imports late, why), for a reason other than weight. Keep it short. A package is an
#: external one or ours ("gmiexp": any module of gmiexp); a late import is justified when what it imports brings
#: one of them in, and :func:`test_order_modules_keep_their_packages_out` holds the module itself to it.
ORDER: dict[str, tuple[tuple[str, ...], str]] = {
    "gmiexp.backends.auto": (
        ("torch",),
        "`python -m gmiexp.backends.mps_daemon quit`, the clean-up a GMI starts when its launcher dies, imports "
        "gmiexp.backends: it must start in 0.1 s and 27 MB, not 1.3 s and 280 MB, so the layouts (and torch, "
        "through comm.store) come only when auto picks a backend"),
    "gmiexp.launch.worker": (
        ("torch", "isaacgym"),
        "a cold GMI applies its environment (CUDA_VISIBLE_DEVICES, MPS/MIG variables) and imports isaacgym "
        "(which refuses to load after torch) before anything imports torch"),
    "hydra_plugins.gmiexp_pack.pack_launcher": (
        ("gmiexp",),
        "Hydra's plugin discovery imports it in every Hydra start of any app in this environment: it imports "
        "gmiexp only when a sweep launches"),
    "hydra_plugins.gmiexp_submitit.launcher": (
        ("gmiexp",),
        "Hydra's plugin discovery imports it in every Hydra start of any app in this environment: it imports "
        "gmiexp only when a sweep launches"),
}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path  # relative to the parent of the source folder: src/gmiexp/app.py
    is_package: bool
    tree: ast.Module


@dataclass(frozen=True)
class LateImport:
    """An import of ours inside a function: ``module`` imports ``targets`` at ``path:line``."""

    module: str
    path: Path
    line: int
    targets: tuple[str, ...]
    text: str


def load(src: Path, packages: Iterable[str]) -> dict[str, Module]:
    """Every module under ``src/<package>`` for each of ``packages``, by dotted name."""
    found = {}
    for package in packages:
        for path in sorted((src / package).rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            found[name] = Module(name, path.relative_to(src.parent), is_package, ast.parse(path.read_text(), str(path)))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(nodes: Iterable[ast.AST], in_function: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import in ``nodes`` that runs (not under ``if TYPE_CHECKING:``), and whether it is in a function."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.orelse, in_function)
        else:
            yield from _walk(ast.iter_child_nodes(node),
                             in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def imported_names(node: ast.Import | ast.ImportFrom, module: Module, known: dict[str, Module]) -> list[str]:
    """The dotted modules ``node`` imports (for ``from a import b``: ``a.b`` too when it is a module we know)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.name.split(".")
        if not module.is_package:
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    names = [source]
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        if sub in known or not is_ours(source):  # external: it may be a module (gymnasium.envs.mujoco)
            names.append(sub)
    return names


def is_ours(name: str) -> bool:
    return name.startswith(OURS) or name == "gmiexp"


def parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


class Graph:
    """Module-level imports of our modules: the closure of a module and the external packages it brings in."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self.ours: dict[str, set[str]] = {}
        self.external: dict[str, set[str]] = {}
        self.late: list[LateImport] = []
        for m in modules.values():
            ours, external = set(), set()
            for node, in_function in _walk(m.tree.body):
                names = imported_names(node, m, modules)
                if in_function:
                    targets = tuple(n for n in names if n in modules)
                    if any(is_ours(n) for n in names):
                        self.late.append(LateImport(m.name, m.path, node.lineno, targets, ast.unparse(node)))
                    continue
                for n in names:
                    (ours if is_ours(n) else external).add(n)
            self.ours[m.name] = {p for n in ours for p in parents(n) if p in modules}
            self.external[m.name] = external

    def closure(self, names: Iterable[str]) -> set[str]:
        """Our modules that importing ``names`` runs."""
        seen: set[str] = set()
        todo = [p for n in names for p in parents(n) if p in self.modules]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += self.ours[n]
        return seen

    def brings_in(self, names: Iterable[str], packages: Iterable[str]) -> set[str]:
        """Which of ``packages`` importing ``names`` imports (our modules count too: "gmiexp")."""
        wanted = tuple(packages)
        got = set()
        for m in self.closure(names):
            for imported in (m, *self.external[m]):
                got |= {p for p in wanted if imported == p or imported.startswith(p + ".")}
        return got

    def light(self, roots: Iterable[str]) -> set[str]:
        """What ``roots`` and Hydra's plugin discovery (every module of ours under hydra_plugins) import."""
        return self.closure([*roots, *(m for m in self.modules if m.startswith("hydra_plugins."))])


def unjustified(graph: Graph, light_roots: Iterable[str], heavy: Iterable[str],
                order: dict[str, tuple[tuple[str, ...], str]]) -> list[LateImport]:
    light = graph.light(light_roots)
    heavy = tuple(heavy)
    bad = []
    for imp in graph.late:
        if imp.module in light and graph.brings_in(imp.targets, heavy) - graph.brings_in([imp.module], heavy):
            continue
        if imp.module in order:
            late = order[imp.module][0]
            if graph.brings_in(imp.targets, late) - graph.brings_in([imp.module], late):
                continue
        bad.append(imp)
    return bad


def report(bad: list[LateImport]) -> str:
    return "\n".join(f"{imp.path}:{imp.line}: {imp.text}" for imp in bad)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph(load(SRC, ["gmiexp", "hydra_plugins"]))


def test_every_late_gmiexp_import_is_justified(graph: Graph) -> None:
    assert graph.late, "the checker found no import inside a function: it is broken"
    bad = unjustified(graph, LIGHT_ROOTS, HEAVY, ORDER)
    assert not bad, ("gmiexp imports inside functions that keep nothing heavy out of mode=plan/doctor/--help and "
                     "are not in ORDER: move them to the module's top-level imports\n" + report(bad))


def test_plan_doctor_and_help_import_nothing_heavy_at_module_level(graph: Graph) -> None:
    """The static twin of test_app's run: the light closure brings in no HEAVY package."""
    assert {"gmiexp.app", "gmiexp.planner.build", "gmiexp.tools.doctor"} <= graph.light(LIGHT_ROOTS)
    assert graph.brings_in(graph.light(LIGHT_ROOTS), HEAVY) == set()


def test_order_modules_keep_their_packages_out(graph: Graph) -> None:
    """An ORDER module does not import at module level what it imports late (else its late imports do nothing)."""
    assert set(ORDER) <= set(graph.modules)
    assert {m: graph.brings_in([m], late) for m, (late, _) in ORDER.items() if graph.brings_in([m], late)} == {}


def _package(tmp_path: Path, files: dict[str, str]) -> Graph:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Graph(load(tmp_path, ["gmiexp"]))


def test_the_checker_fails_an_import_that_keeps_nothing_heavy_out(tmp_path: Path) -> None:
    graph = _package(tmp_path, {
        "gmiexp/__init__.py": "",
        "gmiexp/cli.py": "import gmiexp.light\n\ndef f():\n    from gmiexp import light, plot\n"
                         "    from gmiexp.light import g\n    import gmiexp.other\n",
        "gmiexp/light.py": "import os\n\ndef g():\n    from . import other\n",
        "gmiexp/plot.py": "from gmiexp import deep\n",
        "gmiexp/deep.py": "import matplotlib.pyplot\n",
        "gmiexp/other.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import matplotlib\n"
                           "def h():\n    import gmiexp.plot\n",
        "gmiexp/gmi.py": "def run():\n    import gmiexp.plot\n    from gmiexp import light\n"
                         "    if TYPE_CHECKING:\n        from gmiexp import other\n",
    })
    assert len(graph.late) == 7
    bad = unjustified(graph, ["gmiexp.cli"], ["matplotlib"], {"gmiexp.gmi": (("matplotlib",), "why")})
    # cli: `from gmiexp import light, plot` brings matplotlib in (via plot -> deep); the others do not.
    # light's `from . import other` and other's `import gmiexp.plot` (other is not imported by gmiexp.cli at
    # module level) are not in the light closure; gmi's `from gmiexp import light` brings in nothing it orders.
    assert sorted((b.module, b.line) for b in bad) == [("gmiexp.cli", 5), ("gmiexp.cli", 6), ("gmiexp.gmi", 3),
                                                      ("gmiexp.light", 4), ("gmiexp.other", 5)]
    assert "gmiexp/light.py:4: from . import other" in report(bad)
    # once cli imports plot at module level, its late import of plot keeps nothing out either
    graph = _package(tmp_path, {"gmiexp/cli.py": "import gmiexp.plot\n\ndef f():\n    from gmiexp import plot\n"})
    assert [(b.module, b.line) for b in unjustified(graph, ["gmiexp.cli"], ["matplotlib"], {})
            if b.module == "gmiexp.cli"] == [("gmiexp.cli", 4)]
