import pytest
from backend_helpers import nvml_host, realise

from fakes import nvml as fake_nvml
from gmiexp import hardware
from gmiexp.backends import get, mig
from gmiexp.backends.mig_profiles import PRODUCTS, find, largest_fitting, product_of
from gmiexp.backends.mps_clients import kept_by
from gmiexp.config.schema import MigBackendConfig
from gmiexp.errors import ConfigError
from gmiexp.hardware import discover


def preset(name: str) -> hardware.Hardware:
    """A preset with MIG on (presets are stock machines: MIG off)."""
    return hardware.with_mig(hardware.preset(name), True)


def a100_with(profile="3g.20gb", n=2, total_mb=19968):
    return nvml_host(fake_nvml.a100_40gb(mig=1, migs=fake_nvml.a100_migs(profile, n, total_mb)))


def test_maps_each_gmi_to_an_existing_instance(tmp_path):
    hw = a100_with()
    plan, _ = realise(hw, tmp_path, gmis_per_gpu=2, name="mig")
    uuids = [d.uuid for d in hw.gpus[0].mig_devices]
    assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis] == uuids
    assert all(u.startswith("MIG-") for u in uuids)
    assert [g.share for g in plan.gmis] == ["3g.20gb", "3g.20gb"]
    assert plan.setup_commands == [] and plan.teardown_commands == []
    assert [i["mig_index"] for i in plan.mig.instances] == [0, 1]


def test_missing_instances_print_the_exact_commands(tmp_path):
    hw = a100_with(n=1)
    with pytest.raises(ConfigError) as info:
        realise(hw, tmp_path, gmis_per_gpu=2, name="mig", profile="3g.20gb")
    msg = str(info.value)
    assert "sudo nvidia-smi mig -i 0 -cgi 9 -C" in msg
    assert "backend.create_instances=true" in msg


def test_instances_in_the_way_are_named_and_left_alone(tmp_path):
    """Someone else's instances leave no room: exit 2 naming them (by UUID and GI/CI id), never -dci/-dgi on the GPU."""
    hw = a100_with()  # two 3g.20gb use 6 of 7 slices; three 2g.10gb need 6 more
    with pytest.raises(ConfigError) as info:
        realise(hw, tmp_path, gmis_per_gpu=3, name="mig", create_instances=True)
    msg = str(info.value)
    for d in hw.gpus[0].mig_devices:
        assert f"{d.uuid} (3g.20gb, GPU instance {d.gi_id}, compute instance 0)" in msg
    assert "which gmiexp did not create, are in the way" in msg and "gmiexp leaves them alone" in msg
    assert "sudo nvidia-smi mig -i 0 -dci -gi 1 -ci 0 && sudo nvidia-smi mig -i 0 -dgi -gi 1" in msg
    assert not any(ln.strip() in ("sudo nvidia-smi mig -i 0 -dci", "sudo nvidia-smi mig -i 0 -dgi")
                   for ln in msg.replace(" && ", "\n").replace(": ", "\n").splitlines())


class FakeSmi:
    """nvidia-smi mig on a fake GPU: -cgi <ids> -C makes instances (next GI ids), -dgi -gi G removes GI G."""

    def __init__(self, gpu: fake_nvml.FakeGPU, profile: str = "3g.20gb") -> None:
        self.gpu, self.profile, self.ran = gpu, profile, []

    def __call__(self, cmd: list[str]) -> None:
        self.ran.append(" ".join(cmd))
        if "-cgi" in cmd:
            for _ in cmd[cmd.index("-cgi") + 1].split(","):
                gi = max([m.gi for m in self.gpu.migs], default=0) + 1
                self.gpu.migs.append(fake_nvml.FakeMig(self.profile, f"MIG-0e1f2a3b-4c5d-5e6f-8a9b-{gi:012d}",
                                                       19968, gi=gi, ci=0))
        if "-dgi" in cmd:
            gi = int(cmd[cmd.index("-gi") + 1])
            self.gpu.migs = [m for m in self.gpu.migs if m.gi != gi]


