"""Every GMI's random streams, from the run's seed: the one rule both trainers and every layout read.

* ``gmi.seed`` seeds torch, numpy and random in the GMI's process (``gmiexp.launch.worker``, and rl-games' and
  rsl_rl's runners, which seed themselves from it): the run's seed plus the GMI's id, rl-games' and rsl_rl's
  multi-GPU habit (``seed + rank``), so GMI 0 of any partition draws the stream of a one-process run.
* ``gmi.env_seed`` seeds its simulator, whose environment ``i`` takes ``env_seed + i`` (envpool's rule, which
  gmiexp's torch simulators follow): the run's seed plus the environments of the GMIs before it, so no two
  environments of a run share a seed, and 1 GMI seeds its environments as one process does.
"""

from __future__ import annotations

from gmiexp.plan import Plan


def assign_seeds(plan: Plan) -> Plan:
    """Set every GMI's ``seed`` and ``env_seed`` from ``plan.seed`` (GMIs numbered as launched, node-major)."""
    offset = 0
    for g in sorted(plan.gmis, key=lambda g: g.id):
        g.seed = int(plan.seed) + g.id
        g.env_seed = int(plan.seed) + offset
        offset += g.num_envs
    return plan
