"""The Plan layer stays below what runs: ``gmiexp.plan`` imports nothing of ``gmiexp.launch`` or ``gmiexp.rl``.

The planner turns a config into a Plan from the config, layouts, backends and hardware; what runs
the Plan (the launcher, requeue's resume, the learners) builds on it, never the other way round.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gmiexp.plan

PLAN_DIR = Path(gmiexp.plan.__file__).parent
ABOVE = ("gmiexp.launch", "gmiexp.rl")


def imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved against ``gmiexp.plan``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = "gmiexp.plan".split(".")[: 2 - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            found += [base, *(f"{base}.{a.name}" for a in node.names)]
    return found


def test_the_plan_package_imports_neither_the_launcher_nor_the_learners() -> None:
    files = sorted(PLAN_DIR.glob("*.py"))
    assert any(f.name == "build.py" for f in files)
    bad = {f"{f.name}: {m}" for f in files for m in imported_modules(f) if m.startswith(ABOVE)}
    assert not bad, f"gmiexp.plan imports from above it: {sorted(bad)}"


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from gmiexp.launch.requeue import resume\n    import gmiexp.rl.learner\n")
    assert {"gmiexp.launch.requeue", "gmiexp.rl.learner"} <= set(imported_modules(src))
