"""experiments/pbt/run.py: PBT against fixed members. Its checks on given tables, its refusals, and its smoke setup."""

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "pbt" / "run.py"


def study():
    spec = importlib.util.spec_from_file_location("pbt_vs_fixed_run", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass resolves its annotations through the module
    spec.loader.exec_module(mod)
    return mod


def reps(pairs):
    """Repetitions from (pbt median, fixed median, pbt best, fixed best) tuples."""
    return [{"pbt": {"median_eval": pm, "best_eval": pb}, "fixed": {"median_eval": fm, "best_eval": fb}}
            for pm, fm, pb, fb in pairs]


def test_the_median_check_passes_only_when_every_repetition_and_the_interval_lie_above_zero():
    s = study()
    up = s.compare_checks(reps([(10, 1, 50, 40), (12, 2, 52, 41), (11, 0, 51, 42)]))
    assert [c.ok for c in up] == [True, True]
    assert "95% interval [+" in up[0].why
    one_below = s.compare_checks(reps([(10, 1, 50, 40), (12, 2, 52, 41), (0, 1, 51, 42)]))
    assert not one_below[0].ok and "-1.00" in one_below[0].why
    noisy = s.compare_checks(reps([(30, 1, 50, 40), (2, 1, 52, 41), (2, 1, 51, 42)]))  # all above, interval not
    assert not noisy[0].ok


def test_the_best_check_allows_a_repetition_lower_by_less_than_the_spread_only():
    s = study()
    within = s.compare_checks(reps([(10, 1, 60, 40), (12, 2, 20, 41), (11, 0, 70, 42)]))  # -21 inside a wide interval
    assert within[1].ok
    beyond = s.compare_checks(reps([(10, 1, 30, 40), (12, 2, 30, 41), (11, 0, 30, 39)]))  # -10, -11, -9
    assert not beyond[1].ok
    below = s.compare_checks(reps([(10, 1, 39, 40), (12, 2, 40, 41), (11, 0, 41, 42)]))  # -1 each: no spread at all
    assert not below[1].ok


def test_checks_fail_with_fewer_than_three_repetitions_or_a_policy_not_evaluated():
    s = study()
    two = s.compare_checks(reps([(10, 1, 50, 40), (12, 2, 52, 41)]))
    assert [c.ok for c in two] == [False, False] and "at least 3" in two[0].why
    missing = s.compare_checks(reps([(10, 1, 50, 40), (None, 2, 52, 41), (11, 0, 51, 42)]))
    assert not missing[0].ok and "no evaluated member" in missing[0].why


def test_the_exploit_cost_check_is_restart_over_in_place_medians(tmp_path):
    s = study()
    rows = [{"exploit": "inplace", "seconds": x, "frames_lost": 0.0} for x in (0.2, 0.4, 9.0)] + \
           [{"exploit": "restart", "seconds": x, "frames_lost": 512.0} for x in (3.0, 5.0)]
    lines, check = s.cost_check(rows, tmp_path / "exploit_cost.csv")
    assert check.ok and "restart / in place 10x" in check.why  # 4.0 / 0.4
    _, slower = s.cost_check([*rows, {"exploit": "restart", "seconds": 1.0, "frames_lost": 0.0}], tmp_path)
    assert not slower.ok  # median 3.0 / 0.4 = 7.5
    assert len(lines) == 2 and "frames thrown away median 512" in lines[1]
    _, none = s.cost_check([], tmp_path)
    assert not none.ok and "not measured" in none.why


def test_the_exploit_cost_is_read_where_run_true_writes_it_the_results_dir(tmp_path):
    """exploit_cost.run=true writes <results>/exploit_cost.csv; a later run without it reads that file by default."""
    from hydra import compose, initialize_config_dir

    s = study()
    (tmp_path / "exploit_cost.csv").write_text("repeat,exploit,member,interval,seconds,frames_lost,load_s\n"
                                               "0,inplace,1,1,0.5,0,0.1\n0,restart,2,1,20.0,256,\n")
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run")
    rows, path = s.exploit_cost_rows(cfg, tmp_path)
    assert path == tmp_path / "exploit_cost.csv" and [r["seconds"] for r in rows] == [0.5, 20.0]
    other = tmp_path / "elsewhere.csv"
    cfg.exploit_cost.csv = str(other)
    assert s.exploit_cost_rows(cfg, tmp_path) == ([], other)  # an explicit path is read as given


def test_the_smoke_setup_overrides_the_studys_scale_and_keeps_its_arms():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        full, smoke = compose("run"), compose("run", overrides=["setup=smoke"])
    assert (full.setup.name, full.reps, full.eval_episodes) == ("ant", 3, 10)
    assert "train.file=rl_games:configs/mujoco/ant_envpool.yaml" in full.setup.args
    assert (smoke.setup.name, smoke.reps, smoke.eval_episodes) == ("smoke", 1, 2)
    assert "task=Cartpole" in smoke.setup.args and smoke.arms == full.arms and smoke.members == full.members


def test_repetitions_alternate_which_arm_runs_first():
    s = study()
    assert [s.order(r) for r in range(3)] == [("pbt", "fixed"), ("fixed", "pbt"), ("pbt", "fixed")]


def test_bad_settings_exit_2_naming_each_before_anything_launches(tmp_path, capsys):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run", overrides=["reps=0", "first_rep=-1", "eval_episodes=-1", "+arms.other=[]",
                                        f"results_dir={tmp_path}/res"])
    with pytest.raises(SystemExit) as e:
        study().run(cfg)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid reps=0" in err and "invalid first_rep=-1" in err and "invalid eval_episodes=-1" in err
    assert "valid: exactly ['pbt', 'fixed']" in err
    assert not (tmp_path / "res").exists()  # nothing planned, trained or written


