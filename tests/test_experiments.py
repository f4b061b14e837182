"""Each experiment's smallest configuration runs end to end and its plot writes CSV + PNG (slow suite)."""

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"
PY = sys.executable


def run(*cmd, timeout=900, results=None):
    env = {**os.environ, **({"GMIEXP_RESULTS_DIR": str(results)} if results else {})}
    r = subprocess.run([*cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:])
    return r


def multirun(study, tmp_path, *overrides):
    sweep = tmp_path / study
    run(PY, "-m", "gmiexp", "-m", "--config-dir", str(EXP / study), "--config-name", "cpu", "max_iterations=3",
        f"hydra.sweep.dir={sweep}", *overrides)
    return sweep


@pytest.mark.slow
@pytest.mark.parametrize(("study", "overrides", "outputs"), [
    ("fig7_throughput", ["gmis_per_gpu=1,2"], ["fig7_throughput.csv", "fig7_throughput.png"]),
    ("fig9_reward", ["+fig9=cartpole_baseline,cartpole_gmi_drl", "num_envs=256"],
     ["fig9_reward.csv", "fig9_reward.png", "fig9_reward_summary.csv"]),
    ("fig10_num_envs", ["num_envs=64,256"], ["fig10_num_envs.csv", "fig10_num_envs.png"]),
    ("table7_reduction", ["reduction=mpr,har"],
     ["table7_reduction.csv", "table7_reduction.png"]),
])
def test_training_experiment_smallest(study, overrides, outputs, tmp_path):
    sweep = multirun(study, tmp_path, *overrides)
    run(PY, str(EXP / study / "plot.py"), str(sweep), results=tmp_path / "results")
    for name in outputs:
        assert (tmp_path / "results" / study / name).stat().st_size > 0


@pytest.mark.slow
def test_fig8_plans_on_cpu(tmp_path):
    run(PY, "-m", "gmiexp", "-m", "--config-dir", str(EXP / "fig8_backends"), "--config-name", "plan",
        f"hydra.sweep.dir={tmp_path}", "task=Ant")


@pytest.mark.slow
def test_vectorization_fusion_smallest(tmp_path):
    run(PY, str(EXP / "vectorization_fusion" / "bench.py"), f"results_dir={tmp_path}", "num_envs=[16,64]",
        "min_time_s=0.02", "fused_steps=4")
    assert (tmp_path / "vectorization_fusion.png").stat().st_size > 0


@pytest.mark.slow
def test_multinode_smallest(tmp_path):
    run(PY, str(EXP / "multinode" / "bench.py"), f"results_dir={tmp_path}", "task=Cartpole", "total_envs=64",
        "iterations=2", "pairs=2")
    text = (tmp_path / "bench.md").read_text()
    assert "median per-pair ratio (2 nodes / 1 node)" in text
    assert len((tmp_path / "bench.csv").read_text().splitlines()) == 1 + 4  # header, 2 pairs x 2 runs


@pytest.mark.slow
def test_elastic_bench_smallest(tmp_path):
    """Fixed 1 and 2 GMIs and auto from 1, one short repetition (a smoke test of the script, not a measurement)."""
    run(PY, str(EXP / "elastic" / "bench.py"), f"results_dir={tmp_path}", "task=Cartpole", "total_envs=16",
        "duration_s=25", "repetitions=1", "window=2", "budget=1.0", "max_gmis_per_gpu=2", "max_iterations=400",
        "eval_episodes=2", "seeds=[3]")
    text = (tmp_path / "elastic_bench.md").read_text()
    assert "median auto / best fixed frames" in text and "reward at equal wall time" in text and "seeds=[3]" in text
    assert "| auto |" in text and "evaluated final policy" in text
    assert len((tmp_path / "elastic_bench.csv").read_text().splitlines()) == 1 + 1


