"""The paper's Table 2 (reduction cost): hand-worked values, the plan's layout, calibration."""

import pytest

from gmiexp.comm.reduction.calibrate import calibrate
from gmiexp.costmodel.reductions import complexities, format_cost, network_part, reduction_cost
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


def nodes_plan(counts: list[int], nnodes: int, hw: dict | None = None) -> Plan:
    from gmiexp.config import LaunchConfig

    gmis = [GMI(id=0, device=d, local_index=i, roles=["trainer"], node=n)
            for n in range(nnodes) for d, c in enumerate(counts) for i in range(c)]
    for k, g in enumerate(gmis):
        g.id = k
    return Plan(gmis=gmis, layout="tcg_ex", backend="direct", reduction="", trainer_group=list(range(len(gmis))),
                launch=LaunchConfig(nnodes=nnodes, rdzv_endpoint="node0:29400"), hardware=hw or {})


def test_table2_inter_node_term_by_hand():
    # t=2, g=2 per node, 2 nodes (G=4), Mp = 4e6 bytes, B1 = 1 GB/s, B2 = 4 GB/s, B3 = 1 GB/s
    c = complexities(2, 2, 4e6, 1e9, 4e9, nodes=2, b3=1e9)
    assert c["mpr"] is None  # shared memory does not cross nodes
    assert c["mrr"] == pytest.approx(2 * 3 * 3 * 4e6 / (4 * 1e9))  # 18 ms: every ring crosses the slower network
    assert c["har"] == pytest.approx(1e-3 + 4e-3 + 2 * 1 * 4e6 / (2 * 1e9) + 4e6 / 4e9)  # 1 + 4 + 4 + 1 ms
    assert network_part(2, 2, 4e6, 2, 1e9) == pytest.approx({"mpr": None, "mrr": 18e-3, "har": 4e-3})
    # one node: the paper's rows exactly, whatever b3 is
    assert complexities(2, 2, 4e6, 1e9, 4e9, nodes=1, b3=1.0) == complexities(2, 2, 4e6, 1e9, 4e9)


def test_reduction_cost_across_nodes_shows_the_network_part():
    bw = {"B1": 1e9, "B2": 4e9, "source": "test"}
    d = reduction_cost(nodes_plan([2, 2], 2, {"network_gbps": 8.0, "source": "preset:x"}), params=1_000_000,
                       bandwidth=bw)
    row = d["estimate_ms"]["1e+06"]
    assert row == {"mpr": None, "mrr": 18.0, "har": 10.0, "fastest": "har", "network_ms": {"mrr": 18.0, "har": 4.0}}
    assert (d["t"], d["g"], d["nodes"], d["gpus_per_node"], d["B3_GBps"]) == (2, 4, 2, 2, 1.0)
    text = format_cost(d)
    assert "g=4 GPUs on 2 nodes (2 per node)" in text and "B3=1.0 GB/s between nodes (network 8 Gb/s" in text
    assert "MPR n/a, MRR 18.000 ms (network 18.000), HAR 10.000 ms (network 4.000); fastest HAR" in text
    assert "MPR n/a across nodes" in text


def test_unknown_network_is_assumed_and_said():
    gpu = reduction_cost(nodes_plan([1], 2, {"gpus": [{}]}))
    assert gpu["B3_GBps"] == 12.5 and "assumed 100 Gb/s" in gpu["network_source"]
    cpu = reduction_cost(nodes_plan([1], 2))
    assert cpu["B3_GBps"] == cpu["B2_GBps"] and "assumed B2" in cpu["network_source"]
