"""The memory a run's GMIs need, read from a summary's metrics: one definition for the report and the search."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def peak_memory_mb(metrics: Mapping[str, Any]) -> float:
    """Per-GMI memory the workload consumes: the GMIs' own peak device memory on a GPU, else the RSS it added.

    On a GPU host the figure is NVML's per-process memory of each GMI on its own device, at its
    peak (``gmi/<id>/peak_mem_mb``, from :mod:`gmiexp.tools.monitor`), averaged over the GMIs: neither
    the whole host's GPUs (another job's memory is not this run's) nor a mean over time (which
    start-up dilutes) measures what a GMI needs.

    On CPU the workload's RSS growth (peak minus the RSS once Python, torch and rl-games were
    loaded), not the whole RSS, is the analogue of device memory: NVML never counts the ~400 MB of
    host runtime, and with it in the denominator the search's ``R_mem`` stays near 0 at every step, so
    ``Sat = R_top / R_mem`` degenerates to the sign of the throughput change. Summaries without
    the workload metric fall back to the peak RSS.
    """
    own = [v for k, v in metrics.items() if k.startswith("gmi/") and k.endswith("/peak_mem_mb")]
    if own:
        return float(sum(own)) / len(own)
    workload = metrics.get("mem/workload_mb")
    return float(workload if workload is not None else metrics.get("mem/peak_rss_mb") or 0.0)


def on_device(metrics: Mapping[str, Any]) -> bool:
    """Whether :func:`peak_memory_mb` is device memory (NVML saw the GMIs) rather than host RSS."""
    return any(k.startswith("gmi/") and k.endswith("/peak_mem_mb") for k in metrics)
