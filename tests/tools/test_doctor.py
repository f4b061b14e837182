import os

from fakes import nvml as fake_nvml
from gmiexp.tools.doctor import doctor, format_doctor


def fake_which(name):
    return f"/usr/bin/{name}"


def nccl_ok():
    return {"available": True, "version": "2.21.5", "reason": "torch.distributed.is_nccl_available()"}


def test_doctor_on_a_fake_gpu_host(tmp_path):
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    (pipe / "nvidia-cuda-mps-control.pid").write_text(str(os.getpid()))  # a live pid: "running"
    nv = fake_nvml.make([fake_nvml.a100_40gb(0, mig=1, migs=fake_nvml.a100_migs()), fake_nvml.a100_40gb(1)])
    r = doctor(nvml=nv, which=fake_which, nccl=nccl_ok, pipe_dir=str(pipe))
    assert r["driver_version"] == "550.54.15" and r["cuda_version"] == "12.4"
    assert [(g["compute_capability"], g["memory_mb"], g["mig_mode"]) for g in r["gpus"]] == [
        ("8.0", 40960, "enabled"), ("8.0", 40960, "disabled")]
    assert r["mps_daemon"] == {"running": True, "pid": os.getpid(), "pipe_dir": str(pipe)}
    assert r["backends"]["mps"]["ok"] and not r["backends"]["mig"]["ok"]
    assert "sudo nvidia-smi -i 1 -mig 1" in r["backends"]["mig"]["reason"]
    text = format_doctor(r)
    for line in ["GPU 0: NVIDIA A100-SXM4-40GB, cc 8.0, 40960 MiB, MIG enabled",
                 "MIG 0: 3g.20gb 19968 MiB MIG-", "nvidia-cuda-mps-control: /usr/bin/nvidia-cuda-mps-control",
                 "NCCL: available 2.21.5", f"running (pid {os.getpid()})", "mps    yes",
                 "GPU(s) [0] have MIG enabled: MPS only inside instances",
                 "auto   no   backend=auto: MIG is enabled on GPU(s) [0] but not on [1]"]:
        assert line in text
    assert nv.calls.count("nvmlInit") == nv.calls.count("nvmlShutdown") == 1


def test_doctor_all_backends_on_an_h200_with_mig(tmp_path):
    nv = fake_nvml.make([fake_nvml.h200(mig=1)])
    r = doctor(nvml=nv, which=fake_which, nccl=nccl_ok, pipe_dir=str(tmp_path))
    assert all(v["ok"] for v in r["backends"].values())
    assert "serving -> serving layout tcg on compute capability 9.0 with MIG enabled" in \
        r["backends"]["auto"]["reason"]
    assert not r["mps_daemon"]["running"]


def test_doctor_without_driver(tmp_path):
    r = doctor(nvml=fake_nvml.make([], no_driver=True), which=lambda _n: None, pipe_dir=str(tmp_path))
    assert r["gpus"] == [] and r["host"]["source"] == "cpu"
    assert {k: v["ok"] for k, v in r["backends"].items()} == {"direct": True, "mps": False, "mig": False,
                                                              "auto": True}


def test_doctor_on_this_machine():
    r = doctor()
    text = format_doctor(r)
    assert text.startswith("gmiexp doctor")
    assert "backends:" in text and "direct yes" in text
    if not r["gpus"]:
        assert "GPUs: none" in text and not r["backends"]["mps"]["ok"]


def everything_installed(_module):
    return True


def test_doctor_recommends_mjlab_over_isaac_gym_on_hopper(tmp_path):
    nv = fake_nvml.make([fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1)])
    r = doctor(nvml=nv, which=fake_which, nccl=nccl_ok, pipe_dir=str(tmp_path), have=everything_installed)
    sims = r["simulators"]
    assert sims["mjlab"]["ok"] and not sims["isaacgym"]["ok"]  # even with Isaac Gym installed
    assert "IsaacGymEnvs issue 220" in sims["isaacgym"]["reason"] and "compute capability 9.0" in \
        sims["isaacgym"]["reason"]
    assert sims["recommended"].startswith("mjlab (task=Go1, task=G1")
    text = format_doctor(r)
    assert "recommended simulator: mjlab (task=Go1, task=G1, task=MjlabCartpole) over Isaac Gym" in text
    assert "isaacgym no   does not run on GPU 0 (NVIDIA H100 80GB HBM3" in text


def test_doctor_keeps_isaac_gym_on_ampere_when_installed(tmp_path):
    r = doctor(nvml=fake_nvml.make([fake_nvml.a100_40gb(0)]), which=fake_which, nccl=nccl_ok,
               pipe_dir=str(tmp_path), have=everything_installed)
    assert r["simulators"]["isaacgym"]["ok"] and r["simulators"]["recommended"].startswith("isaacgym")
    r = doctor(nvml=fake_nvml.make([fake_nvml.a100_40gb(0)]), which=fake_which, nccl=nccl_ok,
               pipe_dir=str(tmp_path), have=lambda m: m != "isaacgym")
    assert r["simulators"]["recommended"].startswith("mjlab")


def test_doctor_on_a_cpu_host_recommends_envpool_and_says_mjlab_is_slow_here(tmp_path):
    r = doctor(nvml=fake_nvml.make([], no_driver=True), which=lambda _n: None, pipe_dir=str(tmp_path),
               have=everything_installed)
    assert r["simulators"]["recommended"].startswith("envpool")
    assert "slowly" in r["simulators"]["mjlab"]["reason"]
    r = doctor(nvml=fake_nvml.make([], no_driver=True), which=lambda _n: None, pipe_dir=str(tmp_path),
               have=lambda m: m != "mjlab")
    assert not r["simulators"]["mjlab"]["ok"] and "gmiexp[mjlab]" in r["simulators"]["mjlab"]["reason"]


def test_doctor_names_a_compute_mode_that_admits_one_process_or_none(tmp_path):
    gpus = [fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1), fake_nvml.h100_80gb(2)]
    gpus[1].compute_mode, gpus[2].compute_mode = 3, 2
    r = doctor(nvml=fake_nvml.make(gpus), which=fake_which, nccl=nccl_ok, pipe_dir=str(tmp_path))
    assert [g["compute_mode"] for g in r["gpus"]] == ["default", "exclusive_process", "prohibited"]
    text = format_doctor(r)
    assert "GPU 0: NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, MIG disabled\n" in text
    assert "GPU 1: NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, MIG disabled, compute mode EXCLUSIVE_PROCESS (one " \
           "process: several GMIs through MPS only)" in text
    assert "GPU 2: NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, MIG disabled, compute mode PROHIBITED (no process)" in text