def sitting(s, cfg, res, first, evals, spread=True, report=True):
    """A study's results dir as run.py leaves it: repetitions ``first``.. with members evaluated ``evals``, each
    population's and evaluation's command recorded as Hydra records it, each evaluation's summary (sd 1 + the
    member's index) where the population's summary names the member's run dir.

    ``spread=False``: a table from before the evaluations' spread was recorded in it. ``report=False``: a study
    that stopped after these repetitions (its tables written, no report).
    """
    reps = []
    for rep, by_arm in enumerate(evals, start=first):
        reps.append({})
        for arm, values in by_arm.items():
            members = [{"rep": rep, "seed": 1 + rep, "arm": arm, "member": i, "lr_start": 1e-4 * (i + 1),
                        "lr_end": 2e-4, "lives": 1, "exploits_taken": 0, "final_return": v / 2, "eval": v,
                        "eval_std": 1.0 + i, "eval_note": "ok",
                        "curve": [{"life": 0, "t": 1.5 * k, "frames": 1024 * k, "reward": v * k} for k in (1, 2)]}
                       for i, v in enumerate(values)]
            population = res / "runs" / f"r{rep}_{arm}"
            hydra_record(population, s.overrides(cfg, arm, int(cfg.seed) + rep))
            for m in members:
                if not spread:
                    del m["eval_std"]
                life = population / "members" / str(m["member"]) / "life0"
                hydra_record(life / "eval", ["mode=eval", "checkpoint=x.pth", f"eval.episodes={cfg.eval_episodes}",
                                             f"seed={cfg.eval_seed}"])
                (life / "eval" / "summary.json").write_text(json.dumps(
                    {"metrics": {"eval/return_mean": m["eval"], "eval/return_std": 1.0 + m["member"]}}))
            (population / "summary.json").write_text(json.dumps({"members": [
                {"member": m["member"], "run_dir": str(population / "members" / str(m["member"]) / "life0")}
                for m in members]}))
            reps[-1][arm] = {"rep": rep, "seed": 1 + rep, "arm": arm, "order": "-".join(s.order(rep)),
                             "wall_s": 100.0 + rep, "population_wall_s": 99.0, "exploits": 3 if arm == "pbt" else 0,
                             "exploit_s_median": 0.04 if arm == "pbt" else None, "frames_lost_median": 0.0,
                             "median_eval": s.median(values), "best_eval": max(values),
                             "median_final": s.median(values) / 2, "best_final": max(values) / 2,
                             "members": members, "run_dir": str(population)}
    res.mkdir(parents=True, exist_ok=True)
    s.write_tables(cfg, reps, res)
    if report:
        s.report(cfg, reps, ([], s.Check("cost", False, "not measured")), 10.0, res)
    return reps


def hydra_record(run_dir, overrides):
    """``.hydra/overrides.yaml`` as Hydra writes it for a run started with ``overrides``."""
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))


