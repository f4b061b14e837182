import threading
import time

from fakes import nvml as fake_nvml
from gmiexp.hardware import cpu_only, discover, preset
from gmiexp.launch.monitor import Monitor


def test_metric_names_per_gpu_and_mig_instance():
    nv = fake_nvml.make([fake_nvml.a100_40gb(0, mig=1, migs=fake_nvml.a100_migs()), fake_nvml.h100_80gb(1)])
    hw = discover(nv)
    mon = Monitor(hw, nvml=nv, interval_s=0.01).start()
    time.sleep(0.05)
    means = mon.stop()
    assert set(means) == {"gpu/0/mem_mb", "gpu/0/mig/0/mem_mb", "gpu/0/mig/1/mem_mb",
                          "gpu/1/util", "gpu/1/mem_mb", "cpu/util"}
    assert means["gpu/1/util"] == 37.0
    assert means["gpu/1/mem_mb"] == 512.0
    assert means["gpu/0/mig/0/mem_mb"] == 100.0
    assert not any(t.name == "gmiexp-monitor" for t in threading.enumerate())
    assert nv.calls.count("nvmlInit") == nv.calls.count("nvmlShutdown") == 2  # discover + monitor


def test_cpu_only_host_reports_cpu_util_only():
    mon = Monitor(cpu_only(), interval_s=0.01)
    with mon:
        time.sleep(0.03)
        assert set(mon.sample()) == {"cpu/util"}
    assert set(mon.stop()) == {"cpu/util"}


def test_preset_never_touches_nvml():
    nv = fake_nvml.make([fake_nvml.a100_40gb()])
    assert set(Monitor(preset("dgx_a100"), nvml=nv).stop()) == {"cpu/util"}
    assert nv.calls == []


def test_missing_driver_falls_back_to_cpu():
    hw = discover(fake_nvml.make([fake_nvml.h200()]))
    mon = Monitor(hw, nvml=fake_nvml.make([], no_driver=True))
    assert set(mon.sample()) == {"cpu/util"} and "NVML unavailable" in mon.note


GiB = 1024 * 1024 * 1024


def test_samples_only_the_plans_gpus():
    nv = fake_nvml.make([fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1)])
    mon = Monitor(discover(nv), nvml=nv, gmi_devices={0: 1, 1: 1})  # both GMIs on GPU 1
    assert {k for k in mon.sample() if k.startswith("gpu/")} == {"gpu/1/util", "gpu/1/mem_mb"}
    mon.stop()


def test_each_gmi_peak_memory_is_its_own_process_on_its_own_gpu():
    gpu0, gpu1 = fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1)
    gpu0.procs = [(900, 3 * GiB), (777, 20 * GiB)]  # the MPS server (all clients) and another user's job
    gpu0.mps_procs = [(100, 1 * GiB), (101, 2 * GiB)]  # GMIs 0 and 1, MPS clients
    gpu0.proc_util = [(100, 30), (101, 50), (100, 40)]
    gpu1.procs = [(102, 5 * GiB)]  # GMI 2 on GPU 1 (plain process)
    nv = fake_nvml.make([gpu0, gpu1, fake_nvml.h100_80gb(2)])
    pids = {0: 100, 1: 101, 2: 102}
    mon = Monitor(discover(nv), nvml=nv, gmi_devices={0: 0, 1: 0, 2: 1}, pids=lambda: pids)
    mon._record(mon.sample())
    gpu0.mps_procs = [(100, 4 * GiB), (101, 512 * 1024 * 1024)]  # GMI 0 grows, GMI 1 frees memory
    mon._record(mon.sample())
    means = mon.stop()
    assert means["gmi/0/peak_mem_mb"] == 4096.0  # its peak, not the mean (2560)
    assert means["gmi/1/peak_mem_mb"] == 2048.0
    assert means["gmi/2/peak_mem_mb"] == 5120.0
    assert means["gmi/0/sm_util"] == 40.0 and means["gmi/1/sm_util"] == 50.0  # the latest sample per pid
    assert not any(k.startswith("gpu/2/") for k in means)  # not the plan's GPU


def test_gmis_inside_mig_instances():
    migs = fake_nvml.a100_migs()
    migs[0].procs, migs[1].procs = [(200, 3 * GiB)], [(201, 6 * GiB)]
    nv = fake_nvml.make([fake_nvml.a100_40gb(0, mig=1, migs=migs)])
    mon = Monitor(discover(nv), nvml=nv, gmi_devices={0: 0, 1: 0}, pids=lambda: {0: 200, 1: 201})
    values = mon.sample()
    assert values["gmi/0/peak_mem_mb"] == 3072.0 and values["gmi/1/peak_mem_mb"] == 6144.0
    assert "gmi/0/sm_util" not in values  # NVML samples no per-process utilisation under MIG
    mon.stop()