@pytest.mark.slow
def test_time_to_reward_smallest(tmp_path):
    """Two seeds of a tiny A-B study, interleaved, each final policy evaluated (a smoke test, not a measurement)."""
    side = "'task=Cartpole','num_envs=64','max_iterations=3'"
    run(PY, str(EXP / "time_to_reward" / "run.py"), f"results_dir={tmp_path}", "study=fig9_cartpole", "seeds=[1,2]",
        "eval_episodes=2", f"study.a.args=[{side},'gmis_per_gpu=1']", f"study.b.args=[{side},'gmis_per_gpu=2']")
    rows = list(csv.DictReader((tmp_path / "fig9_cartpole.csv").open()))
    assert [r["order"] for r in rows] == ["A-B", "B-A"]
    assert all(r["a_eval"] and r["b_eval"] and r["a_final"] for r in rows)
    text = (tmp_path / "fig9_cartpole.md").read_text()
    assert "evaluated final policies" in text and (tmp_path / "fig9_cartpole.png").is_file()


@pytest.mark.slow
def test_layouts_ant_smallest(tmp_path):
    """tcg_ex, tdg_ex and decoupled_async on rl-games' Ant file, two seeds, the order rotated (a smoke test)."""
    run(PY, str(EXP / "layouts_ant" / "run.py"), f"results_dir={tmp_path}", "seeds=[1,2]", "epochs=2",
        "total_envs=8")
    rows = list(csv.DictReader((tmp_path / "layouts_ant.csv").open()))
    assert [r["layout"] for r in rows] == ["tcg_ex", "tdg_ex", "decoupled_async", "tdg_ex", "decoupled_async",
                                           "tcg_ex"]
    assert all(r["final"] for r in rows) and (tmp_path / "layouts_ant.png").is_file()
    assert "decoupled_async: final" in (tmp_path / "layouts_ant.md").read_text()


@pytest.mark.slow
def test_equivalence_smallest(tmp_path):
    """1, 2 and 4 GMIs on rl-games' Ant file, two seeds, the order rotated, each final policy evaluated (a smoke)."""
    run(PY, str(EXP / "equivalence" / "run.py"), f"results_dir={tmp_path}", "seeds=[1,2]", "~tasks.cartpole",
        "tasks.ant.epochs=2", "tasks.ant.total_envs=8", "eval_episodes=1")
    rows = list(csv.DictReader((tmp_path / "equivalence.csv").open()))
    assert [int(r["gmis"]) for r in rows] == [1, 2, 4, 2, 4, 1]
    assert all(r["eval"] and r["at_equal_frames"] and r["equal_frames"] == r["frames"] for r in rows)
    curves = list(csv.DictReader((tmp_path / "equivalence_curves.csv").open()))
    assert {(r["seed"], r["gmis"]) for r in curves} == {(s, g) for s in "12" for g in "124"}
    text = (tmp_path / "equivalence.md").read_text()
    assert "| ant | return at equal frames | 4 - 1 |" in text and "| ant | evaluated final policy | 2 - 1 |" in text
    assert (tmp_path / "equivalence.png").is_file()


@pytest.mark.slow
def test_equivalence_records_an_rsl_rl_policy_mode_eval_refuses_as_not_evaluated(tmp_path):
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    run(PY, str(EXP / "equivalence" / "run.py"), f"results_dir={tmp_path}", "seeds=[1]", "gmis=[1,2]", "~tasks.ant",
        "tasks.cartpole.epochs=1", "tasks.cartpole.total_envs=16", "eval_episodes=1")
    rows = list(csv.DictReader((tmp_path / "equivalence.csv").open()))
    assert [int(r["gmis"]) for r in rows] == [1, 2] and not any(r["eval"] for r in rows)
    assert all(r["eval_note"].startswith("not evaluated: mode=eval exits 2") for r in rows)
    assert "| cartpole | evaluated final policy | 2 - 1 | - | - | - | not evaluated |" in (
        tmp_path / "equivalence.md").read_text()