def test_a_study_grown_over_two_sittings_reports_every_repetition_as_one(tmp_path):
    """first_rep continues a study elsewhere; reps=0 merge=[...] rebuilds both from their tables and checks all."""
    from hydra import compose, initialize_config_dir

    s = study()
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run", overrides=["setup.epochs=8"])
        merge = compose("run", overrides=["setup.epochs=8", "reps=0", f"merge=[{tmp_path}/a,{tmp_path}/b]",
                                          f"results_dir={tmp_path}/all"])
    one = sitting(s, cfg, tmp_path / "a", 0, [{"pbt": [5, 9, 7, 8], "fixed": [1, 2, 3, 4]},
                                              {"pbt": [6, 9, 7, 8], "fixed": [1, 2, 3, 5]}])
    two = sitting(s, cfg, tmp_path / "b", 2, [{"pbt": [9, 9, 7, 8], "fixed": [1, 2, 3, 6]}], spread=False,
                  report=False)  # b stopped after its repetition: its tables, no report
    assert "eval_std" not in next(csv.DictReader((tmp_path / "b" / "pbt_vs_fixed_ant.csv").open()))
    assert s.compare_checks(one)[0].why.startswith("2 repetition(s)")  # too few in either sitting alone
    checks = s.run(merge)
    assert checks[:2] == s.compare_checks(one + two) and checks[0].ok  # the same checks as one 3-repetition study
    text = (tmp_path / "all" / "pbt_vs_fixed_ant.md").read_text()
    assert "3 repetition(s), seeds 1, 2, 3" in text
    assert "| 2 | 3 | pbt-fixed | pbt | 102 | 3 | 0.04 | 1.0e-04->2.0e-04, 2.0e-04->2.0e-04, 3.0e-04->2.0e-04, " \
           "4.0e-04->2.0e-04 | 9.00 ± 1, 9.00 ± 2, 7.00 ± 3, 8.00 ± 4 | 8.50 | 9.00 |" in text  # b's spread, from disk
    curves = list(csv.DictReader((tmp_path / "all" / "pbt_vs_fixed_ant_curves.csv").open()))
    assert len(curves) == 3 * 2 * 4 * 2 and {c["rep"] for c in curves} == {"0", "1", "2"}
    assert (tmp_path / "all" / "pbt_vs_fixed_ant.png").is_file()
    again = s.finished_study(cfg, tmp_path / "all")[0]  # the merged tables read back as what was merged
    for r in two:
        for a in s.ARMS:
            for m in r[a]["members"]:
                m["eval_std"] = 1.0 + m["member"]
    assert [[r[a]["members"] for a in s.ARMS] for r in again] == [[r[a]["members"] for a in s.ARMS]
                                                                   for r in one + two]


def test_merging_a_study_of_other_settings_an_unfinished_one_or_a_repetition_twice_exits_2(tmp_path, capsys):
    from hydra import compose, initialize_config_dir

    s = study()
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run", overrides=["setup.epochs=8"])
        bad = compose("run", overrides=["setup.epochs=8", "reps=1", "first_rep=1",
                                        f"merge=[{tmp_path}/a,{tmp_path}/other,{tmp_path}/none]",
                                        f"results_dir={tmp_path}/all"])
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        other = compose("run", overrides=["setup.epochs=9"])
    sitting(s, cfg, tmp_path / "a", 0, [{"pbt": [5, 9], "fixed": [1, 2]}, {"pbt": [5, 9], "fixed": [1, 2]}])
    sitting(s, other, tmp_path / "other", 2, [{"pbt": [5, 9], "fixed": [1, 2]}])
    (tmp_path / "none").mkdir()
    with pytest.raises(SystemExit) as e:
        s.run(bad)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "other ran other settings: repetition 2 pbt ran ['max_iterations=9'] where this run has " \
           "['max_iterations=8']" in err
    assert "none has no pbt_vs_fixed_ant_reps.csv" in err
    assert "repetition(s) [1] twice" in err  # a's repetition 1 and first_rep=1 here
    assert not (tmp_path / "all").exists()  # nothing planned, trained or written


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_pbt_against_fixed_smoke_runs_end_to_end(tmp_path):
    """setup=smoke: 4 cart-pole members, both arms, each member evaluated (a smoke test of the script)."""
    cost = tmp_path / "cost.csv"
    cost.write_text("repeat,exploit,member,interval,seconds,frames_lost,load_s\n0,inplace,1,1,0.5,0,0.1\n"
                    "0,restart,2,1,20.0,256,\n")
    res = tmp_path / "res"
    r = subprocess.run([sys.executable, str(SCRIPT), "setup=smoke", f"results_dir={res}",
                        f"exploit_cost.csv={cost}"], cwd=ROOT, capture_output=True, text=True, timeout=3500)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    members = list(csv.DictReader((res / "pbt_vs_fixed_smoke.csv").open()))
    assert len(members) == 8 and {m["arm"] for m in members} == {"pbt", "fixed"}
    assert all(m["eval"] and m["eval_note"] == "ok" for m in members)
    start = {(m["arm"], m["member"]): float(m["lr_start"]) for m in members}
    assert all(start["pbt", str(i)] == start["fixed", str(i)] for i in range(4))  # the same drawn members
    assert len(set(start.values())) == 4 and all(1e-5 <= v <= 1e-2 for v in start.values())
    by_arm = {a["arm"]: a for a in csv.DictReader((res / "pbt_vs_fixed_smoke_reps.csv").open())}
    assert by_arm["fixed"]["exploits"] == "0" and by_arm["pbt"]["order"] == "pbt-fixed"
    curves = list(csv.DictReader((res / "pbt_vs_fixed_smoke_curves.csv").open()))
    assert {(c["arm"], c["member"]) for c in curves} == set(start)
    text = (res / "pbt_vs_fixed_smoke.md").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith(("PASS: ", "FAIL: "))]
    assert len(lines) == 3 and "at least 3" in lines[0]  # one repetition: the comparisons cannot pass
    assert lines[2].startswith("PASS: ") and "restart / in place 40x" in lines[2]
    assert (res / "pbt_vs_fixed_smoke.png").stat().st_size > 0


