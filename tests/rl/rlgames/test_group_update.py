"""G GMIs fed one batch make the update one process makes on it: rl-games' PPO in tcg_ex's GMI agent.

The reference is rl-games' own agent on all 16 environments for 3 epochs (4 minibatches, 2 mini-epochs, input
and value normalisers, advantages normalised). Each of G spawned GMIs (gloo, the Plan's reduction) is gmiexp's
GMI agent fed its environments' columns of the same rollouts (:func:`gmiexp.plan.minibatch.gmi_envs`), from the
same weights. After every epoch its weights, normalisers and learning rate are the reference's to float
round-off; before the normalisers stepped on the group's moments and the environments were assigned per
minibatch, they differed by as much as a whole update (0.01-0.1).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import torch
from gmitest import spawn_gmis
from rlgames_group import EPOCHS, member

from gmiexp.launch.launcher import free_port
from gmiexp.shm.cleanup import cleanup_run, leftovers

#: float32 round-off through 3 epochs of Adam; the defects this catches moved weights by 1e-2 and more
TOLERANCE = 2e-5


def worst(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], stats: bool = False) -> float:
    """Largest absolute difference of the weights (``stats``: largest relative one of the normalisers' moments)."""
    assert a.keys() == b.keys()
    keys = [k for k in a if ("mean_std" in k) == stats and not k.endswith("count")]
    if stats:
        return max(float(((a[k].double() - b[k].double()) / b[k].double().abs().clamp_min(1e-3)).abs().max())
                   for k in keys)
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in keys)


#: the default cases of 2 GMIs, run one after another in one spawn of 2 processes (each process's start-up, torch
#: and rl-games imported, paid once instead of three times): every case still has its own reference, process
#: group, reduction and run tag
SHARED = [("continuous", "mpr"), ("central-value", "allreduce"), ("lstm", "mpr")]


def members(rank: int, world: int, ports: list[int], tag: str, out: str, cases: list[tuple[str, str]]) -> None:
    """GMI ``rank`` of ``world`` in each case in turn (:func:`rlgames_group.member`); its results by case to ``out``."""
    got = {}
    for i, ((case, strategy), port) in enumerate(zip(cases, ports, strict=True)):
        sub = Path(out) / f"{case}-{strategy}"
        sub.mkdir(parents=True, exist_ok=True)
        member(rank, world, port, f"{tag}c{i}", str(sub), case, strategy)
        got[(case, strategy)] = torch.load(sub / f"{rank}.pt", weights_only=False)
    torch.save(got, Path(out, f"{rank}.pt"))


@pytest.fixture(scope="module")
def shared_world2(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[dict]]:
    """Every GMI's results for each :data:`SHARED` case, by case; no case leaves a shared-memory segment."""
    out = tmp_path_factory.mktemp("world2")
    tag = f"t{uuid.uuid4().hex[:6]}"
    ports: list[int] = []
    while len(ports) < len(SHARED):  # a fresh gloo port per case
        if (port := free_port()) not in ports:
            ports.append(port)
    tags = [f"{tag}c{i}" for i in range(len(SHARED))]
    try:
        results = spawn_gmis(members, 2, lambda r, port: (2, ports, tag, str(out), SHARED), out, timeout=540)
        left = [seg for t in tags for seg in leftovers(t)]
    finally:
        for t in tags:
            cleanup_run(t)
    assert not left, f"segments left in /dev/shm: {left}"
    return {c: [r[c] for r in results] for c in SHARED}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("world", "case", "strategy"), [
    (2, "continuous", "mpr"),
    (4, "discrete", "allreduce"),
    (2, "central-value", "allreduce"),
    (2, "lstm", "mpr"),
    pytest.param(4, "continuous", "har", marks=pytest.mark.slow),
    pytest.param(4, "central-value", "mpr", marks=pytest.mark.slow),
    pytest.param(4, "lstm", "allreduce", marks=pytest.mark.slow),
    pytest.param(2, "discrete", "mpr", marks=pytest.mark.slow),
])
def test_g_gmis_fed_one_batch_make_one_process_update(world: int, case: str, strategy: str,
                                                      request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if world == 2 and (case, strategy) in SHARED:
        results = request.getfixturevalue("shared_world2")[(case, strategy)]
    else:
        tag = request.getfixturevalue("tag")
        results = spawn_gmis(member, world, lambda r, port: (world, port, tag, str(tmp_path), case, strategy),
                             tmp_path)
    first = results[0]
    moved = worst(first["ref"][-1], first["ref"][0])  # the reference really learns between epochs
    assert moved > 100 * TOLERANCE, moved
    for epoch in range(EPOCHS):
        for r in results:  # every GMI holds the same model, bit for bit
            assert all(torch.equal(v, first["after"][epoch][k]) for k, v in r["after"][epoch].items()), (case, epoch)
        got, ref = first["after"][epoch], first["ref"][epoch]
        diff, stats = worst(got, ref), worst(got, ref, stats=True)
        print(f"{case} x{world} {strategy}: epoch {epoch + 1}: weights {diff:.3g} (update {moved:.3g}), "
              f"normalisers {stats:.3g} relative")
        assert diff <= TOLERANCE, f"{case} x{world}: epoch {epoch + 1}: weights differ by {diff:.3g} from one process"
        assert stats <= 1e-6, f"{case} x{world}: epoch {epoch + 1}: normalisers differ by {stats:.3g} (relative)"
        counts = {k: float(v) for k, v in got.items() if k.endswith("count")}
        assert counts == {k: float(v) for k, v in ref.items() if k.endswith("count")}, counts
        assert first["lrs"][epoch] == pytest.approx(first["ref_lrs"][epoch], rel=1e-5), (case, epoch)
        assert len({tuple(r["kls"][epoch]) for r in results}) == 1  # the reported KL is the group's
