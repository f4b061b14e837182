"""rl-games' central value network with its gradients reduced by the Plan's strategy.

rl-games 1.6.5 all-reduces the central value gradients itself (``calc_gradients``, on the process
group it assumes is NCCL) and broadcasts its learning rate; both hand device tensors straight to
the process group. This subclass does those two steps through gmiexp's communication layer
instead: gradients through the Plan's reduction (as the policy's), the learning rate from GMI 0.
"""

from __future__ import annotations

from typing import Any

import torch
from rl_games.algos_torch.central_value import CentralValueTrain
from torch.nn.utils import clip_grad_norm_

from gmiexp.rl.rlgames.sync import reduce_gradients
from gmiexp.role import GMIContext


def central_value_args(agent: Any) -> dict[str, Any]:
    """The arguments rl-games' A2C agents (continuous and discrete alike) build their central value net with."""
    return {
        "state_shape": agent.state_shape, "value_size": agent.value_size, "ppo_device": agent.ppo_device,
        "num_agents": agent.num_agents, "horizon_length": agent.horizon_length, "num_actors": agent.num_actors,
        "num_actions": agent.actions_num, "seq_length": agent.seq_length, "normalize_value": agent.normalize_value,
        "network": agent.central_value_config["network"], "config": agent.central_value_config,
        "writter": agent.writer, "max_epochs": agent.max_epochs, "multi_gpu": False,
        "zero_rnn_on_done": agent.zero_rnn_on_done,
    }


class GMICentralValue(CentralValueTrain):
    """The central value net of a GMI: rl-games' own, synchronised through gmiexp (``multi_gpu`` stays off)."""

    def __init__(self, ctx: GMIContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gmi_ctx = ctx

    @property
    def gmi_sync(self) -> bool:
        return self.gmi_ctx.mgr.distributed

    def update_lr(self, lr: float) -> None:
        if self.gmi_sync:
            lr = self.gmi_ctx.mgr.broadcast_float(lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def calc_gradients(self, batch: dict[str, Any]) -> torch.Tensor:
        """rl-games 1.6.5's ``calc_gradients``, with the gradient reduction of the Plan."""
        batch_dict = {"obs": self._preproc_obs(batch["obs"]), "actions": batch["actions"],
                      "seq_length": self.seq_length, "dones": batch["dones"]}
        if self.is_rnn:
            batch_dict["rnn_states"] = batch["rnn_states"]
        values = self.model(batch_dict)["values"]
        loss = self.calc_loss(batch["old_values"], values, batch["returns"], batch.get("rnn_masks"))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.gmi_sync:
            reduce_gradients(self.model.parameters(), self.gmi_ctx.reduction)
        if self.truncate_grads:
            clip_grad_norm_(self.model.parameters(), self.grad_norm)
        self.optimizer.step()
        return loss