def test_fixed_from_reuses_a_finished_studys_fixed_arms_checked_against_this_runs_command(tmp_path, capsys):
    """fixed_from: each repetition's fixed arm from a study that ran it as this run would; the PBT arm may differ."""
    from hydra import compose, initialize_config_dir

    s = study()
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run", overrides=["setup.epochs=8"])
        graced = ["setup.epochs=8", "arms.pbt=[\"pbt.initial_delay=4096\"]", f"results_dir={tmp_path}/new"]
        new = compose("run", overrides=[*graced, f"fixed_from=[{tmp_path}/a,{tmp_path}/b]"])
        bad = compose("run", overrides=[*graced, f"fixed_from=[{tmp_path}/a,{tmp_path}/a,{tmp_path}/other]"])
        other = compose("run", overrides=["setup.epochs=8", "arms.fixed=[\"pbt.initial_delay=5\"]"])
    old = sitting(s, cfg, tmp_path / "a", 0, [{"pbt": [5, 9], "fixed": [1, 2]}, {"pbt": [5, 9], "fixed": [1, 3]}])
    sitting(s, cfg, tmp_path / "b", 2, [{"pbt": [5, 9], "fixed": [1, 4]}])
    sitting(s, other, tmp_path / "other", 3, [{"pbt": [5, 9], "fixed": [1, 5]}])
    got = s.reused(new)
    assert sorted(got) == [0, 1, 2] and got[2]["reused_from"] == str(tmp_path / "b")
    assert [m["eval"] for m in got[1]["members"]] == [1, 3]
    assert [m["curve"] for m in got[0]["members"]] == [m["curve"] for m in old[0]["fixed"]["members"]]
    with pytest.raises(SystemExit) as e:
        s.reused(bad)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "fixed_from: " in err and "other ran other settings: repetition 3 fixed ran " \
           "['pbt.initial_delay=5'] where this run has ['pbt.initial_delay=1000000000000']" in err
    assert "repetition(s) [0, 1] in more than one dir" in err

    # the PBT arm is the same population until its first change: equal there, or the reuse is refused in the report
    pbt = {"members": [{"curve": [*m["curve"], {"life": 0, "t": 4.5, "frames": 3072, "reward": -7.0}]}
                       for m in old[0]["fixed"]["members"]], "first_change": 2048}
    assert s.agreement(pbt, got[0]) == (4, True)  # 2 members x 2 epochs up to frame 2048; after it they may differ
    pbt["members"][1]["curve"][1] = {**pbt["members"][1]["curve"][1], "reward": 4.0001}
    assert s.agreement(pbt, got[0]) == (4, False)
    reps = [dict(r) for r in old]
    for r, same in zip(reps, (1, 0), strict=True):
        r["fixed"] = got[r["pbt"]["rep"]]
        r["pbt"] = {**r["pbt"], "same_epochs": 4, "same_as_fixed": same}
    checks = s.report(new, reps, ([], s.Check("cost", False, "not measured")), 1.0, tmp_path)
    assert checks[-1] == s.Check("every reused fixed arm is this run's population (equal returns before the first "
                                 "change)", False, "repetition(s) [1] differ")
    text = (tmp_path / "pbt_vs_fixed_ant.md").read_text()
    assert f"repetition 0's fixed arm was reused from {tmp_path / 'a'} (*: its wall time is that sitting's); the " \
           "PBT arm's members equal it over the 4 member-epochs" in text
    assert "wall time PBT / fixed per repetition: 1.00*, 1.00*" in text


