"""TCG_EX: holistic training GMIs (simulator + agent + trainer in each), data-parallel PPO.

The paper's preferred template for synchronous training (Table 5): no
experience crosses a GMI boundary; only gradients are reduced.
"""

from __future__ import annotations

from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import GMI, Plan


def build(req: LayoutRequest) -> Plan:
    """``num_gpus x gmis_per_gpu`` GMIs, GPU-major ids (GMI k is on GPU k // gmis_per_gpu)."""
    req.check()
    gmis = [
        GMI(id=d * req.gmis_per_gpu + i, device=d, local_index=i,
            roles=["simulator", "agent", "trainer"], num_envs=req.num_envs)
        for d in range(req.num_gpus)
        for i in range(req.gmis_per_gpu)
    ]
    return Plan(gmis=gmis, layout="tcg_ex", backend="", reduction="",
                trainer_group=[g.id for g in gmis])
