"""The minibatch each GMI trains with: ``train.minibatch_size`` fitted to the GMI's batch, never silently.

Pure arithmetic on the Plan, so the planner warns without importing what runs it (``rl/rlgames/params`` uses it).
"""

from __future__ import annotations

from gmiexp.plan.model import Plan


def fit_minibatch(batch: int, wanted: int) -> int:
    """Largest divisor of ``batch`` not above ``wanted`` (rl-games asserts batch % minibatch == 0)."""
    m = max(1, min(batch, wanted))
    while batch % m:
        m -= 1
    return m


def minibatch_warning(plan: Plan) -> str | None:
    """What ``train.minibatch_size`` becomes on GMIs whose batch it does not divide (None: it fits every GMI).

    rl-games asserts that the minibatch divides ``horizon_length x num_actors``; gmiexp fits it per GMI
    (:func:`fit_minibatch`) and says so here, naming the valid sizes, rather than change it silently.
    """
    tr = plan.train
    changed = {}
    for g in plan.gmis:
        batch = tr.horizon_length * g.num_envs
        if g.num_envs and fit_minibatch(batch, tr.minibatch_size) != tr.minibatch_size:
            changed.setdefault(batch, []).append(g.id)
    if not changed:
        return None
    parts = []
    for batch, ids in changed.items():
        valid = [d for d in range(1, batch + 1) if batch % d == 0]
        parts.append(f"GMIs {ids} (batch {batch} = horizon_length {tr.horizon_length} x {batch // tr.horizon_length}"
                     f" envs) use {fit_minibatch(batch, tr.minibatch_size)}; valid there: "
                     f"{', '.join(map(str, valid))}")
    return (f"train.minibatch_size={tr.minibatch_size} does not divide every GMI's batch: " + "; ".join(parts)
            + ". Set train.minibatch_size to a valid size to silence this.")


def gmi_envs(rank: int, world: int, num_envs: int, envs_per_minibatch: int) -> list[int]:
    """The environments of one process on the whole batch that GMI ``rank`` of ``world`` stands for, in its order.

    rl-games cuts its env-major batch (environment by environment, ``horizon_length`` rows each) into contiguous
    minibatches. GMI ``rank``'s local environment ``k`` is one process's environment
    ``(k // e) * e * world + rank * e + k % e`` (``e = envs_per_minibatch``, a GMI's minibatch in environments):
    the environments of one process's minibatch ``i`` are those of every GMI's minibatch ``i``, ``e`` each, so the
    averaged gradient of the GMIs' minibatch ``i`` is one process's. It holds when a GMI's minibatch is a whole
    number of environments (``minibatch_size / world`` a multiple of ``horizon_length``; see docs/equivalence.md).
    """
    e = max(1, envs_per_minibatch)
    return [(k // e) * e * world + rank * e + k % e for k in range(num_envs)]
