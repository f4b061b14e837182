"""TDG_EX (synchronous training with dedicated trainer GMIs, paper Table 5).

Serving GMIs (simulator + agent) collect one rollout, send it over channels to their trainer
GMI on the same device and wait for the new weights; the trainers run the PPO update on the
received experience, reduce gradients among themselves with the Plan's reduction and publish
the weights back through shared memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gmiexp.layouts.experience import ExperienceLayout, check_trainers
from gmiexp.layouts.layout import LAYOUTS, LayoutKind, LayoutRequest
from gmiexp.plan import GMI, Plan

if TYPE_CHECKING:
    from gmiexp.costmodel.templates import CostTerms


@LAYOUTS.register("tdg_ex")
class TDGEx(ExperienceLayout):
    kind = LayoutKind.SYNC
    default_role = "tdg_ex"

    def build(self, req: LayoutRequest) -> Plan:
        """Per GPU: ``gmis_per_gpu`` serving GMIs then ``layout.trainers_per_gpu`` trainer GMIs.

        Serving GMI ``i`` of a GPU feeds trainer ``i % trainers_per_gpu`` of the same GPU (forward path).
        """
        req.check()
        check_trainers(req, at_most=req.gmis_per_gpu)
        t = req.layout.trainers_per_gpu
        gmis: list[GMI] = []
        channels: list[list[int]] = []
        trainers: list[int] = []
        for d in range(req.num_gpus):
            serving = []
            for i in range(req.gmis_per_gpu):
                g = GMI(id=len(gmis), device=d, local_index=i, roles=["simulator", "agent"],
                        num_envs=req.num_envs)
                gmis.append(g)
                serving.append(g.id)
            local = []
            for j in range(t):
                g = GMI(id=len(gmis), device=d, local_index=req.gmis_per_gpu + j, roles=["trainer"], num_envs=0)
                gmis.append(g)
                local.append(g.id)
            trainers += local
            channels += [[a, local[i % t]] for i, a in enumerate(serving)]
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="", trainer_group=trainers,
                    channels=channels)

    def algo(self, async_cfg: Any) -> str:
        """The synchronous trainers always run PPO (``async_train.algo`` is for decoupled_async)."""
        return "ppo"

    def resource(self, t: CostTerms) -> float:
        total = t.T_s + t.T_a + t.T_t
        return (t.T_s * t.R_s + t.T_a * t.alpha * t.R_a + t.T_t * t.beta * t.R_t) / total

    def comm(self, t: CostTerms) -> float:
        return t.m * (t.S + t.A + t.W) + t.M_p + t.ring()
