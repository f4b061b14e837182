"""Workload-aware GMI selection (paper section 5.2, Algorithm 2): ``mode=search``."""

from gmiexp.search.algorithm import (
    METHODS,
    ProfileResult,
    SearchOutcome,
    algorithm2,
    algorithm2_cn,
    estimate,
    grid,
    saturation,
)
from gmiexp.search.paired import PairRule, paired_search
from gmiexp.search.runner import run_search

__all__ = ["METHODS", "PairRule", "ProfileResult", "SearchOutcome", "algorithm2", "algorithm2_cn", "estimate",
           "grid", "paired_search", "run_search", "saturation"]
