"""Helpers shared by the experiments' plot and report scripts: find a multirun, load its runs, write a PNG, format
a report's figures (:func:`fmt`, :func:`spread`, :func:`interval_text`).

CSV goes through ``gmiexp.rundir.write_csv``, the one writer the benchmarks share too.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def fmt(v: Any, spec: str = ",.2f") -> str:
    """A report's figure, ``-`` where there is none."""
    return "-" if v is None else format(v, spec)


def spread(vals: Sequence[float | None], spec: str = ",.2f") -> str:
    """``mean ± sd (n=...)`` of the values there are (seeds' figures), ``-`` for none."""
    got = [v for v in vals if v is not None]
    if not got:
        return "-"
    sd = statistics.stdev(got) if len(got) > 1 else 0.0
    return f"{format(statistics.fmean(got), spec)} ± {format(sd, spec)} (n={len(got)})"


def interval_text(low: float | None, high: float | None) -> str:
    """A 95% interval as ``[low, high]`` with signs, ``-`` where there is none (one seed)."""
    return "-" if low is None or high is None else f"[{low:+,.2f}, {high:+,.2f}]"
