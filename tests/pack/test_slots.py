"""Slots: each member's slice of a GPU as plain overrides (core sets on CPU, MPS shares, MIG instances)."""

from __future__ import annotations

import pytest

from gmiexp.errors import ConfigError
from gmiexp.hardware import GPUInfo, Hardware, MigDevice
from gmiexp.pack import slots
from gmiexp.pack.slots import Member, Slot


def gpu_host(n: int = 2, mig: bool = False, migs_per_gpu: int = 0) -> Hardware:
    gpus = [GPUInfo(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-{i}", compute_capability=(9, 0),
                    memory_mb=81559, mig_mode=mig,
                    mig_devices=[MigDevice(uuid=f"MIG-{i}-{k}", gpu_index=i, index=k, profile="3g.40gb",
                                           memory_mb=40000) for k in range(migs_per_gpu)])
            for i in range(n)]
    return Hardware(source="nvml", cpu_count=16, gpus=gpus)


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, True, None])
def test_jobs_per_gpu_refuses_what_is_not_a_positive_integer_or_auto(value) -> None:
    with pytest.raises(ConfigError, match=r"invalid hydra.launcher.jobs_per_gpu: .*; valid: an integer >= 1, or auto"):
        slots.jobs_per_gpu(value)


def test_jobs_per_gpu_accepts_integers_and_auto() -> None:
    assert slots.jobs_per_gpu(3) == 3 and slots.jobs_per_gpu("auto") == "auto"


def test_cpu_slots_split_each_logical_gpu_s_cores_among_its_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots.os, "sched_getaffinity", lambda pid: set(range(8)))
    host = Hardware(source="cpu", cpu_count=8)
    got = slots.make_slots(host, [0, 1], 2)
    assert [(s.gpu, s.index, s.cpus) for s in got] == [
        (0, 0, (0, 1)), (1, 0, (4, 5)), (0, 1, (2, 3)), (1, 1, (6, 7))]  # consecutive members: different GPUs
    assert slots.slot_overrides(got[1], Member(None), 2) == ["hardware.cpus=[4,5]"]


def test_cpu_slots_outnumbering_cores_share_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots.os, "sched_getaffinity", lambda pid: {2, 3})
    got = slots.make_slots(Hardware(source="cpu", cpu_count=2), [0], 3)
    assert [s.cpus for s in got] == [(2,), (3,), (2,)]


def test_gpu_slot_is_an_mps_share_of_its_gpu() -> None:
    got = slots.make_slots(gpu_host(2), [1], 2)
    assert [(s.gpu, s.index, s.cpus) for s in got] == [(1, 0, ()), (1, 1, ())]
    over = slots.slot_overrides(got[1], Member(None, gmis_per_gpu=2), 2)
    assert over == ["hardware.gpus=[1]", "backend=mps", "backend.sm_percent=[25,25]", "backend.daemon=shared"]


def test_a_member_that_chose_direct_keeps_it_and_only_gets_its_gpu() -> None:
    slot = slots.make_slots(gpu_host(2), [0, 1], 2)[1]
    assert slots.slot_overrides(slot, Member("direct"), 2) == ["hardware.gpus=[1]"]


def test_mig_slot_is_one_existing_instance() -> None:
    got = slots.make_slots(gpu_host(1, mig=True, migs_per_gpu=2), [0], 2)
    assert [s.mig_uuid for s in got] == ["MIG-0-0", "MIG-0-1"]
    assert slots.slot_overrides(got[1], Member(None), 2) == [
        "hardware.gpus=[0]", "backend=mig", "hardware.mig_instances=['MIG-0-1']"]
    assert "backend.mps_in_mig=true" in slots.slot_overrides(got[1], Member(None, gmis_per_gpu=2), 2)


def test_mig_slots_beyond_the_instances_are_refused() -> None:
    with pytest.raises(ConfigError, match="GPU 0 has MIG on and 2 MIG instance.*at most 2"):
        slots.make_slots(gpu_host(1, mig=True, migs_per_gpu=2), [0], 3)


@pytest.mark.parametrize(("wanted", "valid"),
                         [([2], "gpus entry: 2; valid: 0, 1"), ([0, 0], "distinct"), ([], "distinct")])
def test_gpus_must_exist_on_the_host(wanted, valid) -> None:
    with pytest.raises(ConfigError, match=valid):
        slots.choose_gpus(gpu_host(2), wanted)


def test_gpus_default_to_every_gpu_or_one_logical_gpu() -> None:
    assert slots.choose_gpus(gpu_host(2), None) == [0, 1]
    assert slots.choose_gpus(Hardware(source="cpu", cpu_count=2), None) == [0]


def test_slot_names() -> None:
    assert Slot(1, 0).name == "gpu1/0"


def test_what_recycling_hands_over_is_a_slot_s_cores_or_its_mps_share() -> None:
    cpu, gpu, mig = Slot(0, 1, cpus=(2, 3)), Slot(1, 2), Slot(0, 0, mig_uuid="MIG-0-0")
    assert cpu.units == (2, 3) and gpu.units == ((1, 2),)
    assert slots.on_mps(gpu, Member(None)) and slots.on_mps(gpu, Member("auto"))
    assert not slots.on_mps(gpu, Member("direct")) and not slots.on_mps(mig, Member(None))
    assert not slots.on_mps(cpu, Member(None))
    # two of four slots, one GMI: half the SMs; two GMIs: a quarter each
    assert slots.sm_percent(2, 4, 1) == 50 and slots.sm_percent(2, 4, 2) == 25 and slots.sm_percent(1, 3, 1) == 33


def test_members_packed_off_mps_on_a_gpu_that_admits_one_process_are_refused() -> None:
    """Two backend=direct members a GPU on an EXCLUSIVE_PROCESS GPU: two processes; on its shared daemon: one."""
    hw = gpu_host(2)
    hw.gpus[1].compute_mode = "exclusive_process"
    with pytest.raises(ConfigError, match=r"invalid 2 members a GPU with backend=direct on GPU 1: 2 processes, but "
                                          r"its compute mode is EXCLUSIVE_PROCESS"):
        slots.check_sharing(hw, [0, 1], 2, [Member("direct", 1)])
    slots.check_sharing(hw, [0, 1], 2, [Member(None, 2), Member("mps", 1)])  # one daemon a GPU
    slots.check_sharing(hw, [0, 1], 1, [Member("direct", 1)])  # one member a GPU
    slots.check_sharing(hw, [0], 2, [Member("direct", 1)])  # GPU 1 not used


def test_the_tightest_slot_is_the_one_of_least_memory_the_first_of_equals() -> None:
    hw = gpu_host(2, mig=True, migs_per_gpu=2)
    hw.gpus[1].mig_devices[0].memory_mb = 9856  # a 1g.10gb beside the 3g.40gb ones
    pool = slots.make_slots(hw, [0, 1], 2)
    assert slots.tightest(hw, pool) == Slot(1, 0, mig_uuid="MIG-1-0")
    plain = gpu_host(2)
    plain.gpus[1].memory_mb = 40000
    assert slots.tightest(plain, slots.make_slots(plain, [0, 1], 2)) == Slot(1, 0)
    assert slots.tightest(gpu_host(2), slots.make_slots(gpu_host(2), [0, 1], 2)) == Slot(0, 0)
