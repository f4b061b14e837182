"""One memory metric for the report and the search: the GMIs' own peak device memory, else the RSS they added."""

from __future__ import annotations

import pytest

from gmiexp.rundir import on_device, peak_memory_mb
from gmiexp.search.profiler import result_from_summary
from gmiexp.tools.report import Run


@pytest.mark.parametrize(("metrics", "want", "device"), [
    ({"mem/peak_rss_mb": 300.0, "gpu/0/mem_mb": 9000.0, "gmi/0/peak_mem_mb": 700.0, "gmi/1/peak_mem_mb": 900.0},
     800.0, True),  # per-GMI mean, never the whole host's GPU memory
    ({"mem/peak_rss_mb": 300.0, "mem/workload_mb": 12.5}, 12.5, False),
    ({"mem/peak_rss_mb": 300.0}, 300.0, False),
    ({}, 0.0, False),
])
def test_report_and_search_read_the_same_memory(metrics: dict, want: float, device: bool, tmp_path) -> None:
    summary = {"status": "ok", "metrics": metrics, "history": []}
    assert peak_memory_mb(metrics) == pytest.approx(want) and on_device(metrics) is device
    assert Run(tmp_path, summary).peak_mem_mb == pytest.approx(want)
    assert result_from_summary(summary, 2, 0, 1.0).mem_mb == pytest.approx(want)
