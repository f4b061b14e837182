"""hydra/launcher=gmiexp_pack end to end: real packed Cartpole sweeps through the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from gmitest import (
    FAST,
    TESTS_DIR,
    cli_env,
    gmiexp_cmd,
    in_namespace,
    needs_unshare,
    popen_cli,
    processes_naming,
    run_cli,
)

from fakes import mps as fake_mps
from gmiexp.plan import Plan
from gmiexp.status import read_history

GPU_HOST = TESTS_DIR / "fakes" / "gpu_host"  # a pynvml that shows FAKE_NVML_GPUS fake H100s
PACK = ["-m", "hydra/launcher=gmiexp_pack", *FAST, "num_envs=16", "num_gpus=1", "gmis_per_gpu=1"]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an end at t closes before a start at t opens)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = best = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def summaries(root: Path, n: int) -> list[dict]:
    return [json.loads((root / str(i) / "summary.json").read_text()) for i in range(n)]


@pytest.mark.slow
def test_four_members_packed_two_per_gpu_never_more_than_two_at_once(tmp_path: Path) -> None:
    r = run_cli(*PACK, "hydra.launcher.jobs_per_gpu=2", "seed=1,2,3,4", "max_iterations=3",
                f"hydra.sweep.dir={tmp_path}", timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = summaries(tmp_path, 4)
    assert [s["status"] for s in runs] == ["ok"] * 4
    assert sorted(s["config"]["seed"] for s in runs) == [1, 2, 3, 4]
    assert max_overlap([(s["started_at"], s["finished_at"]) for s in runs]) == 2  # packed, and never 3
    table = json.loads((tmp_path / "pack.json").read_text())
    assert table["jobs_per_gpu"] == 2 and table["makespan_s"] > 0
    assert [m["status"] for m in table["members"]] == ["ok"] * 4
    assert all(m["env_steps_per_s"] > 0 and m["wall_s"] > 0 for m in table["members"])
    assert {m["slot"] for m in table["members"]} == {"gpu0/0", "gpu0/1"}
    assert (tmp_path / "pack.csv").read_text().startswith("job,overrides,slot,status")
    assert r.stdout.count("gmiexp ok:") == 4  # stdout: the members' one-line summaries only
    assert "makespan" in r.stderr and "makespan" not in r.stdout


@pytest.mark.slow
def test_a_member_crashing_at_run_time_does_not_stop_the_others(tmp_path: Path) -> None:
    r = run_cli(*PACK, "hydra.launcher.jobs_per_gpu=4", "role=ppo,ppo,user_roles:FailRole,ppo", "max_iterations=2",
                f"hydra.sweep.dir={tmp_path}", timeout=400)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "1 multirun job(s) failed" in r.stderr and str(tmp_path / "2") in r.stderr
    assert [s["status"] for i, s in enumerate(summaries(tmp_path, 4)) if i != 2] == ["ok"] * 3
    table = json.loads((tmp_path / "pack.json").read_text())
    assert [m["status"] for m in table["members"]] == ["ok", "ok", "failed", "ok"]
    assert table["failed"] == [str(tmp_path / "2")]


def shm_mapped(procs: list[psutil.Process]) -> set[str]:
    out = set()
    for p in procs:
        try:
            out |= {m.path for m in p.memory_maps() if m.path.startswith("/dev/shm/")}
        except psutil.Error:
            pass
    return out


@pytest.mark.slow
def test_ctrl_c_stops_every_member_and_leaves_nothing(tmp_path: Path) -> None:
    # 3 members, 2 at a time: Ctrl-C while two train (MPR segments in /dev/shm) and one waits in the queue
    p = popen_cli(*PACK, "hydra.launcher.jobs_per_gpu=2", "gmis_per_gpu=2", "reduction=mpr", "seed=1,2,3",
                  "max_iterations=100000", f"hydra.sweep.dir={tmp_path}")
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not all(read_history(tmp_path / str(i), g) for i in (0, 1) for g in (0, 1)):
            time.sleep(0.5)
        assert all(read_history(tmp_path / str(i), 0) for i in (0, 1)), "members never trained"
        segments = shm_mapped(processes_naming(tmp_path))
        assert segments, "training members map their MPR segments"
        p.send_signal(signal.SIGINT)  # what the terminal's Ctrl-C sends to the launcher
        _out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-3000:]
    assert not processes_naming(tmp_path), "member or GMI processes left behind"
    assert not [s for s in segments if Path(s).exists()], "shared-memory segments left in /dev/shm"
    table = json.loads((tmp_path / "pack.json").read_text())
    assert [m["status"] for m in table["members"]] == ["interrupted", "interrupted", "not started"]
    assert not (tmp_path / "2").exists()


@pytest.mark.parametrize(("bad", "says"), [
    ("hydra.launcher.jobs_per_gpu=0", "invalid hydra.launcher.jobs_per_gpu: 0; valid: an integer >= 1, or auto"),
    ("hydra.launcher.recycle_payback=-1", "invalid hydra.launcher.recycle_payback: -1.0; valid: a number >= 0")])
def test_a_bad_launcher_setting_exits_2_before_anything_starts(tmp_path: Path, bad: str, says: str) -> None:
    r = run_cli(*PACK, bad, "seed=1,2", f"hydra.sweep.dir={tmp_path}", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert says in r.stderr
    assert not (tmp_path / "0").exists()


def test_bad_members_exit_2_before_any_member_starts_each_reason_once_with_its_members(tmp_path: Path) -> None:
    """Before, the sweep stopped at its first bad member's first reason and named no member."""
    r = run_cli(*PACK, "max_iterations=2,0", "train.gamma=0.99,2", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("gmiexp: error:")]
    assert errors == ["gmiexp: error: invalid train.gamma: 2.0; valid: 0..1 (members #1, #3; nothing was launched)",
                      "gmiexp: error: invalid max_iterations: 0; valid: >= 1 (members #2, #3; nothing was launched)"], \
        r.stderr[-3000:]
    assert not (tmp_path / "sweep").exists()  # no sweep dir left


