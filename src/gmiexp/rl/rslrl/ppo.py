"""rsl_rl's PPO in a GMI: its own update, with the group steps rsl_rl leaves to NCCL done by gmiexp.

rsl_rl calls :meth:`PPO.broadcast_parameters` before the first rollout and :meth:`PPO.reduce_parameters`
after every backward pass when it runs multi-GPU; :class:`GMIPPO` overrides both (the Plan's reduction, several
GMIs per GPU). So that G GMIs make the update one process makes on the whole batch, it also updates every
normaliser on the moments of all GMIs' rows where rsl_rl updates it (:class:`gmiexp.rl.rslrl.sync.GroupNormalization`),
cuts each GMI's rows of one process's minibatches (:class:`gmiexp.rl.rslrl.minibatch.GroupRolloutStorage`),
weighs each GMI's gradient and KL by its share of the minibatch, and normalises advantages over the group. The
adaptive schedule's KL goes through rsl_rl's own ``all_reduce`` on gmiexp's gloo default group (the actor returns
it on the host where gloo cannot reduce the device). The rsl_rl internals used here are listed in
:mod:`gmiexp.rl.rslrl.hooks`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from itertools import chain
from typing import Any

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.utils import resolve_callable
from tensordict import TensorDict

from gmiexp.device import host_staging, step_boundary
from gmiexp.rl.rlgames.lazy import lazy_scalar_guard
from gmiexp.rl.rslrl.minibatch import GroupRolloutStorage
from gmiexp.rl.rslrl.sync import GroupSync, group_normalisers
from gmiexp.rl.state import to_host


@contextlib.contextmanager
def update_device(alg: PPO) -> Iterator[None]:
    """rsl_rl's update with ``alg.device`` the host while the models are on the lazy stand-in (no-op elsewhere).

    In ``update`` rsl_rl reads ``self.device`` for two things only, and neither exists for ``lazy``: the device type
    of its ``torch.amp.autocast`` (5.5; autocast has no lazy type and raises even when disabled) and the tensor its
    adaptive schedule broadcasts the learning rate in (gloo cannot broadcast a lazy tensor: it returns it unchanged).
    On the host both are what they are on a GPU: autocast off, the learning rate broadcast from rank 0. Every
    tensor the update trains on is already on the models' device.
    """
    device = alg.device
    if torch.device(device).type != "lazy":
        yield
        return
    alg.device = "cpu"
    try:
        yield
    finally:
        alg.device = device


@contextlib.contextmanager
def eager_on_lazy(device: torch.device | str) -> Iterator[None]:
    """Leave rsl_rl's ``torch.inference_mode`` on the lazy stand-in device (no-op elsewhere).

    The lazy backend has no view ops in inference mode (``aten::as_strided``); ``no_grad`` gives the
    rollout the same semantics there: nothing recorded for backward.
    """
    if torch.device(device).type != "lazy":
        yield
        return
    with torch.inference_mode(False), torch.no_grad():
        yield


def group_kl(base: type, group: GroupSync, host: bool) -> type:
    """``base`` (the config's actor class) whose KL counts by this GMI's share of the minibatch (``group.weight``).

    rsl_rl averages the GMIs' mean KLs; weighted, the average is the mean over the minibatch's rows, the KL one
    process's schedule sees. ``host``: returned on the host, where gloo reduces it.
    """

    class GroupKL(base):  # type: ignore[misc, valid-type]
        def get_kl_divergence(self, old: Any, new: Any) -> torch.Tensor:
            with eager_on_lazy(new[0].device):
                kl = super().get_kl_divergence(old, new) * group.weight
                return kl.cpu() if host else kl

    GroupKL.__name__ = GroupKL.__qualname__ = base.__name__  # same state dict, same printed name
    return GroupKL


class GMIPPO(PPO):
    """rsl_rl's PPO whose group steps (broadcast, gradients, normalisers, minibatches, advantages) are gmiexp's."""

    def __init__(self, *args: Any, group: GroupSync | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group = group
        #: the observations the last step returned, which rsl_rl's loop carries into the next iteration (a
        #: checkpoint keeps them: gmiexp.rl.rslrl.runstate)
        self.carried_obs: TensorDict | None = None
        # rsl_rl steps the adaptive schedule on rank 0 only and broadcasts the lr; every GMI sees the group's KL,
        # so each takes the same step itself (rank 0's broadcast then changes nothing)
        self.gpu_global_rank = 0
        #: rsl_rl's normalize_advantage_per_mini_batch as configured (the group storage may take it over)
        self.per_minibatch_advantages = self.normalize_advantage_per_mini_batch
        if group is None:
            return
        group_normalisers(self.models(), group.moments)
        self.storage = GroupRolloutStorage(self.storage, group, self.per_minibatch_advantages)
        # each minibatch's advantages are normalised by the storage over the group's rows, not by rsl_rl on ours
        self.normalize_advantage_per_mini_batch = False

    @staticmethod
    def construct_algorithm(obs: TensorDict, env: Any, cfg: dict, device: str) -> PPO:
        """rsl_rl's construction; in a group the actor's KL counts by the GMI's share of each minibatch."""
        group = cfg["algorithm"].get("group")
        if cfg.get("multi_gpu") and group is not None:
            base = resolve_callable(cfg["actor"]["class_name"])
            cfg["actor"]["class_name"] = group_kl(base, group, host_staging(torch.device(device)))
        return PPO.construct_algorithm(obs, env, cfg, device)

    def models(self) -> list[torch.nn.Module]:
        """Every model the algorithm trains or normalises with: actor, critic, and RND when configured."""
        return [self._raw_actor, self._raw_critic, *([self.rnd] if self.rnd else [])]

    def act(self, obs: TensorDict) -> torch.Tensor:
        with eager_on_lazy(self.device):
            return super().act(obs)

    def process_env_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor,
                         extras: dict[str, torch.Tensor]) -> None:
        self.carried_obs = obs
        with eager_on_lazy(self.device):
            super().process_env_step(obs, rewards, dones, extras)
            if self.group is not None:  # the step's normaliser updates not yet taken by a forward pass
                self.group.moments.flush()
            step_boundary(self.storage.rewards)  # the lazy device's graph ends with the step

    def update(self) -> dict[str, float]:
        """rsl_rl's update; on the lazy device its scalar products run eagerly (see gmiexp.rl.rlgames.lazy).

        rsl_rl 5.5 updates the normalisers at the end of the update, on the rollout: those updates are taken here,
        so a checkpoint saved or a digest taken after the update holds them.
        """
        with lazy_scalar_guard(self._raw_actor), update_device(self):
            out = super().update()
        if self.group is not None:
            self.group.moments.flush()
        return out

    def save(self) -> dict:
        """rsl_rl's checkpoint dict; on a stand-in device its tensors on the host (lazy storage cannot be pickled)."""
        saved = super().save()
        return to_host(saved) if torch.device(self.device).type == "lazy" else saved

    def broadcast_parameters(self) -> None:
        """Group rank 0's models, normalisers included, on every GMI (rsl_rl pickles state dicts over NCCL)."""
        if self.group is not None:
            self.group.broadcast(self.models())

    def reduce_parameters(self) -> None:
        """Average the gradients of actor, critic and RND over the group with the Plan's reduction, weighted."""
        if self.group is None:
            return
        params = chain(self.actor.parameters(), self.critic.parameters(),
                       self.rnd.parameters() if self.rnd else ())
        self.group.reduce_gradients(params)
        step_boundary(self.storage.rewards)

    def compute_returns(self, obs: TensorDict) -> None:
        """rsl_rl's returns; advantages normalised over the whole group's batch (or per minibatch, later)."""
        with eager_on_lazy(self.device):
            super().compute_returns(obs)
            if self.group is None:
                return
            st = self.storage
            if self.per_minibatch_advantages:  # the group storage normalises each minibatch's
                st.advantages = st.returns - st.values
            else:
                st.advantages = self.group.normalise(st.returns - st.values)
