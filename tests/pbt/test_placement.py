"""Where members run: a member's config on its slot (the controller's check and ``mode=plan`` share it) and the
plan's view of a population, each member's node, slot and values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gmitest import FAST, cli_env, compose_config, gmiexp_cmd, in_namespace, needs_unshare

from fakes import mps as fake_mps
from fakes import nvml as fake_nvml
from gmiexp.app import run_plan
from gmiexp.errors import ConfigError
from gmiexp.pbt.controller import Population
from gmiexp.pbt.placement import STATES_PER_MEMBER, member_config, space
from gmiexp.pbt.rules import member_seed
from gmiexp.planner.build import build_plan
from gmiexp.planner.resources import disk_need, full_state_bytes, pages

POP = [*FAST, "num_gpus=1", "gmis_per_gpu=1", "pbt=default", "pbt.population=2"]


def test_a_member_is_composed_as_its_process_composes_it_on_its_slot() -> None:
    """The user's overrides less the controller's own, the objective's info key, the slot's, its seed, its values."""
    given = [*POP, "seed=7", "checkpoint=/x.pth", "launch.nnodes=2", "pbt.objective=x_velocity"]
    cfg = compose_config(*given)
    c = member_config(cfg, given, ["hardware.cpus=[1]"], 3, {"train.learning_rate": 1e-3})
    assert c.pbt is None and c.checkpoint == "" and (c.launch.nnodes, c.launch.node_rank) == (1, 0)
    assert c.seed == member_seed(7, 3) != 7 and c.hardware.cpus == [1] and c.train.learning_rate == 1e-3
    assert c.train.info_key == "x_velocity" and c.num_envs == 32  # its objective recorded; the user's own kept


def test_the_controller_checks_what_its_members_run_the_command_on_a_slot_not_the_typed_config(
        tmp_path: Path) -> None:
    """Members compose the command's overrides: the check plans that (before: the typed config, with the values)."""
    pop = Population(compose_config(*POP), tmp_path, [*POP, "num_envs=24"])
    pop.check()
    assert pop.frames_per_epoch == 24 * 16  # 24 environments x horizon 16, one GMI: what every member runs
    assert not (tmp_path / "members").exists()


def test_mode_plan_shows_member_0_s_plan_on_its_slot_and_where_every_member_runs(tmp_path: Path, capsys) -> None:
    """16 members on a DGX A100: 2 per GPU, each an MPS share of its GPU's one daemon (before: one run's plan,
    backend=direct on all 8 GPUs' first, and no member's place)."""
    given = ["hardware=dgx_a100", "task=Cartpole", "pbt=default", "pbt.population=16"]
    assert run_plan(compose_config("mode=plan", *given), tmp_path, overrides=given)["status"] == "ok"
    out, err = capsys.readouterr()
    plan = yaml.safe_load(out)
    assert plan["backend"] == "mps" and [g["device"] for g in plan["gmis"]] == [0, 0]
    assert [g["share"] for g in plan["gmis"]] == ["25%", "25%"]  # 2 members x 2 GMIs on a GPU
    assert "plan (member 0 on its slot gpu0/0; each member alike on its own): 2 GMIs on 1 node" in err
    assert "space (this node's 16 members, estimated): /dev/shm: " in err and "published states" in err
    # 2 members a GPU, each 2 GMIs of 256 environments of 704 bytes of rollouts
    assert "memory (rollout buffers, at least): GPU 0 (NVIDIA A100-SXM4-40GB): 704.0 KiB of 40.0 GiB (2 at once)\n" \
        in err
    assert "  slots: 2 per GPU on GPUs 0, 1, 2, 3, 4, 5, 6, 7" in err
    members = re.findall(r"^  member (\d+) \((gpu\d/\d): (.*?)\): ", err, re.M)
    assert [int(m) for m, _, _ in members] == list(range(16))
    assert [s for _, s, _ in members] == [f"gpu{m % 8}/{m // 8}" for m in range(16)]  # GPUs first, then shares
    assert members[9][2] == ("hardware.gpus=[1] backend=mps backend.sm_percent=[25,25] backend.daemon=shared")
    assert not (tmp_path / "members").exists()


