"""Decoupled asynchronous training (paper Figure 6b): serving GPUs and training GPUs.

Serving GMIs (simulator + agent, ``gmis_per_gpu`` per serving GPU) never wait for training: they
send every rollout over channels to the trainer GMIs (``layout.trainers_per_gpu`` per training
GPU; the Migrator picks the least-loaded one) and pick up the newest published weights before
each rollout. Trainers run the asynchronous update (PPO, or the paper's A3C with ``async_train.algo=a2c``)
and reduce gradients among themselves.

On a GPU host the two sets need distinct GPUs (``num_gpus >= 2``); on a CPU-only host the devices
are logical, so ``num_gpus=1`` still places serving on device 0 and training on device 1.
"""

from __future__ import annotations

from gmiexp.errors import invalid
from gmiexp.layouts.experience import ExperienceLayout, check_trainers
from gmiexp.layouts.layout import LAYOUTS, LayoutKind, LayoutRequest
from gmiexp.plan import GMI, Plan


def split_devices(req: LayoutRequest) -> tuple[list[int], list[int]]:
    """(serving devices, training devices)."""
    n = req.num_gpus
    if req.hardware.has_gpu and n < 2:
        raise invalid("num_gpus", n, f"2..{len(req.hardware.gpus)} for layout={req.layout.name} "
                      "(serving and training GMIs need separate GPUs)")
    n = max(n, 2)  # CPU-only: logical devices
    serving = req.layout.serving_gpus if req.layout.serving_gpus is not None else max(1, n // 2)
    if not 1 <= serving <= n - 1:
        raise invalid("layout.serving_gpus", serving, f"1..{n - 1} (the other GPUs train)")
    return list(range(serving)), list(range(serving, n))


@LAYOUTS.register("decoupled_async")
class DecoupledAsync(ExperienceLayout):
    kind = LayoutKind.ASYNC
    default_role = "a3c"

    def build(self, req: LayoutRequest) -> Plan:
        req.check()
        check_trainers(req)
        serve_devs, train_devs = split_devices(req)
        gmis: list[GMI] = []
        for d in serve_devs:
            for i in range(req.gmis_per_gpu):
                gmis.append(GMI(id=len(gmis), device=d, local_index=i, roles=["simulator", "agent"],
                                num_envs=req.num_envs))
        agents = [g.id for g in gmis]
        trainers = []
        for d in train_devs:
            for j in range(req.layout.trainers_per_gpu):
                gmis.append(GMI(id=len(gmis), device=d, local_index=j, roles=["trainer"], num_envs=0))
                trainers.append(gmis[-1].id)
        channels = [[a, t] for a in agents for t in trainers]
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="", trainer_group=trainers,
                    channels=channels)
