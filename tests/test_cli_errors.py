"""Bad input exits 2 with a message naming the value and the valid ones; nothing is launched."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config, run_cli
from hydra.errors import HydraException

from gmiexp.app import run
from gmiexp.errors import ConfigError

#: one real ``python -m gmiexp`` per way bad input is refused (each launch costs 3-4 s of CPU); the other cases of
#: each way are checked in this process below (COMPOSE_CASES, INPROCESS_CASES) and gmis_per_gpu=0 (a value out of
#: its range, gmiexp's ConfigError) by test_cli_value_error_exits_2
CLI_CASES = [
    # (overrides, text expected on stderr)
    (["layout=nope"], "nope"),  # an unknown group option (Hydra)
    # an unknown task: refused before Hydra, naming the files and mjlab's ids, after saying why it takes seconds
    (["task=NoSuchGame"], "looking in mjlab's registry (imports mjlab)\ngmiexp: error: invalid task: 'NoSuchGame'"),
    # a key added with Hydra's + that no schema declares (gmiexp names the valid ones)
    (["+train.devize=lazy"], "invalid key: 'train.devize'; valid: activation, algo,"),
    # an enum field refuses a bad value at compose time (Hydra's error; the CLI prints OmegaConf's cause)
    (["mode=dance"], "Invalid value 'dance', expected one of [train, plan, search, doctor, eval]"),
]
# slow: the unknown-task path imports mjlab.tasks (~9 s of CPU); the default suite keeps it in
# tests/config/test_mjlab_tasks.py::test_an_unknown_task_exits_2_naming_the_files_and_mjlab_s_ids
SLOW_CLI = {"task=NoSuchGame"}

#: refused while composing, in the CLI too (there: exit 2 with Hydra's message and its cause, as CLI_CASES shows)
COMPOSE_CASES = [
    (["backend=warp"], "warp"),
    (["reduction=ring"], "ring"),
    (["+train.device=lazy"], "train.device"),
    (["+device=x"], "invalid key: 'device'; valid: async_train, backend,"),
    # enum fields and per-option schemas refuse a bad value or a foreign field at compose time
    (["channel.on_full=sometimes"], "Invalid value 'sometimes', expected one of [block, drop]"),
    (["backend=direct", "backend.daemon=shared"], "Key 'daemon' not in 'DirectBackendConfig'"),
    (["backend=mps", "backend.profile=3g.40gb"], "Key 'profile' not in 'MpsBackendConfig'"),
]

INPROCESS_CASES = [
    # values past their declared range are refused before launching, naming the range
    (["seed=-2"], "invalid seed: -2; valid: -1..4294967295"),
    (["launch.heartbeat_timeout_s=-1"], "invalid launch.heartbeat_timeout_s: -1.0; valid: > 0 (seconds)"),
    (["task=Cartpole", "num_envs=100000000"], "invalid num_envs: 100000000; valid: at most about"),
    (["gmis_per_gpu=0"], "invalid gmis_per_gpu: 0; valid: >= 1"),
    (["num_envs=0"], "invalid num_envs: 0; valid: >= 1"),
    (["num_envs=-5"], "invalid num_envs: -5"),
    (["num_gpus=0"], "invalid num_gpus: 0"),
    (["max_iterations=0"], "invalid max_iterations: 0"),
    (["backend=mps", "hardware=cpu"], "backend=mps needs an NVIDIA GPU"),
    (["backend=mig", "hardware=cpu"], "backend=mig needs"),
    (["task=IsaacAnt"], "isaacgym"),
    (["role=nosuchmodule:Role"], "cannot import module 'nosuchmodule'"),
    (["role=gmiexp.plan:Plan"], "is not a gmiexp.role.Role subclass"),
    (["checkpoint=/does/not/exist.pth"], "invalid checkpoint"),
    (["train.lr_schedule=cosine"], "invalid train.lr_schedule: 'cosine'; valid: adaptive, linear, identity"),
    (["train.info_key=a..b"], "invalid train.info_key: 'a..b'; valid: empty, or a dotted key"),
    (["layout=tdg_ex", "train.info_key=time_outs"], "invalid train.info_key=time_outs with role=ppo layout=tdg_ex: "
                                                   "only PPO GMIs record an info key"),
    (["task.env_id=Ant-v99"], "invalid envpool env_id: 'Ant-v99'"),
    (["logger.mode=sometimes", "logger=wandb"], "invalid logger.mode"),
    (["hardware=dgx_a100"], "presets only plan (mode=plan)"),
    (["mode=plan", "hardware=h100x8", "hardware.mig=true", "backend=mig", "reduction=har"],
     "invalid reduction: 'har' with backend=mig: HAR builds NCCL groups across GPUs, and NCCL cannot "
     "communicate between MIG instances; valid with backend=mig: mpr, allreduce, auto"),
    (["mode=plan", "hardware=h100x8", "hardware.mig=true", "num_gpus=2", "backend=mig", "reduction=mrr"],
     "valid with backend=mig: mpr, allreduce, auto"),
    (["mode=plan", "hardware=dgx_a100", "hardware.mig=true", "backend=mps"], "MIG is enabled on it"),
    (["mode=plan", "hardware=auto", "hardware.mig=false"], "invalid hardware.mig: False"),
    (["mode=plan", "hardware=h100x8", "backend=mps", "hardware.mig=false", "backend.daemon=public"],
     "invalid backend.daemon: 'public'; valid: private, shared, existing"),
]


@pytest.mark.parametrize(("overrides", "expected"), [
    pytest.param(o, e, marks=pytest.mark.slow) if " ".join(o) in SLOW_CLI else (o, e) for o, e in CLI_CASES])
def test_cli_bad_group_option_exits_2(overrides: list[str], expected: str, tmp_path: Path) -> None:
    r = run_cli(*overrides, f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr
    assert not (tmp_path / "run" / "gmis").exists()


@pytest.mark.parametrize(("overrides", "expected"), COMPOSE_CASES)
def test_bad_option_is_refused_while_composing(overrides: list[str], expected: str) -> None:
    """Refused before anything runs; the CLI prints what is matched here (Hydra's message and its OmegaConf cause,
    or gmiexp's error) and exits 2, as the same kinds of refusal in CLI_CASES show."""
    with pytest.raises((HydraException, ConfigError)) as e:
        compose_config(*overrides)
    assert expected in f"{e.value}\n{e.value.__cause__}"


@pytest.mark.parametrize(("overrides", "expected"), INPROCESS_CASES)
def test_bad_value_exits_2_and_launches_nothing(overrides: list[str], expected: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    cfg = compose_config(*overrides)
    code = run(cfg, tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "plan.yaml").exists()
    assert not (tmp_path / "gmis").exists()


def test_cli_value_error_exits_2_and_leaves_no_run_dir(tmp_path: Path) -> None:
    """Hydra created the run dir, its .hydra/ and the job's log before gmiexp refused the value: all removed."""
    r = run_cli("gmis_per_gpu=0", f"hydra.run.dir={tmp_path / 'outputs' / 'run'}")
    assert r.returncode == 2
    assert "invalid gmis_per_gpu: 0" in r.stderr
    assert list(tmp_path.iterdir()) == []  # outputs/ too: this command created it


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=gmiexp_pack"]], ids=["basic", "pack"])
def test_a_sweep_stopped_by_a_refused_first_job_leaves_no_sweep_dir(tmp_path: Path, launcher: list[str]) -> None:
    """Hydra's launcher runs jobs in turn (the first refuses); the pack launcher checks every job before any runs."""
    r = run_cli("-m", *launcher, "gmis_per_gpu=0,1", f"hydra.sweep.dir={tmp_path / 'multirun' / 'x'}")
    assert r.returncode == 2 and "invalid gmis_per_gpu: 0" in r.stderr
    assert list(tmp_path.iterdir()) == []  # multirun.yaml, job 0's .hydra/ and log: all Hydra's, all removed


def test_cli_refused_in_an_existing_run_dir_keeps_that_runs_record(tmp_path: Path) -> None:
    """Hydra rewrites an existing run dir's .hydra/ before gmiexp refuses the command: the run's own is put back."""
    record = {"config.yaml": "seed: 7\n", "hydra.yaml": "hydra: {}\n", "overrides.yaml": "- seed=7\n"}
    (tmp_path / ".hydra").mkdir()
    for name, text in record.items():
        (tmp_path / ".hydra" / name).write_text(text)
    (tmp_path / "summary.json").write_text("{}")  # the run's own files stay as they are
    r = run_cli("gmis_per_gpu=0", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 2 and "invalid gmis_per_gpu: 0" in r.stderr
    assert {p.name: p.read_text() for p in (tmp_path / ".hydra").iterdir()} == record
    assert (tmp_path / "summary.json").read_text() == "{}"


def test_help_lists_real_options_and_documents_fields() -> None:
    """Schemas are stored outside the groups, so --help offers only options a user can pick; fields are listed."""
    r = run_cli("--help")
    assert r.returncode == 0, r.stderr
    groups = r.stdout.split("== Config groups ==")[1].split("== Fields ==")[0]
    assert "schema" not in groups
    assert "backend: auto, direct, mig, mps" in groups and "channel: multi, uni" in groups
    fields = r.stdout.split("== Fields ==")[1]
    assert "backend.daemon=private" in fields and "[valid: private, shared, existing]" in fields
    assert "launch.collective_timeout_s=300.0" in fields and "train.gamma=0.99" in fields
