"""Helpers shared by the experiments' plot scripts: find a multirun, load its runs, write a PNG.

CSV goes through ``gmiexp.rundir.write_csv``, the one writer the benchmarks share too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gmiexp.tools.report import Run, load_runs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def multirun_dir(experiment: str, argv: Sequence[str] = ()) -> Path:
    """The directory given on the command line, else the newest ``multirun/<experiment>/<timestamp>``."""
    if argv:
        return Path(argv[0])
    runs = sorted((ROOT / "multirun" / experiment).glob("*/multirun.yaml"))
    if not runs:
        sys.exit(f"no multirun of {experiment} under {ROOT / 'multirun'}; run the sweep first")
    return runs[-1].parent


def runs_of(experiment: str, argv: Sequence[str] = ()) -> list[Run]:
    root = multirun_dir(experiment, argv)
    runs = [r for r in load_runs(root) if r.ok]
    if not runs:
        sys.exit(f"no successful run under {root}")
    print(f"{experiment}: {len(runs)} runs from {root}")
    return runs


def results_dir(study_file: str) -> Path:
    """``<study>/results``, or ``$GMIEXP_RESULTS_DIR/<study>`` (tests keep the real results untouched)."""
    study = Path(study_file).resolve().parent
    root = os.environ.get("GMIEXP_RESULTS_DIR")
    out = Path(root) / study.name if root else study / "results"
    out.mkdir(parents=True, exist_ok=True)
    return out


def save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return path
