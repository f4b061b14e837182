"""`mode=plan` prints the Plans it printed before the house was rearranged (tests/planner/plans_recorded.json)."""

from __future__ import annotations

import json
import os

import pytest
from plan_golden import CASES, RECORD, host_dependent, render

RECORDED = json.loads(RECORD.read_text())
BY_ARGS = {" ".join(c["args"]): c for c in RECORDED["cases"]}


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[1:]) or "default" for c in CASES])
def test_mode_plan_prints_the_recorded_plan(case: list[str]) -> None:
    if host_dependent(case) and len(os.sched_getaffinity(0)) != RECORDED["cpus"]:
        pytest.skip(f"planned on this host's {len(os.sched_getaffinity(0))} cores; recorded on {RECORDED['cpus']}")
    want = BY_ARGS[" ".join(case)]
    got = render(case)
    assert got["rc"] == want["rc"]
    assert got["error"] == want["error"]
    assert got["stdout"] == want["stdout"]


def test_every_case_is_recorded() -> None:
    assert sorted(BY_ARGS) == sorted(" ".join(c) for c in CASES)
