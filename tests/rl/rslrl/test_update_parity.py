"""G GMIs on G shares of a batch make rsl_rl's PPO update of one process on the whole batch.

Each GMI is a spawned process (gloo default group, the Plan's reduction), starts from a different seed (the
broadcast must give it GMI 0's weights), replays its environments' columns of a rollout the one-process policy
sampled, and updates: weights (normalisers included) within 1e-6 of the one-process update, the adaptive
schedule's KL the one-process KL, the same learning rate, for every reduction strategy; RND's predictor too.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
import torch
from rslrl_parity import member

from gmiexp.launch.launcher import free_port

STRATEGIES = ["allreduce", "mpr", "mrr", "har"]


def spawn(counts: list[int], tag: str, out: Path, rnd: bool) -> list[dict]:
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=member, args=(r, counts, port, tag, str(out), STRATEGIES, rnd),
                         daemon=True)
             for r in range(sum(counts))]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(240)
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return [torch.load(out / f"{r}.pt", weights_only=False) for r in range(sum(counts))]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("counts", "rnd"), [([1, 1], False), pytest.param([2, 2], False, marks=pytest.mark.slow),
                                             pytest.param([1, 1], True, marks=pytest.mark.slow)],
                         ids=["G2", "G4", "G2-rnd"])  # ~25 s each: G4 and RND in the slow suite
def test_g_gmis_make_the_update_of_one_process(counts: list[int], rnd: bool, tag: str, tmp_path: Path) -> None:
    """With ``rnd``, RND's predictor is trained too (its gradients go through the same flat reduction)."""
    results = spawn(counts, tag, tmp_path, rnd)
    ref, ref_lr, ref_kls = results[0]["ref"], results[0]["ref_lr"], results[0]["ref_kls"]
    assert ref_lr != 1e-3 and len(ref_kls) == 4  # the schedule moved: the comparison covers it
    for strategy in STRATEGIES:
        first = results[0][strategy]["weights"]
        for r in results:  # every GMI holds the same model, bit for bit
            assert all(torch.equal(r[strategy]["weights"][k], first[k]) for k in first), strategy
        worst = max(float((first[k].double() - ref[k].double()).abs().max()) for k in ref)
        assert worst <= 1e-6, (strategy, worst)
        assert results[0][strategy]["lr"] == pytest.approx(ref_lr, rel=1e-6), strategy
        assert results[0][strategy]["kls"] == pytest.approx(ref_kls, rel=1e-5, abs=1e-9), strategy
