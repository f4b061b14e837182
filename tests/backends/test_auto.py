import pytest
from backend_helpers import nvml_host, realise

from fakes import nvml as fake_nvml
from gmiexp.backends.auto import choose
from gmiexp.errors import ConfigError
from gmiexp.hardware import cpu_only, preset, with_mig


def no_binary(_name):
    return None


def has_binary(name):
    return f"/usr/bin/{name}"


def mig_host(on: int) -> object:
    return nvml_host(fake_nvml.a100_40gb(0, mig=on, migs=fake_nvml.a100_migs() if on else None))


@pytest.mark.parametrize("layout, hw, which, want, why", [
    ("tcg_ex", with_mig(preset("dgx_a100"), False), no_binary, "mps", "trains"),
    ("decoupled_async", with_mig(preset("h200x1"), False), no_binary, "mps", "trains"),
    ("tcg", with_mig(preset("h100x8"), False), no_binary, "mps", "MIG is off on GPU(s)"),
    ("tcg", with_mig(preset("dgx_a100"), True), no_binary, "mig", "MIG enabled"),
    ("tdg", with_mig(preset("h100x8"), True), no_binary, "mig", "isolation"),
    # MIG on: MPS cannot span the GPU, so training runs MPS inside one instance per GPU
    ("tcg_ex", with_mig(preset("h100x8"), True), no_binary, "mig", "MPS runs inside one MIG instance per GPU"),
    ("decoupled_async", with_mig(preset("h200x1"), True), no_binary, "mig", "MPS runs inside one MIG instance per GPU"),
    ("tcg_ex", mig_host(1), has_binary, "mig", "MPS runs inside one MIG instance per GPU"),
    ("tcg_ex", mig_host(1), no_binary, "mig", "one MIG instance per GMI (no MPS)"),
    ("tcg", mig_host(1), no_binary, "mig", "isolation"),
    ("tcg_ex", mig_host(0), has_binary, "mps", "trains"),
    ("tcg", nvml_host(fake_nvml.a100_40gb(mig=0)), has_binary, "mps", "sudo nvidia-smi -i 0 -mig 1"),
    ("tcg", nvml_host(fake_nvml.v100()), has_binary, "mps", "7.0 < 8.0 has no MIG"),
    ("tcg_ex", nvml_host(fake_nvml.p100()), has_binary, "direct", "6.0 < 7.0"),
    ("tcg_ex", nvml_host(fake_nvml.h100_80gb()), no_binary, "direct", "not on PATH"),
    ("tcg_ex", cpu_only(), has_binary, "direct", "no GPU"),
])
def test_paper_rule(layout, hw, which, want, why):
    choice = choose(layout, hw, which=which)
    assert choice.backend == want and why in choice.reason
    assert choice.mps_in_mig == ("inside one MIG instance" in why)


def test_mixed_mig_modes_are_refused():
    hw = nvml_host(fake_nvml.a100_40gb(0, mig=1, migs=fake_nvml.a100_migs()), fake_nvml.a100_40gb(1, mig=0))
    with pytest.raises(ConfigError, match=r"MIG is enabled on GPU\(s\) \[0\] but not on \[1\]"):
        choose("tcg_ex", hw, which=has_binary)


@pytest.mark.parametrize("mig, backend, reason", [
    (None, "mps", "trains (GMIs communicate): MPS"),  # a stock H100 host: MIG off
    ("true", "mig", "MPS runs inside one MIG instance per GPU"),
    ("false", "mps", "trains (GMIs communicate): MPS"),
])
def test_plan_h100x8_auto_follows_the_mig_mode(tmp_path, mig, backend, reason):
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    over = ["mode=plan", "hardware=h100x8", "backend=auto", "num_gpus=2", "task=Cartpole"]
    plan, _ = build_plan(compose_config(*over, *([f"hardware.mig={mig}"] if mig else [])), tmp_path)
    assert plan.backend == backend and reason in plan.backend_reason
    # the default reduction is Algorithm 1's (2 GMIs per GPU on 2 GPUs: MRR), but NCCL cannot join MIG instances
    assert plan.reduction == ("allreduce" if backend == "mig" else "mrr")
    for g in plan.gmis:
        assert ("MIG-" in g.env["CUDA_VISIBLE_DEVICES"]) == (backend == "mig")
        assert g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"  # MPS either way, 2 GMIs per GPU


def test_auto_reduction_on_mig_avoids_nccl(tmp_path):
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    cfg = compose_config("mode=plan", "hardware=h100x8", "hardware.mig=true", "backend=mig", "num_gpus=2",
                         "reduction=auto", "task=Cartpole")
    plan, _ = build_plan(cfg, tmp_path)  # Algorithm 1 alone says MRR (2 GMIs per GPU <= 2 GPUs)
    assert plan.reduction == "allreduce" and "NCCL cannot join MIG instances" in plan.reduction_reason


def test_delegates_realise_and_records_reason(tmp_path):
    plan, backend = realise(with_mig(preset("dgx_a100"), True), tmp_path, gmis_per_gpu=2, layout="tcg", name="auto")
    assert plan.backend == "mig" and plan.backend_reason.startswith("auto: serving layout tcg")
    assert backend.chosen.name == "mig"
    plan, _ = realise(cpu_only(), tmp_path, name="auto")
    assert plan.backend == "direct" and plan.backend_reason.startswith("auto: no GPU")


def test_delegates_session_to_mps(tmp_path, fake_mps):
    hw = nvml_host(fake_nvml.a100_40gb())
    plan, backend = realise(hw, tmp_path / "run", name="auto")
    assert plan.backend == "mps"
    with backend.session(plan, tmp_path / "run"):
        assert fake_mps.count("argv -d") == 1
    assert fake_mps.count("cmd quit") == 1