def test_the_command_s_hardware_gpus_bound_where_the_population_runs(tmp_path: Path, capsys) -> None:
    """Before: every GPU of the host, whatever hardware.gpus said (a shared server's other GPUs included)."""
    given = ["hardware=dgx_a100", "hardware.gpus=[2,3]", "task=Cartpole", "pbt=default", "pbt.population=4"]
    assert run_plan(compose_config("mode=plan", *given), tmp_path, overrides=given)["status"] == "ok"
    err = capsys.readouterr().err
    assert "  slots: 2 per GPU on GPUs 2, 3" in err
    assert re.findall(r"^  member \d+ \((gpu\d/\d): hardware.gpus=\[(\d)\] ", err, re.M) == [
        ("gpu2/0", "2"), ("gpu3/0", "3"), ("gpu2/1", "2"), ("gpu3/1", "3")]


def test_the_command_s_hardware_cpus_bound_where_the_population_runs_on_a_cpu_host(tmp_path: Path) -> None:
    """Before: the controller split every core of its process between the members, whatever hardware.cpus said."""
    given = ["hardware=cpu", "hardware.cpus=[1]", *POP]
    pop = Population(compose_config(*given), tmp_path, given)
    pop.check()
    assert [slot.cpus for slot in pop.pool] == [(1,), (1,)]
    assert pop.place is not None and pop.place.overrides(pop.pool[0]) == ["hardware.cpus=[1]"]


def test_cores_the_population_cannot_have_exit_2_before_any_member_starts(tmp_path: Path) -> None:
    """Before: both members started and the first to plan its slot refused it (the population's exit 2 after)."""
    given = [*POP, "hardware.cpus=[7]"]
    pop = Population(compose_config(*given), tmp_path, given)
    with pytest.raises(ConfigError, match=re.escape("invalid hardware.cpus: [7]; valid: a non-empty subset of "
                                                    "this process's cores")):
        pop.check()
    assert not (tmp_path / "members").exists()


def test_a_gpu_the_host_lacks_exits_2_naming_it_and_the_valid_ones(tmp_path: Path, capsys) -> None:
    given = ["hardware=dgx_a100", "hardware.gpus=[2,9]", "task=Cartpole", "pbt=default", "pbt.population=4"]
    with pytest.raises(ConfigError, match=re.escape("invalid hardware.gpus entry: 9; valid: 0, 1, 2, 3, 4, 5, 6, 7")):
        run_plan(compose_config("mode=plan", *given), tmp_path, overrides=given)