def test_a_run_removes_only_the_instances_it_created(tmp_path, monkeypatch):
    theirs = fake_nvml.FakeMig("3g.20gb", "MIG-0e1f2a3b-4c5d-5e6f-8a9b-theirs000005", 19968, gi=5, ci=0)
    gpu = fake_nvml.a100_40gb(mig=1, migs=[theirs])
    nv = fake_nvml.make([gpu])
    hw = discover(nv)
    smi = FakeSmi(gpu)
    monkeypatch.setattr(mig, "nvidia_smi", smi)
    backend = mig.MIGBackend(MigBackendConfig(create_instances=True, profile="3g.20gb"), hw, nvml=nv)
    from backend_helpers import plan_for

    plan = backend.realise(plan_for(hw, gmis_per_gpu=2), tmp_path)
    with backend.session(plan, tmp_path):
        assert [(c["gi"], c["ci"]) for c in plan.mig.created] == [(6, 0)]  # recorded at creation
        assert {g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis} == {theirs.uuid, gpu.migs[1].uuid}
    assert smi.ran == ["nvidia-smi mig -i 0 -cgi 9 -C", "nvidia-smi mig -i 0 -dci -gi 6 -ci 0",
                       "nvidia-smi mig -i 0 -dgi -gi 6"]
    assert gpu.migs == [theirs]  # someone else's instance is still there


@pytest.mark.parametrize("name, n, profile, cmd", [
    ("dgx_a100", 3, "2g.10gb", "sudo nvidia-smi mig -i 1 -cgi 14,14,14 -C"),
    ("dgx_a100", 2, "3g.20gb", "sudo nvidia-smi mig -i 1 -cgi 9,9 -C"),
    ("h200x1", 2, "3g.71gb", "sudo nvidia-smi mig -i 0 -cgi 9,9 -C"),
    ("h100x8", 4, "1g.20gb", "sudo nvidia-smi mig -i 1 -cgi 15,15,15,15 -C"),
])
def test_preset_plans_list_creation_commands(tmp_path, name, n, profile, cmd):
    num_gpus = 2 if name != "h200x1" else 1
    plan, _ = realise(preset(name), tmp_path, num_gpus=num_gpus, gmis_per_gpu=n, name="mig")
    assert cmd in plan.setup_commands
    assert {g.share for g in plan.gmis} == {profile}
    assert all(g.env["CUDA_VISIBLE_DEVICES"].startswith(mig.PENDING) for g in plan.gmis)
    assert len({g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis}) == len(plan.gmis)


def test_create_instances_runs_commands_then_maps_new_uuids(tmp_path, monkeypatch):
    gpu = fake_nvml.a100_40gb(mig=1)
    nv = fake_nvml.make([gpu])
    hw = discover(nv)
    ran = []

    def fake_smi(cmd):
        ran.append(cmd)
        gpu.migs.extend(fake_nvml.a100_migs("3g.20gb", 2))

    monkeypatch.setattr(mig, "nvidia_smi", fake_smi)
    backend = mig.MIGBackend(MigBackendConfig(create_instances=True), hw, nvml=nv)
    from backend_helpers import plan_for

    plan = backend.realise(plan_for(hw, gmis_per_gpu=2), tmp_path)
    assert plan.setup_commands == ["sudo nvidia-smi mig -i 0 -cgi 9,9 -C"]
    with backend.session(plan, tmp_path):
        assert ran == [["nvidia-smi", "mig", "-i", "0", "-cgi", "9,9", "-C"]]
        assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis] == [m.uuid for m in gpu.migs]


def test_created_instances_get_the_shared_daemon_of_their_real_uuid(tmp_path, monkeypatch, fake_mps):
    import tempfile

    from gmiexp.backends import mps_daemon

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "t"))
    gpu = fake_nvml.a100_40gb(mig=1)
    nv = fake_nvml.make([gpu])
    hw = discover(nv)
    monkeypatch.setattr(mig, "nvidia_smi", lambda cmd: gpu.migs.extend(fake_nvml.a100_migs("7g.40gb", 1)))
    cfg = MigBackendConfig(create_instances=True, mps_in_mig=True, daemon="shared")
    backend = mig.MIGBackend(cfg, hw, nvml=nv)
    from backend_helpers import plan_for

    plan = backend.realise(plan_for(hw, gmis_per_gpu=2), tmp_path)
    with backend.session(plan, tmp_path):
        want = mps_daemon.shared_daemon(gpu.migs[0].uuid)  # what a later run on this instance computes
        assert {g.env["CUDA_MPS_PIPE_DIRECTORY"] for g in plan.gmis} == {want.pipe_dir}
        assert mps_daemon.pid_of(want.pipe_dir) is not None
    assert fake_mps.count("cmd quit") == 1