@pytest.mark.parametrize(("sweep", "says"), [
    ("train.device=cpu,cuda,cuda", r"invalid train.device: 'cuda'; valid: auto, cpu, lazy\..* \(members #1, #2; "),
    ("mode=train,plan,plan", r"invalid mode: 'plan'; valid: train \(a packed sweep runs training jobs\), or plan "
                             r"for every member \(where each would run\) \(members #1, #2; ")])
def test_members_this_host_or_launcher_cannot_run_are_named_before_any_member_starts(
        tmp_path: Path, sweep: str, says: str) -> None:
    """What only the host's plan (a member planned on its slot) or the launcher refuses names its members too;
    before, the first member's reason alone."""
    r = run_cli(*PACK, "hardware=cpu", sweep, f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert re.search(rf"^gmiexp: error: {says}nothing was launched\)$", r.stderr, re.M), r.stderr[-3000:]
    assert not (tmp_path / "sweep").exists()


def test_a_members_unknown_key_exits_2_before_any_member_starts(tmp_path: Path) -> None:
    """``+train.typo=1`` passes Hydra's struct flag: before, every member was started and refused it itself (exit 2
    each, the sweep exit 1 with a table of failed members)."""
    r = run_cli(*PACK, "+train.typoo=1", "seed=1,2", f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert re.search(r"^gmiexp: error: invalid key: 'train.typoo'; valid: .* \(members #0, #1; nothing was launched\)$",
                     r.stderr, re.M), r.stderr[-3000:]
    assert not (tmp_path / "sweep").exists()  # no sweep dir left: no member ran


@pytest.mark.slow
def test_auto_profiles_the_first_member_in_paired_steps_and_says_what_it_chose(tmp_path: Path) -> None:
    r = run_cli(*PACK, "hydra.launcher.jobs_per_gpu=auto", "hydra.launcher.auto_max_jobs=2",
                "hydra.launcher.auto_warmup_iterations=1", "hydra.launcher.auto_profile_iterations=2",
                "hydra.launcher.auto_min_profile_steps=0", "seed=1,2", "max_iterations=2",
                f"hydra.sweep.dir={tmp_path}", timeout=500)
    assert r.returncode == 0, r.stderr[-3000:]
    table = json.loads((tmp_path / "pack.json").read_text())
    chosen = table["auto"]["jobs_per_gpu"]
    assert chosen in (1, 2) and table["jobs_per_gpu"] == chosen
    assert f"pack auto: jobs_per_gpu={chosen}: " in r.stderr and "paired ratio" in r.stderr
    (step,) = table["auto"]["steps"]
    assert (step["incumbent"], step["candidate"]) == (1, 2) and len(step["incumbent_steps_per_s"]) == 2
    profiles = tmp_path / "pack_auto"
    assert sorted(p.name for p in profiles.iterdir()) == ["k1_run1", "k1_run3", "k2_run2"]  # A-B-A
    pair = [yaml.safe_load((profiles / "k2_run2" / f"copy{i}" / "G1_N16" / ".hydra" / "overrides.yaml").read_text())
            for i in (0, 1)]
    cpus = [[o for o in p if o.startswith("hardware.cpus=")] for p in pair]
    assert len(cpus[0]) == len(cpus[1]) == 1  # each copy of the pair ran on its own slot's cores
    assert all(o not in " ".join(pair[0]) for o in ("max_iterations=2", "seed=2"))  # a profile sets its length
    assert [s["status"] for s in summaries(tmp_path, 2)] == ["ok", "ok"]


@pytest.mark.slow
def test_two_gpus_two_members_each_share_one_mps_daemon_per_gpu(tmp_path: Path, monkeypatch) -> None:
    fake = fake_mps.install(tmp_path, monkeypatch)  # the control binary on PATH, recording what it is sent
    shared_root = tmp_path / "t"  # shared daemons live in the temp dir: this test's own
    shared_root.mkdir()
    env = {**cli_env(), "FAKE_NVML_GPUS": "2", "TMPDIR": str(shared_root)}
    env["PYTHONPATH"] = os.pathsep.join([str(GPU_HOST), env["PYTHONPATH"]])  # members see 2 fake H100s
    sweep = tmp_path / "sweep"
    try:
        r = subprocess.run([sys.executable, "-m", "gmiexp", *PACK, "hydra.launcher.jobs_per_gpu=2", "seed=1,2,3,4",
                            "max_iterations=2", f"hydra.sweep.dir={sweep}"], capture_output=True, text=True,
                           env=env, timeout=400)
    finally:
        left = fake_mps.live_daemons(tmp_path)
        fake_mps.kill(left)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not left, "MPS daemons left running"
    sent: dict[str, list[str]] = {}
    for line in fake.record.read_text().splitlines():
        pipe, what = line.split(" ", 1)
        sent.setdefault(pipe, []).append(what)
    assert len(sent) == 2  # one daemon per GPU
    for pipe, what in sent.items():
        assert what.count("argv -d") == 1 and what.count("cmd quit") == 1, (pipe, what)
    plans = [Plan.load(sweep / str(i) / "plan.yaml") for i in range(4)]
    by_gpu: dict[int, set[str]] = {}
    for plan in plans:
        (g,) = plan.gmis
        assert plan.backend == "mps" and g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        by_gpu.setdefault(g.device, set()).add(g.env["CUDA_MPS_PIPE_DIRECTORY"])
    assert sorted(by_gpu) == [0, 1] and all(len(p) == 1 for p in by_gpu.values())
    assert {p for ps in by_gpu.values() for p in ps} == set(sent)  # each GPU's members on its one daemon


@pytest.mark.slow
def test_ctrl_c_while_auto_profiles_stops_the_profile_runs(tmp_path: Path) -> None:
    p = popen_cli(*PACK, "hydra.launcher.jobs_per_gpu=auto", "hydra.launcher.auto_min_profile_steps=10000000",
                  "seed=1,2", f"hydra.sweep.dir={tmp_path}")
    try:
        first = tmp_path / "pack_auto" / "k1_run1" / "copy0" / "G1_N16"
        deadline = time.time() + 240
        while time.time() < deadline and not read_history(first, 0):
            time.sleep(0.5)
        assert read_history(first, 0), "the first profile never trained"
        assert processes_naming(tmp_path)
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-3000:]
    assert not processes_naming(tmp_path), "profile runs left behind"
    assert not (tmp_path / "0").exists()  # no member started


@pytest.mark.slow  # ~40 s; the re-shape request it rides on runs by default in tests/launch/test_elastic.py
def test_recycle_grows_a_running_member_into_a_finished_members_cores(tmp_path: Path) -> None:
    """Two slots (one core each): the short member ends, the long one re-shapes onto both cores, 2 GMIs.

    The long member runs 600 epochs (~6 s of training here): with 150 it sometimes ended before the grow reached it.
    """
    r = run_cli(*PACK, "hydra.launcher.jobs_per_gpu=2", "hydra.launcher.recycle=true", "max_iterations=3,600",
                "hydra.launcher.recycle_payback=0",  # grow whatever is left (the payback rule: tests/pack/)
                f"hydra.sweep.dir={tmp_path}", timeout=400)
    assert r.returncode == 0, r.stderr
    assert "pack: #1 grows into gpu0/0: gmis_per_gpu 1 -> 2 on cores" in r.stderr
    long = json.loads((tmp_path / "1" / "summary.json").read_text())
    (rec,) = long["reshapes"]
    assert (rec["from"], rec["to"], rec["status"]) == (1, 2, "done")
    assert [h["iteration"] for h in long["history"]] == list(range(1, 601))
    assert Plan.load(tmp_path / "1" / "plan.yaml").world_size == 2
    table = json.loads((tmp_path / "pack.json").read_text())
    assert table["members"][1]["slot"].startswith("gpu0/1 +gpu0/0@") and table["members"][1]["reshapes"] == 1


@pytest.mark.slow  # ~70 s: four members; the choice itself runs by default in tests/pack/test_recycle.py
def test_recycle_moves_a_long_member_off_its_shared_core_when_the_short_ones_end(tmp_path: Path) -> None:
    """Four slots on two cores: both short members sit on core 0, both long ones share core 1 (slots go round-robin).

    When the short ones end, long #1 moves to core 0 with its one GMI (the first re-shape of the sweep, done live by
    re-pinning its threads); #3 keeps core 1, now its own, without one. Both train every epoch once.
    """
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("needs two cores")
    r = subprocess.run([sys.executable, "-m", "gmiexp", *PACK, "hydra.launcher.jobs_per_gpu=4", "seed=1,2",
                        "hydra.launcher.recycle=true", "hydra.launcher.recycle_payback=0", "max_iterations=3,150",
                        f"hydra.sweep.dir={tmp_path}"],
                       capture_output=True, text=True, timeout=400, env=cli_env(),
                       preexec_fn=lambda: os.sched_setaffinity(0, cores))
    assert r.returncode == 0, r.stderr
    grows = [line for line in r.stderr.splitlines() if " grows into " in line]
    assert re.fullmatch(rf"pack: #1 grows into gpu0/[02]: gmis_per_gpu 1 -> 1 on cores \[{cores[0]}\], "
                        rf"leaving shared cores \[{cores[1]}\]", grows[0]), r.stderr  # whichever short one ended last
    moved = json.loads((tmp_path / "1" / "summary.json").read_text())
    rec = moved["reshapes"][0]  # then, if #3 ended first (Cartpole's epochs are short), #1 grows onto both cores
    assert (rec["from"], rec["to"], rec["status"], rec["overrides"]) == (1, 1, "done", {"hardware.cpus": [cores[0]]})
    assert rec["live"] and rec["epoch"] < 150  # re-pinned where it ran: no restart
    assert [h["iteration"] for h in moved["history"]] == list(range(1, 151))
    stayed = json.loads((tmp_path / "3" / "summary.json").read_text())
    assert [h["iteration"] for h in stayed["history"]] == list(range(1, 151))
    members = json.loads((tmp_path / "pack.json").read_text())["members"]
    assert re.match(r"gpu0/1 \+gpu0/[02]@", members[1]["slot"]) and members[3]["slot"].startswith("gpu0/3")
    assert [r["status"] for r in moved["reshapes"]] == ["done"] * members[1]["reshapes"]


@pytest.mark.slow  # ~40 s; the choice runs by default in tests/pack/test_recycle.py, the request in test_reshape.py
def test_recycle_grows_a_running_member_into_a_finished_members_mps_share(tmp_path: Path, monkeypatch) -> None:
    """One (fake) H100, two slots of 50% of the SMs on its one shared MPS daemon: the short member ends, the long one
    re-shapes onto both shares (2 GMIs of 50% each) on the same daemon and trains every epoch once."""
    fake = fake_mps.install(tmp_path, monkeypatch)
    shared_root = tmp_path / "t"
    shared_root.mkdir()
    env = {**cli_env(), "FAKE_NVML_GPUS": "1", "TMPDIR": str(shared_root)}
    env["PYTHONPATH"] = os.pathsep.join([str(GPU_HOST), env["PYTHONPATH"]])
    sweep = tmp_path / "sweep"
    try:
        r = subprocess.run([sys.executable, "-m", "gmiexp", *PACK, "hydra.launcher.jobs_per_gpu=2",
                            "hydra.launcher.recycle=true", "hydra.launcher.recycle_payback=0", "max_iterations=3,150",
                            f"hydra.sweep.dir={sweep}"], capture_output=True, text=True, env=env, timeout=400)
    finally:
        left = fake_mps.live_daemons(tmp_path)
        fake_mps.kill(left)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not left, "MPS daemons left running"
    assert "pack: #1 grows into gpu0/0: gmis_per_gpu 1 -> 2 on 2 of GPU 0's 2 MPS shares (50% of the SMs each)" \
        in r.stderr, r.stderr[-3000:]
    long = json.loads((sweep / "1" / "summary.json").read_text())
    (rec,) = long["reshapes"]
    assert (rec["from"], rec["to"], rec["status"]) == (1, 2, "done")
    assert rec["overrides"] == {"backend.sm_percent": [50, 50]}
    assert [h["iteration"] for h in long["history"]] == list(range(1, 151))
    now = Plan.load(sweep / "1" / "plan.yaml")
    assert [g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] for g in now.gmis] == ["50", "50"]
    pipes = {g.env["CUDA_MPS_PIPE_DIRECTORY"] for g in now.gmis}
    short = Plan.load(sweep / "0" / "plan.yaml")
    assert pipes == {short.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]}  # the GPU's one shared daemon, still
    starts = [line for line in fake.record.read_text().splitlines() if "argv -d" in line]
    assert len(starts) == 1  # started once for the sweep, not again for the re-shape
    table = json.loads((sweep / "pack.json").read_text())
    assert table["members"][1]["slot"].startswith("gpu0/1 +gpu0/0@") and table["members"][1]["reshapes"] == 1