def test_a_population_packed_off_mps_on_an_exclusive_gpu_exits_2_before_any_member_starts(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    """A (fake) H100 in EXCLUSIVE_PROCESS mode: 2 members on direct would be 2 processes there (before: both started,
    the second failed at its first CUDA call); on the GPU's one MPS daemon they plan."""
    fake_mps.install(tmp_path, monkeypatch)  # the control binary on PATH (mode=plan starts no daemon)
    env = {**cli_env(), "FAKE_NVML_GPUS": "1", "FAKE_NVML_COMPUTE_MODE": "3"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1] / "fakes" / "gpu_host"), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-m", "gmiexp", *POP, "backend=direct", f"hydra.run.dir={tmp_path / 'd'}"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "gmiexp: error: invalid 2 members a GPU with backend=direct on GPU 0: 2 processes, but its compute " \
           "mode is EXCLUSIVE_PROCESS, one process a GPU; valid: backend=mps" in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "d" / "members").exists()
    r = subprocess.run([sys.executable, "-m", "gmiexp", *POP, "mode=plan", f"hydra.run.dir={tmp_path / 'p'}"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "member 1 (gpu0/1: hardware.gpus=[0] backend=mps " in r.stderr, r.stderr[-3000:]


def test_a_nodes_members_need_their_runs_and_in_place_two_published_states_each(tmp_path: Path) -> None:
    """Each member's own check sees the space free when it starts: the population's counts them all."""
    plan, _ = build_plan(compose_config(*FAST, "num_gpus=1", "gmis_per_gpu=1"), tmp_path)
    shm, disk = space(compose_config(*POP, "pbt.population=4"), [plan] * 4)
    assert shm.items == {"published states": 4 * STATES_PER_MEMBER * pages(full_state_bytes(plan))}
    assert disk.items["checkpoints"] == 4 * disk_need(plan).items["checkpoints"]
    shm, _ = space(compose_config(*POP, "pbt.population=4", "pbt.exploit=restart"), [plan] * 4)
    assert shm.total == 0  # states go through checkpoint files


@needs_unshare
def test_a_dev_shm_too_small_for_the_members_published_states_is_refused_before_any_starts(
        tmp_path: Path, no_orphans: None) -> None:
    """Before: 4 members started, each failed at its first publish (ShmFull), and the population stopped past
    pbt.max_failures with exit 1 after every member had trained an interval."""
    r = in_namespace("mount -t tmpfs -o size=64k tmpfs /dev/shm && " + gmiexp_cmd(
        *POP, "pbt.population=4", "max_iterations=3", f"hydra.run.dir={tmp_path}"))
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("gmiexp: error:")]
    assert "/dev/shm has 64.0 KiB free; this node's 4 members need about /dev/shm: " in line
    assert "published states" in line and "pbt.exploit=restart" in line and "--shm-size" in line
    assert not (tmp_path / "members").exists()


def test_members_are_checked_on_the_slot_of_least_memory_before_any_starts(tmp_path: Path, monkeypatch) -> None:
    """A (fake) A100 with a 3g.20gb and a 1g.5gb instance: member 1's slot cannot hold 8M environments' rollout
    (before: the check planned every member on the first slot, and on the whole GPU's memory, whatever the slot's
    hardware.mig_instances said; member 1 refused at its start)."""
    migs = [*fake_nvml.a100_migs("3g.20gb", 1, 19968),
            fake_nvml.FakeMig("1g.5gb", "MIG-0e1f2a3b-4c5d-5e6f-8a9b-000000000001", 4864, gi=2)]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make([fake_nvml.a100_40gb(mig=1, migs=migs)]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the fake host's GPUs, not this process's share
    given = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "train.minibatch_size=1024", "pbt=default",
             "pbt.population=2"]
    Population(compose_config(*given, "num_envs=5000000"), tmp_path / "fits", [*given, "num_envs=5000000"]).check()
    pop = Population(compose_config(*given, "num_envs=8000000"), tmp_path / "not", [*given, "num_envs=8000000"])
    with pytest.raises(ConfigError, match=r"invalid num_envs: 8000000; .* on MIG instance 1g\.5gb "):
        pop.check()
    assert not (tmp_path / "not" / "members").exists()


def test_members_sharing_a_gpu_are_held_against_its_memory_together_before_any_starts(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """Two members on one (fake) A100's MPS shares: 26.2 GiB of rollouts each fit its 40 GiB alone, not together
    (before: each member was held against the whole GPU; both would start and the second run out of memory)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make([fake_nvml.a100_40gb()]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the fake host's GPUs, not this process's share
    fake_mps.install(tmp_path, monkeypatch)  # the control binary on PATH (a check starts no daemon)
    given = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "train.minibatch_size=1024", "pbt=default",
             "pbt.population=2"]
    Population(compose_config(*given, "num_envs=25000000"), tmp_path / "fits", [*given, "num_envs=25000000"]).check()
    pop = Population(compose_config(*given, "num_envs=40000000"), tmp_path / "not", [*given, "num_envs=40000000"])
    with pytest.raises(ConfigError, match=r"invalid num_envs: 40000000; valid: at most about 30,\d+,\d+ per GMI with 2 "
                                          r"trainings at once on GPU 0 .*, or fewer members a node \(pbt\.population, "
                                          r"launch\.nnodes\) or more GPUs \(hardware\.gpus\)\. this node's 2 members: "
                                          r"2 of them run at once on GPU 0 .* need at least 52\.5 GiB for rollout "
                                          r"buffers alone \(member 0 26\.2, member 1 26\.2 GiB\)"):
        pop.check()
    assert not (tmp_path / "not" / "members").exists()


def test_mode_plan_refuses_members_that_overflow_their_gpu_together(tmp_path: Path, capsys) -> None:
    """4 members on one of a DGX A100's GPUs, 13.1 GiB of rollouts each: nothing printed but the reason."""
    given = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "train.minibatch_size=1024", "pbt=default",
             "pbt.population=4", "mode=plan", "hardware=dgx_a100", "hardware.gpus=[0]", "num_envs=20000000"]
    with pytest.raises(ConfigError, match=r"at most about 15,\d+,\d+ per GMI with 4 trainings at once on GPU 0 "):
        run_plan(compose_config(*given), tmp_path, given)
    assert capsys.readouterr().out == ""