def test_mps_inside_mig_one_daemon_per_instance(tmp_path):
    plan, _ = realise(preset("h200x1"), tmp_path, gmis_per_gpu=3, name="mig", mps_in_mig=True)
    daemons = plan.mps.daemons
    assert len(daemons) == 1 and daemons[0]["visible"].startswith(mig.PENDING)
    assert {g.env["CUDA_MPS_PIPE_DIRECTORY"] for g in plan.gmis} == {daemons[0]["pipe_dir"]}
    assert [g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] for g in plan.gmis] == ["33"] * 3
    assert plan.setup_commands[0] == "sudo nvidia-smi mig -i 0 -cgi 0 -C"
    assert plan.setup_commands[1].startswith("MIG_GPU0_1=$(nvidia-smi -L -i 0 ")  # its UUID, once it exists
    assert "nvidia-cuda-mps-control -d" in plan.setup_commands[2] and '"$MIG_GPU0_1"' in plan.setup_commands[2]
    assert len(plan.teardown_commands) == 1


def test_mps_inside_mig_shared_daemon_per_instance_and_no_existing(tmp_path, fake_mps):
    hw = a100_with()
    plan, _ = realise(hw, tmp_path, gmis_per_gpu=4, name="mig", mps_in_mig=True, daemon="shared")
    daemons = plan.mps.daemons
    assert [d["mode"] for d in daemons] == ["shared", "shared"] and plan.mps.daemon == "shared"
    assert len({d["pipe_dir"] for d in daemons}) == 2  # one per MIG instance, outside the run dir
    assert not any(d["pipe_dir"].startswith(str(tmp_path)) for d in daemons)
    with pytest.raises(ConfigError, match="invalid backend.daemon: 'existing'; valid: private, shared"):
        realise(hw, tmp_path, gmis_per_gpu=4, name="mig", mps_in_mig=True, daemon="existing")


def test_mps_inside_existing_instances_round_robin(tmp_path, fake_mps):
    hw = a100_with()
    plan, _ = realise(hw, tmp_path, gmis_per_gpu=4, name="mig", mps_in_mig=True)
    uuids = [d.uuid for d in hw.gpus[0].mig_devices]
    assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis] == [uuids[0], uuids[1], uuids[0], uuids[1]]
    assert len(plan.mps.daemons) == 2
    assert plan.gmis[0].env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    # after kill -9 of the launcher, each instance's daemon is quit by its lowest-id client only
    pipes = [d["pipe_dir"] for d in plan.mps.daemons]
    assert [[d.pipe_dir for d in kept_by(plan, g.id)] for g in plan.gmis] == [[pipes[0]], [pipes[1]], [], []]


# ---- bad input --------------------------------------------------------------


def test_unknown_profile_lists_the_products_profiles(tmp_path):
    want = (r"invalid MIG profile for GPU 0 \(NVIDIA A100-SXM4-40GB\): '3g.40gb'; "
            r"valid: 1g.5gb, 1g.5gb\+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb")
    with pytest.raises(ConfigError, match=want):
        realise(preset("dgx_a100"), tmp_path, name="mig", profile="3g.40gb")


def test_mig_disabled_says_how_to_enable(tmp_path):
    with pytest.raises(ConfigError, match=r"MIG is disabled on GPU 0 .*`sudo nvidia-smi -i 0 -mig 1`"):
        realise(nvml_host(fake_nvml.h100_80gb(mig=0)), tmp_path, name="mig")


def test_gpu_without_mig(tmp_path):
    a10 = fake_nvml.FakeGPU("NVIDIA A10", "GPU-a10", (8, 6), 24 << 30, mig=None)
    with pytest.raises(ConfigError, match=r"GPU 0 \(NVIDIA A10\) does not support MIG .*use backend=mps"):
        realise(nvml_host(a10), tmp_path, name="mig")


