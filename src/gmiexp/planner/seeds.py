"""Every GMI's random streams, from the run's seed: the one rule both trainers and every layout read.

* ``gmi.seed`` seeds torch, numpy and random in the GMI's process (``gmiexp.launch.worker``, and rl-games' and
  rsl_rl's runners, which seed themselves from it): in a run's first segment, the run's seed plus the GMI's id,
  rl-games' and rsl_rl's multi-GPU habit (``seed + rank``), so GMI 0 of any partition draws the stream of a
  one-process run.
* ``gmi.env_seed`` seeds its simulator, whose environment ``i`` takes ``env_seed + i`` (envpool's rule, which
  gmiexp's torch simulators follow): the run's seed plus the environments of the GMIs before it, so no two
  environments of a run share a seed, and 1 GMI seeds its environments as one process does.
* A run's **segments**: its first start is segment 0; every start from a checkpoint (``checkpoint=``, a requeue, a
  re-shape) is the checkpoint's segment plus one (:func:`gmiexp.rl.rlgames.checkpoint.run_segment`: the
  checkpoint records the segment that wrote it). Segment ``k`` seeds its simulators ``k`` whole runs' worth of
  environments further on (``assign_seeds(plan, k)``, applied by :func:`gmiexp.launch.requeue.resume`), so a
  simulator that cannot save its state (envpool) starts fresh episodes that no earlier segment stepped, and no two
  segments of one run share an environment seed. A simulator that saves its state (the torch cart-pole) goes on
  from the saved one instead, and the segment's seed is never drawn.
* Segment ``k >= 1`` seeds its processes too (:func:`process_seed`): GMI ``r`` with ``seed + k * 2**16 + r``
  (modulo 2**32, what numpy's seeder takes), a stream no earlier segment drew. Then every GMI whose streams the
  checkpoint holds goes on with them instead (:mod:`gmiexp.rl.rlgames.runstate`, :mod:`gmiexp.rl.rlgames.carry`):
  on the checkpoint's partition each GMI its own; on another (a re-shape) GMI ``r`` old GMI ``r``'s where the old
  partition had a GMI ``r``. Only a GMI beyond the old ones (1 -> 2 GMIs: GMI 1) or a start from a checkpoint
  without them (rl-games' own) draws its segment's streams: no GMI of a later segment replays epoch 0's.
"""
from __future__ import annotations

from gmiexp.plan import Plan


def assign_seeds(plan: Plan, segment: int = 0) -> Plan:
    """Set every GMI's ``seed`` and ``env_seed`` from ``plan.seed`` (GMIs numbered as launched, node-major).

    ``segment``: of the run (the module docstring). Segment ``k``'s environments take the seeds
    ``seed + k * E .. seed + (k + 1) * E - 1``, ``E`` the run's environments (every GMI's; a re-shape keeps them:
    the global batch), each GMI its share in GMI order; segment 0's are ``seed .. seed + E - 1``. Each GMI's
    ``seed`` is its :func:`process_seed`.
    """
    if segment < 0:
        raise ValueError(f"segment {segment}: a run's segments count from 0")
    offset = int(segment) * run_envs(plan)
    for g in sorted(plan.gmis, key=lambda g: g.id):
        g.seed = process_seed(int(plan.seed), g.id, int(segment))
        g.env_seed = int(plan.seed) + offset
        offset += g.num_envs
    return plan


def run_envs(plan: Plan) -> int:
    """The environments of the whole run (every GMI's): how far one segment's seeds reach."""
    return sum(g.num_envs for g in plan.gmis)


#: how far apart two segments' process seeds lie: more GMIs than a run has, and more segments than it restarts
SEGMENT_STRIDE = 2**16


def process_seed(seed: int, gmi: int, segment: int = 0) -> int:
    """GMI ``gmi``'s process seed in segment ``segment`` of the run seeded with ``seed`` (the module docstring).

    Segment 0: ``seed + gmi``. Segment ``k >= 1``: ``(seed + k * 2**16 + gmi) % 2**32``; its offsets
    ``k * 2**16 + gmi`` differ from every other segment's and from segment 0's (``gmi < 2**16``), so no two GMIs
    of two segments share a seed. rl-games' runner hands the seed to numpy's legacy seeder, which takes 32 bits.
    """
    if not 0 <= gmi < SEGMENT_STRIDE or not 0 <= segment < SEGMENT_STRIDE:
        raise ValueError(f"GMI {gmi} of segment {segment}: process seeds are distinct for GMIs and segments "
                         f"0..{SEGMENT_STRIDE - 1}")
    if segment == 0:
        return int(seed) + int(gmi)
    return (int(seed) + int(segment) * SEGMENT_STRIDE + int(gmi)) % 2**32
