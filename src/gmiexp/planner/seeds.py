"""Every GMI's random streams, from the run's seed: the one rule both trainers and every layout read.

* ``gmi.seed`` seeds torch, numpy and random in the GMI's process (``gmiexp.launch.worker``, and rl-games' and
  rsl_rl's runners, which seed themselves from it): the run's seed plus the GMI's id, rl-games' and rsl_rl's
  multi-GPU habit (``seed + rank``), so GMI 0 of any partition draws the stream of a one-process run.
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
"""

from __future__ import annotations

from gmiexp.plan import Plan


def assign_seeds(plan: Plan, segment: int = 0) -> Plan:
    """Set every GMI's ``seed`` and ``env_seed`` from ``plan.seed`` (GMIs numbered as launched, node-major).

    ``segment``: of the run (the module docstring). Segment ``k``'s environments take the seeds
    ``seed + k * E .. seed + (k + 1) * E - 1``, ``E`` the run's environments (every GMI's; a re-shape keeps them:
    the global batch), each GMI its share in GMI order; segment 0's are ``seed .. seed + E - 1``.
    """
    if segment < 0:
        raise ValueError(f"segment {segment}: a run's segments count from 0")
    offset = int(segment) * run_envs(plan)
    for g in sorted(plan.gmis, key=lambda g: g.id):
        g.seed = int(plan.seed) + g.id
        g.env_seed = int(plan.seed) + offset
        offset += g.num_envs
    return plan


def run_envs(plan: Plan) -> int:
    """The environments of the whole run (every GMI's): how far one segment's seeds reach."""
    return sum(g.num_envs for g in plan.gmis)