def test_pre_ampere_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"compute capability >= 8.0 .*has 7.0"):
        realise(nvml_host(fake_nvml.v100()), tmp_path, name="mig")


def test_cpu_host_refused(tmp_path):
    from gmiexp.hardware import cpu_only

    with pytest.raises(ConfigError, match="backend=mig needs an NVIDIA GPU"):
        realise(cpu_only(), tmp_path, name="mig")


def test_more_gmis_than_instances(tmp_path):
    with pytest.raises(ConfigError, match=r"invalid gmis_per_gpu for backend=mig: 8; valid: 1..7"):
        realise(preset("dgx_a100"), tmp_path, gmis_per_gpu=8, name="mig")
    with pytest.raises(ConfigError, match=r"3 GMIs on GPU 0 need 3 instances of 3g.20gb, but .* at most 2"):
        realise(preset("dgx_a100"), tmp_path, gmis_per_gpu=3, name="mig", profile="3g.20gb")


def test_preset_session_refuses(tmp_path):
    hw = preset("dgx_a100")
    backend = get(MigBackendConfig(), hw)
    from backend_helpers import plan_for

    plan = backend.realise(plan_for(hw), tmp_path)
    with pytest.raises(ConfigError, match="preset for planning only"):
        with backend.session(plan, tmp_path):
            pytest.fail("the body must not run")


# ---- profile tables ---------------------------------------------------------


@pytest.mark.parametrize("count, name", [(1, "7g.40gb"), (2, "3g.20gb"), (3, "2g.10gb"), (4, "1g.10gb"),
                                          (5, "1g.5gb"), (7, "1g.5gb")])
def test_largest_fitting_profile_a100_40gb(count, name):
    assert largest_fitting(preset("dgx_a100").gpus[0], count).name == name


def test_products_and_lookup():
    hw = nvml_host(fake_nvml.a100_40gb(), fake_nvml.h100_80gb(1), fake_nvml.h200(2))
    assert [product_of(g) for g in hw.gpus] == ["A100-40GB", "H100-80GB", "H200-141GB"]
    assert find(hw.gpus[2], "MIG 7g.141gb").id == 0
    assert set(PRODUCTS) == {"A100-40GB", "A100-80GB", "H100-80GB", "H100-NVL", "H200-141GB", "A30", "B200"}
    assert max(p.slices for p in PRODUCTS["A30"]) == 4
    assert all(max(p.slices for p in t) == 7 for k, t in PRODUCTS.items() if k != "A30")


NVIDIA_SMI_L = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b3c9e7d1-0f2a-4c6b-8e5d-6a7b8c900000)
  MIG 3g.40gb     Device  0: (UUID: MIG-11111111-2222-5333-8444-555555555555)
  MIG 3g.40gb     Device  1: (UUID: MIG-66666666-7777-5888-8999-000000000000)
"""


def test_plan_commands_under_mig_paste_as_is(tmp_path):
    """mode=plan's MPS start line for an instance setup creates: its UUID comes from nvidia-smi -L, no placeholder."""
    import os
    import subprocess

    plan, _ = realise(preset("h100x8"), tmp_path, gmis_per_gpu=4, name="mig", mps_in_mig=True, profile="3g.40gb")
    text = "\n".join(plan.setup_commands)
    assert mig.PENDING not in text and "<pending" not in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    assert plan.setup_commands[0] == "sudo nvidia-smi mig -i 0 -cgi 9,9 -C"
    assert 'CUDA_VISIBLE_DEVICES="$MIG_GPU0_2"' in plan.setup_commands[-1]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI_L}EOF\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    steps = [ln for ln in plan.setup_commands if ln.startswith("MIG_GPU")]
    out = subprocess.run(["bash", "-c", "\n".join([*steps, 'echo "$MIG_GPU0_1 $MIG_GPU0_2"'])], text=True,
                         capture_output=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert out.stdout.split() == ["MIG-11111111-2222-5333-8444-555555555555",
                                  "MIG-66666666-7777-5888-8999-000000000000"]