@needs_unshare
def test_members_that_fit_dev_shm_alone_but_not_together_are_refused_before_any_starts(
        tmp_path: Path, no_orphans: None) -> None:
    """Two tdg_ex members of 740 KiB of channels each, packed 2 a GPU, on a 1 MiB /dev/shm (before: each checked
    itself, both started, and the second died of ShmFull at its rings' creation)."""
    sweep = tmp_path / "sweep"
    r = in_namespace("mount -t tmpfs -o size=1m tmpfs /dev/shm && " + gmiexp_cmd(
        *PACK, "layout=tdg_ex", "gmis_per_gpu=2", "channel.target_bytes=16384", "channel.slots=8",
        "hydra.launcher.jobs_per_gpu=2", "seed=1,2", "max_iterations=300", f"hydra.sweep.dir={sweep}"))
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("gmiexp: error:")]
    assert "/dev/shm has 1.0 MiB free; the 2 members running at once need about /dev/shm: 1.4 MiB" in line
    assert "hydra.launcher.jobs_per_gpu" in line and "--shm-size" in line
    assert not sweep.exists() or not any(sweep.iterdir())


def test_mode_plan_shows_where_each_member_would_run_and_the_space_they_need(tmp_path: Path) -> None:
    """17 members on a DGX A100 from this host, 2 a GPU: 16 start on MPS shares, one queues (before: mode=plan and
    the preset were refused)."""
    sweep = tmp_path / "sweep"
    r = run_cli("-m", "hydra/launcher=gmiexp_pack", "mode=plan", "hardware=dgx_a100", "task=Cartpole",
                "hydra.launcher.jobs_per_gpu=2", f"seed={','.join(map(str, range(1, 18)))}",
                f"hydra.sweep.dir={sweep}", timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "pack plan: 17 members, 2 per GPU on GPUs [0, 1, 2, 3, 4, 5, 6, 7] (16 at a time; the rest queue)" \
        in r.stderr
    members = re.findall(r"^  member #(\d+) \(.*?seed=(\d+)\) -> (\S+?):? ", r.stderr, re.M)
    assert [(int(k), s) for k, _, s in members] == [
        *((k, f"gpu{k % 8}/{k // 8}") for k in range(16)), (16, "queued")]
    assert "-> gpu3/1: hardware.gpus=[3] backend=mps backend.sm_percent=[25,25] backend.daemon=shared (2 GMIs, " \
           "backend mps" in r.stderr
    assert re.search(r"^space \(estimated\): the 16 members running at once need /dev/shm: .*; the sweep's 17 "
                     r"members will write run directory: ", r.stderr, re.M)
    # 2 members a GPU, each 2 GMIs of 256 environments of 704 bytes of rollouts
    assert "memory (rollout buffers, at least): GPU 0 (NVIDIA A100-SXM4-40GB): 704.0 KiB of 40.0 GiB (2 at once)\n" \
        in r.stderr
    assert not sweep.exists()  # nothing ran, nothing left
