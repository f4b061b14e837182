import threading
import time

from fakes import nvml as fake_nvml
from gmiexp.hardware import cpu_only, discover, preset
from gmiexp.monitor import Monitor


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
