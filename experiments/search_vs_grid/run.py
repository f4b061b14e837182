"""mode=search against the grid over the same space on this host: grid, live searches, confirm, compare.

The steps and their settings are in config.yaml here. Every measuring step holds the bench lock
(``/tmp/gmiexp-bench.lock``, the same ``flock`` the other benchmarks take), so nothing else runs
meanwhile; the searches' profile cache and presets live under the results directory.

    python experiments/search_vs_grid/run.py
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import hydra
from omegaconf import DictConfig

from gmiexp.errors import invalid

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOCK = "/tmp/gmiexp-bench.lock"
STEPS = ("grid", "live", "confirm", "compare")


@contextmanager
def bench_lock() -> Iterator[None]:
    """The lock ``flock /tmp/gmiexp-bench.lock`` takes, held in this process (for the in-process confirm step)."""
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def search(cfg: DictConfig, out: Path, name: str, *extra: str) -> None:
    """``flock <lock> python -m gmiexp mode=search <overrides> ...`` writing ``<out>/<name>/search.json``."""
    cmd = ["flock", LOCK, sys.executable, "-m", "gmiexp", "mode=search", *cfg.overrides, *extra,
           f"search.output={name}.yaml", f"hydra.run.dir={out / name}"]
    subprocess.run(cmd, cwd=ROOT, check=True)


def live_names(out: Path, variant: str | None, runs: int) -> Iterator[str]:
    """``<variant>_live<k>`` for the next ``runs`` free k (the live searches already there are kept)."""
    name, n = variant or "paired", 1
    for _ in range(runs):
        while (out / f"{name}_live{n}").exists():
            n += 1
        yield f"{name}_live{n}"
        n += 1


def searches(out: Path, pattern: str) -> Sequence[Path]:
    return sorted(out.glob(f"{pattern}/search.json"))


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    unknown = sorted(set(cfg.steps) - set(STEPS))
    if unknown:
        print(f"error: {invalid('steps', unknown, STEPS)}", file=sys.stderr)
        raise SystemExit(2)
    out = ROOT / cfg.results_dir
    out.mkdir(parents=True, exist_ok=True)
    os.environ["GMIEXP_CACHE_DIR"], os.environ["GMIEXP_PRESET_DIR"] = str(out / "cache"), str(out / "presets")
    if "grid" in cfg.steps:
        shutil.rmtree(out / "cache", ignore_errors=True)
        for old in out.glob("*_live*"):
            shutil.rmtree(old)
        search(cfg, out, "grid", "search.grid=true", f"search.timeout_s={cfg.grid_timeout_s}")
        search(cfg, out, "paper", "search.variant=paper")
        search(cfg, out, "cn", "search.variant=cn")
    if "live" in cfg.steps:
        for name in live_names(out, cfg.variant, cfg.runs):
            search(cfg, out, name, "search.cache=false", *([f"search.variant={cfg.variant}"] if cfg.variant else []))
    grid = out / "grid" / "search.json"
    if "confirm" in cfg.steps:
        from confirm import confirm  # noqa: PLC0415 - sibling script

        with bench_lock():
            confirm(grid, list(searches(out, "*_live*")), cfg.confirm_repeats, list(cfg.overrides))
    if "compare" in cfg.steps:
        from compare import compare  # noqa: PLC0415 - sibling script

        compare(grid, searches(out, "*"))


if __name__ == "__main__":
    main()