def finished_population(s, cfg, run_dir, seed, evals, arm="pbt"):
    """A population run.py started and gmiexp finished in ``run_dir``: its command, summary, lineage's starts, each
    member's history and evaluation, as they lie on disk."""
    hydra_record(run_dir, s.overrides(cfg, arm, seed))
    members = []
    for i, v in enumerate(evals):
        life = run_dir / "members" / str(i) / "life0"
        (life / "gmis" / "0").mkdir(parents=True)
        (life / "gmis" / "0" / "history.jsonl").write_text("".join(
            json.dumps({"time": 1000.0 + k, "frames": 1024 * k, "reward/mean": v * k}) + "\n" for k in (1, 2)))
        hydra_record(life / "eval", ["mode=eval", "checkpoint=x.pth", f"eval.episodes={cfg.eval_episodes}",
                                     f"seed={cfg.eval_seed}"])
        (life / "eval" / "summary.json").write_text(json.dumps(
            {"metrics": {"eval/return_mean": v, "eval/return_std": 2.0}}))
        members.append({"member": i, "run_dir": str(life), "values": {s.LR: 2e-4}, "lives": 1, "return": v / 2})
    (run_dir / "pbt").mkdir()
    (run_dir / "pbt" / "state.jsonl").write_text("".join(
        json.dumps({"event": "start", "member": i, "life": 0, "values": {s.LR: 1e-4 * (i + 1)}}) + "\n"
        for i in range(len(evals))))
    (run_dir / "summary.json").write_text(json.dumps({"status": "ok", "wall_s": 321.0, "exploits": 0,
                                                      "members": members}))


def test_a_population_that_finished_in_runs_dir_is_collected_not_trained_again(tmp_path):
    """runs_dir: a study that stopped part way goes on; a finished population as this run would start it is read."""
    from hydra import compose, initialize_config_dir

    s = study()
    with initialize_config_dir(config_dir=str(SCRIPT.parent), version_base=None):
        cfg = compose("run", overrides=["setup.epochs=8", "timeout_s=5", f"runs_dir={tmp_path}"])
    finished_population(s, cfg, tmp_path / "r0_pbt", 1, [3.0, 5.0])
    got = s.population(cfg, "pbt", 0, 1, tmp_path)  # a launch would fail within timeout_s: nothing is trained
    assert got["wall_s"] == 321.0 and [m["eval"] for m in got["members"]] == [3.0, 5.0]
    assert [m["lr_start"] for m in got["members"]] == [1e-4, 2e-4] and got["first_change"] is None
    assert [p["reward"] for p in got["members"][1]["curve"]] == [5.0, 10.0]
    assert s.finished_before(cfg, "pbt", 2, tmp_path / "r0_pbt") is None  # another seed: another population
    assert s.finished_before(cfg, "fixed", 1, tmp_path / "r0_pbt") is None  # another arm's command
    reused = {**got, "arm": "fixed", "exploits": 0, "reused_from": "elsewhere",
              "members": [{**m, "arm": "fixed"} for m in got["members"]]}
    rows = [{"pbt": {**got, "same_epochs": 4, "same_as_fixed": 1}, "fixed": reused}] * 3
    (tmp_path / "res").mkdir()
    s.write_tables(cfg, rows, tmp_path / "res")  # a reused arm's columns beside a trained one's
    reps_csv = list(csv.DictReader((tmp_path / "res" / "pbt_vs_fixed_ant_reps.csv").open()))
    assert [(r["arm"], r["reused_from"], r["same_as_fixed"]) for r in reps_csv[:2]] == [
        ("pbt", "", "1"), ("fixed", "elsewhere", "")]