def equivalence():
    spec = importlib.util.spec_from_file_location("equivalence_run", EXP / "equivalence" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_equivalence_pairs_each_partition_with_one_gmi_seed_by_seed():
    eq = equivalence()
    at = {(1, 1): 10.0, (1, 2): 12.0, (1, 4): 9.0, (2, 1): 20.0, (2, 2): 19.0, (2, 4): 30.0, (3, 1): 5.0,
          (3, 2): 7.0, (3, 4): 16.0}
    rows = [{"task": "ant", "seed": s, "gmis": g, "at_equal_frames": v, "eval": None if s == 3 else v}
            for (s, g), v in at.items()] + [{"task": "other", "seed": 1, "gmis": 1, "at_equal_frames": 0.0,
                                              "eval": 0.0}]
    out = {(p["measure"], p["pair"]): p for p in eq.paired(rows, ["ant"], [1, 2, 4])}
    two = out["at_equal_frames", "2 - 1"]
    assert two["differences"] == [2.0, -1.0, 2.0] and two["mean"] == pytest.approx(1.0)
    # sd sqrt(3), t(2) = 4.303: [1 - 4.303, 1 + 4.303] holds 0
    assert two["high"] == pytest.approx(1 + 4.303) and two["zero_inside"] is True
    four = out["at_equal_frames", "4 - 1"]
    assert four["differences"] == [-1.0, 10.0, 11.0] and four["zero_inside"] is True
    assert out["eval", "2 - 1"]["n"] == 2  # seed 3 was not evaluated


@pytest.mark.slow
def test_rslrl_bench_smallest(tmp_path):
    """One short pair of mjlab's own training and train=rslrl (a smoke test of the script, not a measurement)."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    run(PY, str(EXP / "rslrl" / "bench.py"), f"results_dir={tmp_path}", "pairs=1", "seconds=40", "num_envs=16")
    rows = list(csv.DictReader((tmp_path / "rslrl_bench.csv").open()))
    assert len(rows) == 1 and int(rows[0]["own_frames"]) > 0 and int(rows[0]["gmiexp_frames"]) > 0
    assert "median time-to-reward ratio" in (tmp_path / "rslrl_bench.md").read_text()


@pytest.mark.slow
def test_reshape_cost_smallest(tmp_path):
    """One warm and one cold Cartpole run, each re-shaped once (a smoke test of the script, not a measurement)."""
    run(PY, str(EXP / "elastic" / "reshape_cost.py"), f"results_dir={tmp_path}", "task=Cartpole", "total_envs=16",
        "request_after=3", "max_iterations=80", "pairs=1")
    text = (tmp_path / "reshape_cost.md").read_text()
    assert "| cost_s |" in text and "warm / cold" in text
    assert len((tmp_path / "reshape_cost.csv").read_text().splitlines()) == 1 + 2


@pytest.mark.slow
def test_pong_bench_smallest(tmp_path):
    """Pong, 2 GMIs against vanilla rl-games: one tiny pair (a smoke test of the script, not a measurement)."""
    tiny = ["train.horizon_length=8", "train.minibatch_size=16", "train.mini_epochs=1", "task.max_episode_length=10",
            "task.mlp_units=[16]", "task.cnn.convs=[{filters:4,kernel_size:8,strides:4,padding:0}]"]
    run(PY, str(EXP / "workloads" / "pong_bench.py"), f"results_dir={tmp_path}", "total_envs=4", "iterations=2",
        "pairs=1", "overrides=[" + ",".join(f'"{o}"' for o in tiny) + "]")
    text = (tmp_path / "pong_bench.md").read_text()
    assert "median env steps/s ratio (gmiexp 2 GMIs / rl_games)" in text and "reward at equal wall time" in text
    assert len((tmp_path / "pong_bench.csv").read_text().splitlines()) == 1 + 1  # header, one pair


@pytest.mark.slow
def test_packing_smallest(tmp_path):
    run(PY, str(EXP / "packing" / "run.py"), "packings=[2]", "repeats=1", "seeds=[1,2]", f"results_dir={tmp_path}",
        'sweep=["task=Cartpole","num_gpus=1","gmis_per_gpu=1","num_envs=32","max_iterations=2","launch.progress=false"]')
    (row,) = list(csv.DictReader((tmp_path / "packing.csv").open()))
    assert row["k"] == "2" and float(row["speedup"]) > 0 and float(row["env_steps_per_s_packed"]) > 0
    assert (tmp_path / "runs" / "r0_k2" / "pack.json").is_file()  # the packed sweep went through gmiexp_pack
    run(PY, str(EXP / "packing" / "plot.py"), str(tmp_path))
    assert (tmp_path / "packing.png").stat().st_size > 0


def test_confirm_judges_picks_by_paired_ratios_that_cancel_host_drift():
    sys.path.insert(0, str(EXP / "search_vs_grid"))
    try:
        from confirm import paired_ratio
    finally:
        sys.path.remove(str(EXP / "search_vs_grid"))
    # The host slows by ~35% from the middle of repetition 1 on; the pick is 95% of the reference whenever both
    # ran at the same speed. The ratio of overall medians (62 / 100) would call it 62%.
    pick, ref = [95.0, 60.0, 62.0], [100.0, 100.0, 65.0]
    assert paired_ratio(pick, ref) == pytest.approx(0.95)
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])


def test_compare_prices_a_search_at_the_grids_own_cost_per_point():
    sys.path.insert(0, str(EXP / "search_vs_grid"))
    try:
        from compare import grid_units
    finally:
        sys.path.remove(str(EXP / "search_vs_grid"))
    grid = {"trace": [{"gmis_per_gpu": 1, "num_envs": n, "wall_s": w} for n, w in ((128, 10.0), (256, 30.0))]}
    slow_host = {"trace": [{"gmis_per_gpu": 1, "num_envs": 128, "wall_s": 25.0}]}  # same point, host 2.5x slower
    assert grid_units(slow_host, grid) == pytest.approx(0.25)


def search_vs_grid(name):
    sys.path.insert(0, str(EXP / "search_vs_grid"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(EXP / "search_vs_grid"))


def test_compare_prices_shortened_and_repeated_profiles_by_their_cost_share():
    grid_units = search_vs_grid("compare").grid_units
    grid = {"trace": [{"gmis_per_gpu": 1, "num_envs": n, "wall_s": w} for n, w in ((128, 10.0), (256, 30.0))]}
    paired = {"trace": [{"gmis_per_gpu": 1, "num_envs": 128, "wall_s": 9.0, "cost_share": 0.8},
                        {"gmis_per_gpu": 1, "num_envs": 256, "wall_s": 20.0, "cost_share": 0.6},
                        {"gmis_per_gpu": 1, "num_envs": 128, "wall_s": 9.0, "cost_share": 0.8}]}
    assert grid_units(paired, grid) == pytest.approx((8.0 + 18.0 + 8.0) / 40.0)


def test_compare_judges_both_bars_on_the_re_measured_quality(tmp_path):
    compare = search_vs_grid("compare")
    (tmp_path / "confirm.csv").write_text("pick,chosen_by,median_env_steps_per_s,runs,vs_grid_pick\n"
                                          "G=2 N=4096,grid,1,1,1.0\nG=2 N=2048,paired_live1,1,1,0.97\n")
    confirmed = compare.confirmations(tmp_path / "confirm.csv")
    assert confirmed == {"G=2 N=4096": 1.0, "G=2 N=2048": 0.97}
    assert compare.confirmations(tmp_path / "absent.csv") == {}
    grid = {"gmis_per_gpu": 2, "num_envs": 4096, "profiles": 2, "profile_s": 40.0,
            "trace": [{"gmis_per_gpu": 2, "num_envs": n, "wall_s": w} for n, w in ((2048, 10.0), (4096, 30.0))]}
    est = {(2, 2048): 98.0, (2, 4096): 100.0}
    search = {"method": "paired", "gmis_per_gpu": 2, "num_envs": 2048, "profiles": 2, "profile_s": 19.0,
              "trace": [{"gmis_per_gpu": 2, "num_envs": 2048, "wall_s": 9.5, "cost_share": 1.0}] * 2}
    r = compare.row("paired_live1", search, grid, est, confirmed)
    assert (r["confirmed"], r["cost_ratio"], r["cost_ratio_grid_units"], r["meets_both"]) == (0.97, 0.475, 0.5, True)
    slow = compare.row("paired_live2", {**search, "profile_s": 21.0}, grid, est, confirmed)
    assert slow["meets_both"] is False  # 52.5% of the grid's wall time
    assert compare.row("paired_live3", search, grid, est, {})["meets_both"] is None  # not re-measured yet


def test_heat_map_marks_each_point_once_with_its_profile_count():
    labels = search_vs_grid("compare").point_labels([
        {"gmis_per_gpu": 1, "num_envs": 128, "decision": "init"},
        {"gmis_per_gpu": 1, "num_envs": 256, "decision": "candidate"},
        {"gmis_per_gpu": 1, "num_envs": 128, "decision": "pair"},
        {"gmis_per_gpu": 1, "num_envs": 256, "decision": "saturated"},
        {"gmis_per_gpu": 1, "num_envs": 256, "decision": "pair"}])
    assert labels == {(1, 128): "i2", (1, 256): "S3"}


def test_rl_games_baseline_trains_on_the_device_a_gmi_would_use(monkeypatch):
    """On a GPU host the baseline must train on the GMI's GPU, not on the CPU (ratios against it inflate)."""
    import importlib.util

    import torch

    from gmiexp.comm.manager import GMIManager

    spec = importlib.util.spec_from_file_location("run_baseline", EXP / "baseline_rlgames" / "run_baseline.py")
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    seen = {}

    class Stop(Exception):
        pass

    class Runner:  # stops before training: only the device choice is under test
        def __init__(self, algo_observer):
            pass

        def load(self, cfg):
            seen["params"] = cfg["params"]
            raise Stop

    monkeypatch.setattr(GMIManager, "torch_device", property(lambda self: torch.device("cuda", 0)))
    monkeypatch.setattr(baseline, "Runner", Runner)
    monkeypatch.setattr(baseline, "register_env", lambda task, threads, device, holder: seen.update(env=device))
    with pytest.raises(Stop):
        baseline.main(["task=Cartpole", "num_envs=16"])
    assert seen["env"] == "cuda:0"
    assert seen["params"]["config"]["device"] == "cuda:0"


SCRIPT_CONFIGS = [("reduction", "config"), ("channels", "config"), ("baseline_rlgames", "compare"),
                  ("baseline_rlgames", "run_file"), ("table8_channels", "run"), ("packing", "config"),
                  ("packing", "paper"), ("search_vs_grid", "config"), ("simulators", "config"),
                  ("vectorization_fusion", "config"), ("multinode", "bench"), ("rlgames_configs", "config"),
                  ("workloads", "pong_bench"), ("elastic", "bench"),
                  ("elastic", "recycle"), ("elastic", "reshape_cost"), ("time_to_reward", "time_to_reward"),
                  ("layouts_ant", "config"), ("equivalence", "equivalence"), ("pbt", "exploit_cost"), ("pbt", "run")]


@pytest.mark.parametrize(("study", "name"), SCRIPT_CONFIGS)
def test_every_script_config_composes_and_keeps_hydra_out_of_the_way(study, name):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(EXP / study), version_base=None):
        cfg = compose(name, return_hydra_config=True)
    assert cfg.hydra.job.chdir is False


def test_experiments_are_hydra_configs_and_scripts_not_argparse_or_shell():
    assert not list(EXP.rglob("*.sh"))
    for script in EXP.rglob("*.py"):
        assert "argparse" not in script.read_text(), script


def test_search_vs_grid_live_runs_take_the_next_free_names(tmp_path):
    (tmp_path / "paired_live1").mkdir()
    (tmp_path / "paired_live3").mkdir()
    assert list(search_vs_grid("run").live_names(tmp_path, None, 3)) == ["paired_live2", "paired_live4",
                                                                        "paired_live5"]
    assert list(search_vs_grid("run").live_names(tmp_path, "paper", 1)) == ["paper_live1"]
