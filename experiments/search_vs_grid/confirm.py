"""Re-measure the configurations the grid and the searches picked, head to head, to judge pick quality.

The grid's best is the maximum of 24 single noisy profiles, so it is biased upwards (winner's
curse) and "the grid's value at the pick" inherits the noise of one profile. Here every distinct
pick is profiled again ``repeats`` times, interleaved, with the same profiler and the standard
profile length; each repetition visits the picks in the opposite order to the one before (A B C,
C B A, ...), so a host drifting steadily favours no position; quality = median over repetitions of
pick / grid's pick. Writes ``confirm.csv`` (``compare.py`` reads it). Run by ``run.py`` (step
``confirm``, under the bench lock): ``python experiments/search_vs_grid/run.py 'steps=[confirm]'``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import results_dir  # noqa: E402

from gmiexp.config import SearchConfig  # noqa: E402
from gmiexp.rundir import write_csv  # noqa: E402
from gmiexp.search.profiler import SubprocessProfiler  # noqa: E402


def paired_ratio(pick: list[float], ref: list[float]) -> float:
    """Median over repetitions of pick / reference measured in the same repetition.

    Each repetition profiles every pick back to back, so their ratio cancels the host's drift
    (this VM's speed moves 20-30% over minutes), which a ratio of overall medians does not.
    """
    return statistics.median(p / r for p, r in zip(pick, ref, strict=True) if r > 0)


def confirm(grid_path: Path, search_paths: list[Path], repeats: int, overrides: list[str],
            warmup_iterations: int | None = None, profile_iterations: int | None = None,
            min_profile_steps: int | None = None) -> Path:
    """Re-measure every pick ``repeats`` times (even: each pick as often early as late); writes confirm.csv.

    The profile length is mode=search's own (``SearchConfig``) unless given.
    """
    d = SearchConfig()
    grid = json.loads(Path(grid_path).read_text())
    ref = (grid["gmis_per_gpu"], grid["num_envs"])
    picks = {ref: ["grid"]}
    for path in search_paths:
        s = json.loads(Path(path).read_text())
        if Path(path).resolve() != Path(grid_path).resolve() and s.get("num_envs"):
            picks.setdefault((s["gmis_per_gpu"], s["num_envs"]), []).append(Path(path).parent.name)
    def given(value: int | None, default: int) -> int:
        return default if value is None else value

    profile = SubprocessProfiler(workdir=Path(tempfile.mkdtemp(prefix="confirm-")), overrides=list(overrides),
                                 warmup_iterations=given(warmup_iterations, d.warmup_iterations),
                                 profile_iterations=given(profile_iterations, d.profile_iterations),
                                 min_profile_steps=given(min_profile_steps, d.min_profile_steps), timeout_s=600)
    rates: dict[tuple[int, int], list[float]] = {k: [] for k in picks}
    for rep in range(repeats):
        for g, n in (list(picks) if rep % 2 == 0 else list(reversed(picks))):
            r = profile(g, n)
            rates[(g, n)].append(r.top * g if r.runnable else 0.0)
            print(f"rep {rep}: G={g} N={n:5d} {rates[(g, n)][-1]:>10,.0f} env steps/s", flush=True)
    rows = []
    for (g, n), who in picks.items():
        med = statistics.median(rates[(g, n)])
        ratio = paired_ratio(rates[(g, n)], rates[ref])
        rows.append({"pick": f"G={g} N={n}", "chosen_by": "+".join(who), "median_env_steps_per_s": round(med, 1),
                     "runs": " ".join(f"{x:.0f}" for x in rates[(g, n)]), "vs_grid_pick": round(ratio, 3)})
        print(f"G={g} N={n:5d} ({'+'.join(who)}): median {med:,.0f}; {ratio:.1%} of the grid's pick "
              "(median of the per-repetition ratios)")
    return write_csv(rows, results_dir(__file__) / "confirm.csv")
