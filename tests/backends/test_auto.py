import pytest
from backend_helpers import nvml_host, realise

from fakes import nvml as fake_nvml
from gmiexp.backends.auto import choose
from gmiexp.hardware import cpu_only, preset


def no_binary(_name):
    return None


def has_binary(name):
    return f"/usr/bin/{name}"


@pytest.mark.parametrize("layout, hw, which, want, why", [
    ("tcg_ex", preset("dgx_a100"), no_binary, "mps", "trains"),
    ("decoupled_async", preset("h200x1"), no_binary, "mps", "trains"),
    ("tcg", preset("dgx_a100"), no_binary, "mig", "MIG enabled"),
    ("tdg", preset("h100x8"), no_binary, "mig", "isolation"),
    ("tcg", nvml_host(fake_nvml.a100_40gb(mig=0)), has_binary, "mps", "sudo nvidia-smi -i 0 -mig 1"),
    ("tcg", nvml_host(fake_nvml.v100()), has_binary, "mps", "7.0 < 8.0 has no MIG"),
    ("tcg_ex", nvml_host(fake_nvml.p100()), has_binary, "direct", "6.0 < 7.0"),
    ("tcg_ex", nvml_host(fake_nvml.h100_80gb()), no_binary, "direct", "not on PATH"),
    ("tcg_ex", cpu_only(), has_binary, "direct", "no GPU"),
])
def test_paper_rule(layout, hw, which, want, why):
    name, reason = choose(layout, hw, which=which)
    assert name == want and why in reason


def test_delegates_realise_and_records_reason(tmp_path):
    plan, backend = realise(preset("dgx_a100"), tmp_path, gmis_per_gpu=2, layout="tcg", name="auto")
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
