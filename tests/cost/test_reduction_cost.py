"""The paper's Table 2 (reduction cost): hand-worked values, the plan's layout, calibration."""

import pytest

from gmiexp.cost.reduction import calibrate, complexities, format_cost, reduction_cost
from gmiexp.plan import GMI, Plan


def plan_of(counts: list[int]) -> Plan:
    """GPU-major plan of trainer GMIs, ``counts[d]`` of them on logical GPU d."""
    gmis = [GMI(id=0, device=d, local_index=i, roles=["trainer"]) for d, c in enumerate(counts) for i in range(c)]
    for k, g in enumerate(gmis):
        g.id = k
    return Plan(gmis=gmis, layout="tcg_ex", backend="direct", reduction="", trainer_group=list(range(len(gmis))))


def test_table2_by_hand():
    # t=2, g=2, Mp = 4e6 bytes, B1 = 1 GB/s, B2 = 4 GB/s
    c = complexities(2, 2, 4e6, 1e9, 4e9)
    assert c["mpr"] == pytest.approx(2 * 3 * 4e6 / (4 * 1e9))  # 6 ms
    assert c["mrr"] == pytest.approx(2 * 1 * 3 * 4e6 / (2 * 4e9))  # 3 ms
    assert c["har"] == pytest.approx(2 * 4e6 / (2 * 4e9) + 2 * 4e6 / (2 * 1e9))  # 1 + 4 ms
    one_gpu = complexities(4, 1, 4e6, 1e9, 4e9)
    assert one_gpu["mrr"] == 0 and one_gpu["har"] == pytest.approx(one_gpu["mpr"])


def test_reduction_cost_dict_and_text():
    bw = {"B1": 1e9, "B2": 4e9, "source": "test"}
    d = reduction_cost(plan_of([2, 2]), params=1_000_000, bandwidth=bw)
    row = d["estimate_ms"]["1e+06"]
    assert row == {"mpr": 6.0, "mrr": 3.0, "har": 5.0, "fastest": "mrr"}
    assert (d["t"], d["g"], d["mrr_limit"]) == (2, 2, None)
    d3 = reduction_cost(plan_of([3, 3]), bandwidth=bw)
    assert set(d3["estimate_ms"]) == {"1.1e+05", "2.9e+05", "1.5e+06"}
    assert all(r["mrr"] is None for r in d3["estimate_ms"].values())
    text = format_cost(d3)
    assert "MRR n/a" in text and "t=3 GMIs/GPU, g=2 GPUs" in text
    assert reduction_cost(plan_of([2]))["bandwidth_source"].startswith("defaults")


def test_calibration_measures_positive_bandwidths():
    bw = calibrate()
    assert bw["B1"] > 1e7 and bw["B2"] > 1e6 and bw["source"].startswith("calibrated")
