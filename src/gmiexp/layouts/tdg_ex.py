"""TDG_EX (synchronous training with dedicated trainer GMIs, paper Table 5).

Serving GMIs (simulator + agent) collect one rollout, send it over channels to their trainer
GMI on the same device and wait for the new weights; the trainers run the PPO update on the
received experience, reduce gradients among themselves with the Plan's reduction and publish
the weights back through shared memory.
"""

from __future__ import annotations

from gmiexp.errors import invalid
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import GMI, Plan

ROLE = "tdg_ex"


def check_trainers(req: LayoutRequest, serving_per_gpu: int) -> None:
    t = req.layout.trainers_per_gpu
    if t < 1:
        raise invalid("layout.trainers_per_gpu", t, "an integer >= 1 (trainer GMIs per training GPU)")
    if t > serving_per_gpu and req.layout.name == "tdg_ex":
        raise invalid("layout.trainers_per_gpu", t,
                      f"1..{serving_per_gpu} (at most one trainer per serving GMI on a GPU)")


def build(req: LayoutRequest) -> Plan:
    """Per GPU: ``gmis_per_gpu`` serving GMIs then ``layout.trainers_per_gpu`` trainer GMIs.

    Serving GMI ``i`` of a GPU feeds trainer ``i % trainers_per_gpu`` of the same GPU (forward path).
    """
    req.check()
    check_trainers(req, req.gmis_per_gpu)
    t = req.layout.trainers_per_gpu
    gmis: list[GMI] = []
    channels: list[list[int]] = []
    trainers: list[int] = []
    for d in range(req.num_gpus):
        serving = []
        for i in range(req.gmis_per_gpu):
            g = GMI(id=len(gmis), device=d, local_index=i, roles=["simulator", "agent"], num_envs=req.num_envs)
            gmis.append(g)
            serving.append(g.id)
        local = []
        for j in range(t):
            g = GMI(id=len(gmis), device=d, local_index=req.gmis_per_gpu + j, roles=["trainer"], num_envs=0)
            gmis.append(g)
            local.append(g.id)
        trainers += local
        channels += [[a, local[i % t]] for i, a in enumerate(serving)]
    return Plan(gmis=gmis, layout="tdg_ex", backend="", reduction="", trainer_group=trainers,
                channels=channels, role=ROLE)
