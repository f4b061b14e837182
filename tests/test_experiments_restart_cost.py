"""experiments/restart_cost/run.py: the paired differences and issue 42's checks on hand-worked rows; its smoke setup
end to end (slow)."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "restart_cost" / "run.py"


def restart_cost() -> ModuleType:
    spec = importlib.util.spec_from_file_location("restart_cost_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(table: dict[tuple[int, str], tuple[float | None, float | None, float | None]]) -> list[dict[str, Any]]:
    """(seed, variant) -> (return at equal frames, at equal wall time, evaluated)."""
    return [{"seed": s, "variant": v, "at_equal_frames": f, "at_equal_wall": w, "eval": e}
            for (s, v), (f, w, e) in table.items()]


def test_auto_is_paired_with_each_seed_s_better_fixed_partition_at_equal_wall_time() -> None:
    rc = restart_cost()
    runs = rows({(1, "fixed1"): (10.0, 8.0, 100.0), (1, "fixed2"): (11.0, 6.0, 90.0), (1, "auto"): (9.0, 7.0, 95.0),
                 (2, "fixed1"): (20.0, 10.0, 200.0), (2, "fixed2"): (19.0, 12.0, 210.0),
                 (2, "auto"): (18.0, 13.0, 190.0), (1, "resumed"): (12.0, 5.0, 80.0),
                 (2, "resumed"): (18.0, 9.0, 220.0)})
    assert rc.best_fixed(runs) == {1: "fixed1", 2: "fixed2"}
    out = {(p["pair"], p["measure"]): p for p in rc.paired(runs)}
    # seed 1 against fixed1 (8 > 6), seed 2 against fixed2 (12 > 10), on every measure
    assert out["auto - best fixed", "at_equal_wall"]["differences"] == [-1.0, 1.0]
    assert out["auto - best fixed", "at_equal_frames"]["differences"] == [-1.0, -1.0]
    assert out["auto - best fixed", "eval"]["differences"] == [-5.0, -20.0]
    assert out["resumed - fixed2", "at_equal_frames"]["differences"] == [1.0, -1.0]
    # mean 0, sd sqrt(2), t(1) = 12.706: 0 +- 12.706 x sqrt(2) / sqrt(2)
    assert out["resumed - fixed2", "at_equal_frames"]["high"] == pytest.approx(12.706)
    assert ("reshaped - fixed2", "eval") not in out and ("auto2 - best fixed", "eval") not in out  # not run


def test_a_stopped_study_s_tables_read_back_as_the_rows_that_wrote_them(tmp_path: Path) -> None:
    """report_only=true rebuilds the report from the tables written after every seed: types and curves included."""
    rc = restart_cost()
    curve = [{"t": 12.5, "frames": 4096.0, "iteration": 1, "reward/mean": None},
             {"t": 15.25, "frames": 8192.0, "iteration": 2, "reward/mean": -3.5}]
    run = {"wall_s": 184.3, "restarts": 9, "restart_s": 15.7, "episodes_cut": 565, "frames_cut": 98169,
           "partitions": "1 2@10", "eval": None, "eval_note": "no checkpoint", "variant": "reshaped", "seed": 3,
           "run_dir": "/tmp/x/run", "eval_s": 0.0, "frames": 8192.0, "epochs": 2, "final": -3.5,
           "order": "reshaped-auto", "equal_frames": 8192.0, "at_equal_frames": -3.5, "equal_wall_s": 15.0,
           "at_equal_wall": None, "rows": curve}
    other = run | {"variant": "auto", "restarts": 0, "partitions": "1", "eval": 120.25, "eval_note": "ok",
                   "rows": curve[1:]}
    rc.write_tables([run, other], tmp_path)
    assert rc.read_tables(tmp_path) == [run, other]
    r = subprocess.run([sys.executable, str(SCRIPT), "report_only=true", f"results_dir={tmp_path}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    md = (tmp_path / "restart_cost.md").read_text()
    assert "seeds [3]" in md and "rebuilt from its tables" in md and "| 3 | auto | reshaped-auto | 2 |" in md
    assert (tmp_path / "restart_cost.png").is_file()
    empty = tmp_path / "empty"
    r = subprocess.run([sys.executable, str(SCRIPT), "report_only=true", f"results_dir={empty}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "invalid report_only" in r.stderr and "has no restart_cost.csv" in r.stderr
    assert not empty.exists()  # nothing left behind


def test_the_checks_pass_inside_the_noise_and_fail_on_a_clear_loss() -> None:
    rc = restart_cost()
    base = {(s, "fixed1"): (10.0 * s, 10.0 * s, 100.0) for s in (1, 2, 3)}
    base |= {(s, "fixed2"): (10.0 * s, 9.0 * s, 100.0 + s) for s in (1, 2, 3)}
    noisy = base | {(1, "resumed"): (11.0, 8.0, 102.0), (2, "resumed"): (19.0, 17.0, 101.0),
                    (3, "resumed"): (30.5, 26.0, 103.5), (1, "auto"): (9.0, 9.0, 99.0),
                    (2, "auto"): (19.0, 18.5, 99.0), (3, "auto"): (29.0, 27.0, 99.0)}
    got = rc.checks(rows(noisy), rc.paired(rows(noisy)))
    assert got[0].startswith("* resume every K") and ": PASS (" in got[0]
    # medians at equal wall time: fixed1 20, fixed2 18, auto 18.5 >= 0.9 x 20 = 18
    assert ": PASS (auto 18.50, best fixed fixed1 20.00, the bar 18.00, auto / best 0.925)" in got[1]
    lossy = noisy | {(1, "resumed"): (5.0, 5.0, 50.0), (2, "resumed"): (14.0, 10.0, 52.0),
                     (3, "resumed"): (24.0, 20.0, 54.0), (2, "auto"): (15.0, 17.0, 90.0)}
    got = rc.checks(rows(lossy), rc.paired(rows(lossy)))
    assert ": FAIL (" in got[0] and ": FAIL (auto 17.00" in got[1]
    both = noisy | {(1, "auto2"): (9.0, 9.5, 99.0), (2, "auto2"): (19.0, 16.0, 99.0), (3, "auto2"): (29.0, 27.0, 99.0)}
    got = rc.checks(rows(both), rc.paired(rows(both)))
    assert ": PASS (auto 18.50, best fixed fixed1 20.00" in got[1]  # each auto variant judged on its own median
    assert got[2].startswith("* auto2 (auto from 2 GMIs) reaches >= 90%") and ": FAIL (auto2 16.00" in got[2]
    out = {(p["pair"], p["measure"]): p for p in rc.paired(rows(both))}
    assert out["auto2 - best fixed", "at_equal_wall"]["differences"] == [-0.5, -4.0, -3.0]
    alone = rows({(1, "fixed1"): (1.0, 1.0, 1.0), (1, "resumed"): (1.0, 1.0, 1.0)})
    assert all("NOT JUDGED" in line for line in rc.checks(alone, rc.paired(alone)))


@pytest.mark.parametrize("setup", [[], ["setup=smoke"]])
def test_the_config_composes_and_keeps_hydra_out_of_the_way(setup: list[str]) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("restart_cost", overrides=setup, return_hydra_config=True)
    assert cfg.hydra.job.chdir is False and cfg.hydra.output_subdir is None
    assert (cfg.run.epochs, cfg.every, len(cfg.seeds)) == ((40, 20, 2) if setup else (100, 10, 5))
    restart_cost().check(cfg)  # the shipped settings pass the script's own check


@pytest.mark.parametrize("bad", ["variants=[fixed1,bogus]", "every=40", "every=0", "eval_episodes=-1", "seeds=[1,1]"])
def test_a_bad_setting_exits_2_naming_it_and_the_valid_ones(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("restart_cost", overrides=["setup=smoke", bad])
    with pytest.raises(SystemExit) as e:
        restart_cost().check(cfg)  # main's first step, before any run
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid {bad.split('=')[0]}: " in err and "valid:" in err


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_smoke_setup_runs_every_variant_end_to_end(tmp_path: Path) -> None:
    """Two seeds of the torch cart-pole, 40 epochs, a restart every 20 (a smoke test, not a measurement)."""
    r = subprocess.run([sys.executable, str(SCRIPT), "setup=smoke", f"results_dir={tmp_path}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=3500)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    runs = list(csv.DictReader((tmp_path / "restart_cost.csv").open()))
    assert [(int(x["seed"]), x["variant"]) for x in runs] == [(s, v) for s in (1, 2) for v in
                                                              ("fixed1", "fixed2", "resumed", "reshaped", "auto")]
    assert {x["order"] for x in runs} == {"fixed1-fixed2-resumed-reshaped-auto", "fixed2-resumed-reshaped-auto-fixed1"}
    by = {(int(x["seed"]), x["variant"]): x for x in runs}
    for s in (1, 2):
        assert {float(by[s, v]["frames"]) for v in ("fixed1", "fixed2", "resumed", "reshaped", "auto")} == {40 * 512.0}
        assert by[s, "resumed"]["restarts"] == "1" and by[s, "resumed"]["partitions"] == "2@0 2@20"
        assert int(by[s, "reshaped"]["restarts"]) >= 1 and by[s, "reshaped"]["partitions"].startswith("1 2@")
        assert by[s, "fixed1"]["restarts"] == "0" and all(by[s, v]["eval"] for v in ("fixed2", "resumed"))
    curves = list(csv.DictReader((tmp_path / "restart_cost_curves.csv").open()))
    assert {(c["seed"], c["variant"]) for c in curves} == {(str(s), v) for s, v in by}
    text = (tmp_path / "restart_cost.md").read_text()
    assert "| resumed - fixed2 | return at equal frames |" in text
    assert "| auto - best fixed | return at equal wall time |" in text
    assert "* resume every K on the same partition costs no return outside the paired noise: " in text
    assert "* auto reaches >= 90% of the best fixed partition's return at equal wall time" in text
    assert (tmp_path / "restart_cost.png").stat().st_size > 0
