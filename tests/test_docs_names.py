"""Every module path and ``gmiexp.*`` name that DESIGN.md, README.md and docs/*.md mention exists.

Paths: ``src/gmiexp/planner/build.py``, ``tests/launch/test_faults.py::test_x``, ``conf/layout/tcg.yaml``,
``experiments/elastic/bench.py`` (from the repository root), and short forms from ``src/gmiexp`` or ``src``:
``planner/build.py``, ``launch/rendezvous.py:connect``, ``layouts/experience.ExperienceLayout``. Names:
``gmiexp.planner.build``, ``gmiexp.layouts.LAYOUTS``, ``gmiexp.layouts:LAYOUTS``, ``python -m gmiexp.tools.report``
(the longest importable module, then attributes). A placeholder (``conf/layout/<name>.yaml``) is checked up to
the placeholder; a glob (``tests/helpers/ext_*.py``) must match a file. Markdown links are checked from the file
that holds them. Other packages' paths (``rl_games/...``, ``mjlab/scripts/train.py``) are not ours to check.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "gmiexp"
DOCS = [ROOT / "DESIGN.md", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: first components of paths from the repository root
ROOTS = {"src", "tests", "conf", "experiments", "docs", ".ci"}
#: first components of other projects' paths (their files are not in this repository)
EXTERNAL = {"rl_games", "algos_torch", "torch", "hydra", "mjlab", "isaacgym", "isaacgymenvs", "IsaacGymEnvs",
            "envpool", "submitit", "gymnasium", "wandb", "site-packages"}

# a path: two or more components joined by "/", not inside an absolute path, a URL, a variable or a placeholder
PATH = re.compile(r"(?<![\w./~$@:<>{}\[-])((?:\.?[\w-]+/)+[\w.*<>{}-]*(?:::?\w+)?)")
# gmiexp.a.b, gmiexp.a:B (not a file name such as conf/.../gmiexp.yaml, nor gmiexp-mps-... or gmiexp_pack)
NAME = re.compile(r"(?<![\w/.-])gmiexp((?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_]\w*))?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def found_in(line: str) -> list[tuple[str, str]]:
    """(kind, text) of every path, dotted name and link target in ``line``."""
    return ([("path", m.group(1)) for m in PATH.finditer(line)]
            + [("name", "gmiexp" + m.group(1) + (":" + m.group(2) if m.group(2) else "")) for m in NAME.finditer(line)]
            + [("link", m.group(1)) for m in LINK.finditer(line)])


def mentions(path: Path) -> list[tuple[int, str, str]]:
    """(line, kind, text) of every path, dotted name and link target in ``path``."""
    return [(n, kind, text) for n, line in enumerate(path.read_text().splitlines(), 1) if not FENCE.match(line)
            for kind, text in found_in(line)]


@cache
def defines(file: Path, name: str) -> bool:
    """``name`` is a top-level function, class or assignment of ``file`` (or a method/attribute of its classes)."""
    tree = ast.parse(file.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
    return False


def find(rel: str, bases: list[Path]) -> Path | None:
    """``rel`` under the first base that has it (a glob must match something)."""
    for base in bases:
        if any(c in rel for c in "*?"):
            if any(base.glob(rel)):
                return base
        elif (base / rel).exists():
            return base / rel
    return None


def check_path(token: str) -> bool | None:
    """True/False: the path exists or not; None: not a path of this repository (someone else's, or prose)."""
    token = token.rstrip(".,;)")
    token, _, member = token.partition("::")
    if not member and re.search(r"\.py:\w+$", token):  # launch/rendezvous.py:connect
        token, _, member = token.rpartition(":")
    first = token.split("/", 1)[0]
    if first in EXTERNAL:
        return None
    rooted = first in ROOTS
    short_dirs = {p.name for p in PKG.iterdir() if p.is_dir()} | {p.name for p in SRC.iterdir() if p.is_dir()}
    if "<" in token:  # a placeholder: check what comes before it, when that is a directory
        head = token.split("<", 1)[0]
        if not (rooted or first in short_dirs) or not head.endswith("/"):
            return None
        return find(head, [ROOT] if rooted else [PKG, SRC]) is not None
    last = token.rsplit("/", 1)[-1]
    stem, dot, attr = last.rpartition(".")
    code = token.endswith(".py") or token.endswith("/")
    dotted = bool(dot) and stem and attr.isidentifier() and not token.endswith(".py") and "." not in stem
    if not rooted and not (first in short_dirs and (code or dotted)) and not token.endswith(".py"):
        return None  # prose (MPS/MIG), metric names (eval/return_mean), run-dir files (gmis/<id>/...)
    bases = [ROOT] if rooted else [PKG, SRC, ROOT]
    found = find(token, bases)
    if found is None and dotted:  # launch/live.RunRows: the module's file, then the name in it
        base = token[: -len(attr) - 1]
        module = find(base + ".py", bases) or find(base + "/__init__.py", bases)
        return module is not None and defines(module, attr)
    if found is None:
        return False
    if member and found.suffix == ".py":
        return defines(found, member)
    return True


@cache
def check_name(name: str) -> bool:
    """The longest importable module of ``name``, then its attributes (``a.b:C`` is ``a.b.C``)."""
    parts = name.replace(":", ".").split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            break
    else:
        return False
    if i == len(parts):
        return True
    obj = importlib.import_module(module)
    for attr in parts[i:]:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def check_link(doc: Path, target: str) -> bool | None:
    if re.match(r"^[a-z]+:", target) or target.startswith("#"):
        return None
    return (doc.parent / target.split("#", 1)[0]).exists()


def missing_names() -> list[str]:
    bad = []
    for doc in DOCS:
        for line, kind, text in mentions(doc):
            if kind == "path":
                ok = check_path(text)
            elif kind == "name":
                ok = check_name(text)
            else:
                ok = check_link(doc, text)
            if ok is False:
                bad.append(f"{doc.relative_to(ROOT)}:{line}: {text} ({kind})")
    return bad


def test_every_module_path_and_name_in_the_docs_exists() -> None:
    bad = missing_names()
    assert not bad, f"{len(bad)} names in the docs do not exist:\n" + "\n".join(bad)


def test_the_checks_see_what_they_should() -> None:
    assert check_path("src/gmiexp/planner/build.py") and check_path("planner/build.py")
    assert check_path("tests/launch/test_faults.py") and check_path("conf/layout/tcg_ex.yaml")
    assert check_path("launch/rendezvous.py:connect") and check_path("layouts/experience.ExperienceLayout")
    assert check_path("conf/layout/<name>.yaml") and check_path("experiments/elastic/bench.py")
    assert check_path("cost/layout.py") is False and check_path("launch/reshape.py") is False
    assert check_path("comm/reduction.resolve") and check_path("launch/live.NoSuchThing") is False
    assert check_path("tools/monitor.py") is False
    assert check_path("tests/launch/test_launcher.py::no_such_test") is False
    assert check_path("rl_games/common/a2c_common.py") is None and check_path("eval/return_mean") is None
    assert check_path("MPS/MIG") is None and check_path("gpu/<i>/util") is None
    assert check_name("gmiexp.planner.build") and check_name("gmiexp.layouts.LAYOUTS")
    assert check_name("gmiexp.layouts:LAYOUTS") and check_name("gmiexp.status.StatusWriter")
    assert not check_name("gmiexp.metrics") and not check_name("gmiexp.launch.store")
    assert not check_name("gmiexp.layouts.NO_SUCH_NAME")
    line = ("`python -m gmiexp.tools.reshape <run_dir>` in `conf/hydra/job_logging/gmiexp.yaml`, "
            "`/dev/shm/gmiexp_<tag>_*`, `gmiexp-mps-<uid>`, `rl_games:configs/mujoco/ant_envpool.yaml`, "
            "[x](running.md#a)")
    got = {t for _, t in found_in(line)}
    assert got == {"gmiexp.tools.reshape", "conf/hydra/job_logging/gmiexp.yaml", "running.md#a"}

