"""One collective update loop for the experience trainers: PPO (clipped, ``mini_epochs`` passes) and A2C (one step).

Every collective goes through the reduction callable the trainer is given (a sum in place over
the trainer group, STYLE item 11) and is weighted by rows, so a trainer with nothing to train in a
round still takes part with weight 0 and every trainer applies the identical averaged gradient
(identical weights everywhere). The KL estimate rides in the same reduction as the gradients, so
the adaptive learning-rate schedule sees the group's KL and every trainer sets the same rate.

G trainers make the update one trainer makes on all their rows (in trainer order): every trainer draws the same
permutation of the group's rows (the run's seed) and trains its own rows of each minibatch, and with several
trainers the normalisers step on the moments of every trainer's rows where one trainer steps them (the input
normaliser on each minibatch forward, the value normaliser on the round's values and returns;
:class:`~gmiexp.rl.rlgames.sync.GroupRunningMeanStd`), so nothing is merged afterwards.
Replayed rollouts go through the same step (``off_policy=True``); they use the current rate and do
not move the schedule (their KL measures the age of the behaviour policy, not the last update).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gmiexp.config import TrainConfig
from gmiexp.device import step_boundary
from gmiexp.rl.learner.gae import gae
from gmiexp.rl.learner.losses import kl_estimate, row_losses
from gmiexp.rl.learner.schedule import make_schedule, needs_kl
from gmiexp.rl.learner.sequences import as_sequences, model_input, sequence_rows
from gmiexp.rl.rlgames.checkpoint import SCHEDULE_KEY
from gmiexp.rl.rlgames.states import StateLayout
from gmiexp.rl.rlgames.sync import group_normalisers, normalised, step_without_rows

#: Sums a tensor in place over the trainer group (every trainer calls it the same number of times).
Reduce = Callable[[torch.Tensor], object]
#: Rollouts of one round: ``[(num_envs, fields shaped (horizon * num_envs, ...))]``.
Rollouts = list[tuple[int, dict[str, torch.Tensor]]]


def make_optimiser(model: nn.Module, train: TrainConfig) -> torch.optim.Optimizer:
    """Adam as rl-games builds it, with its ``weight_decay`` (unfused: the lazy stand-in has no fused kernel)."""
    return torch.optim.Adam(model.parameters(), lr=float(train.learning_rate), eps=1e-8,
                            weight_decay=float(train.rlgames_config.get("weight_decay", 0.0)))


class Learner:
    """PPO (``ppo=True``) or A2C on rollouts, one collective round per :meth:`step`."""

    def __init__(self, model: nn.Module, optimiser: torch.optim.Optimizer, train: TrainConfig, reduce_sum: Reduce,
                 *, ppo: bool, num_minibatches: int, world: int, leader: bool, device: torch.device, seed: int,
                 max_frames: int, states: StateLayout | None = None, rank: int = 0) -> None:
        """A trainer of a group of ``world``; ``rank`` is its place there, ``seed`` the minibatch permutation's.

        Every trainer gets the same ``seed`` (the run's); its rows follow the rows of the trainers before it.
        """
        self.model, self.opt, self.train, self.reduce_sum = model, optimiser, train, reduce_sum
        self.states = states  # a recurrent policy: minibatches of whole seq_length sequences
        self.seq_length = states.seq_length if states is not None else 1
        self.ppo = ppo
        self.mini_epochs = train.mini_epochs if ppo else 1
        self.num_minibatches = num_minibatches if ppo else 1
        self.world, self.leader, self.device, self.rank = world, leader, device, rank
        self.schedule = make_schedule(train, max_frames)
        self.lr = float(train.learning_rate)
        self.frames = 0  # rows trained by the group in this run (fresh rows only): the linear schedule's clock
        self.updates = 0
        self.last_loss = 0.0
        self.last_kl = 0.0
        self.train_s = 0.0
        self.comm_s = 0.0
        self._before: tuple[torch.Tensor, torch.Tensor] | None = None  # rows and neglogp of the last loss
        self._gen = torch.Generator().manual_seed(seed)
        # rl-games' own mixed precision (autocast and its GradScaler on CUDA; both off elsewhere, as in rl-games)
        self.mixed_precision = bool(train.mixed_precision) and device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.mixed_precision)
        # the group's normalisers before compiling: the compiled module calls the swapped ones
        self.grouped = group_normalisers(model, self._sum) if world > 1 else []
        self.forward = torch.compile(model) if train.torch_compile else model  # as rl-games' Runner compiles
        # rl-games' schedule_type: "legacy" (its default) moves the rate after every minibatch on its KL,
        # "standard" once per mini-epoch on the mini-epoch's mean KL; A2C's one step is the same either way
        self.legacy = train.rlgames_config.get("schedule_type", "legacy") == "legacy"
        self.epoch0 = self.frame0 = 0  # counters restored from a checkpoint
        self.start_digest = ""

    def _sum(self, t: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        self.reduce_sum(t)
        self.comm_s += time.perf_counter() - t0
        return t

    def set_lr(self, lr: float) -> None:
        self.lr = float(lr)
        for g in self.opt.param_groups:
            g["lr"] = self.lr

    def schedule_state(self) -> dict[str, float]:
        """The rate the schedule reached, for the checkpoint (:data:`gmiexp.rl.rlgames.checkpoint.SCHEDULE_KEY`)."""
        return {"last_lr": self.lr, "entropy_coef": float(self.train.entropy_coef)}

    def restore_schedule(self, state: dict[str, Any]) -> None:
        """Go on with a checkpoint's rate; one without it (rl-games' own, older gmiexp): ``train.learning_rate``."""
        saved = state.get(SCHEDULE_KEY)
        self.set_lr(float(saved["last_lr"]) if saved else float(self.train.learning_rate))

    def sync_initial_weights(self) -> None:
        """Every trainer starts from the leader's weights (a sum where the others contribute 0)."""
        state = [t for t in self.model.state_dict().values() if torch.is_tensor(t) and t.is_floating_point()]
        flat = torch.cat([t.detach().double().reshape(-1).cpu() for t in state])
        if not self.leader:
            flat.zero_()
        self._sum(flat)
        off = 0
        with torch.no_grad():
            for t in state:
                t.copy_(flat[off:off + t.numel()].view_as(t).to(t.dtype))
                off += t.numel()

    def dataset(self, fresh: Rollouts) -> dict[str, torch.Tensor] | None:
        """GAE per rollout, concatenated on the device; values normalised as configured (advantages: step)."""
        tr = self.train
        vms = getattr(self.model, "value_mean_std", None)
        if not fresh:
            if tr.normalize_value and vms is not None:  # the group's values and returns steps, with no rows
                vms.train()
                step_without_rows(vms)
                step_without_rows(vms)
                vms.eval()
            return None
        records = tr.horizon_length + 1  # the rollout's steps and its bootstrap record
        parts = [gae(b, records, n, tr.gamma, tr.tau) for n, b in fresh]
        if self.states is not None:
            parts = [as_sequences(p, b, records, n, self.states)
                     for p, (n, b) in zip(parts, fresh, strict=True)]
        d = {k: torch.cat([p[k] for p in parts]).to(self.device) for k in parts[0]}
        if tr.normalize_value and vms is not None:
            vms.train()
            d["values"] = vms(d["values"].reshape(-1, 1)).reshape(-1)
            d["returns"] = vms(d["returns"].reshape(-1, 1)).reshape(-1)
            vms.eval()
        return d

    def loss(self, d: dict[str, torch.Tensor], idx: torch.Tensor, off_policy: bool = False
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean loss, summed KL estimate) of the rows ``idx``."""
        with torch.amp.autocast("cuda", enabled=self.mixed_precision):
            rows, kl, neglogp = row_losses(self.forward, d, idx, self.train, self.ppo, off_policy, self.seq_length)
        self._before = (idx, neglogp)
        return rows.mean(), kl.sum()

    def _minibatch(self, d: dict[str, torch.Tensor] | None, idx: torch.Tensor, params: list[nn.Parameter],
                   off_policy: bool) -> tuple[float, float, float | None]:
        """One reduced gradient step; returns (group rows, group KL sum, my loss or None)."""
        self.opt.zero_grad(set_to_none=False)
        mean = None
        kl = torch.zeros(1, dtype=params[0].dtype, device=params[0].device)
        if idx.numel():
            mean, kl_sum = self.loss(d, idx, off_policy)
            step_boundary(mean)  # the forward as data, or each op of the backward run eagerly on lazy reruns it
            self.scaler.scale(mean).backward()
            kl = kl_sum.detach().reshape(1).to(params[0].dtype)
        elif "running_mean_std" in self.grouped:  # the others' forward steps the input normaliser: join it
            step_without_rows(self.model.running_mean_std)
        # the row count and the KL ride with the gradients, so they live on their device
        flat = torch.cat([p.grad.reshape(-1) * idx.numel() for p in params]
                         + [torch.tensor([float(idx.numel())], dtype=params[0].dtype, device=params[0].device), kl])
        # the gradients as data, run once: each read below (the loss, the host staging, the row count, an op the
        # lazy backend runs eagerly) would run their pending graph again
        step_boundary(flat)
        loss = None if mean is None else float(mean.item())
        self._sum(flat)
        rows, kl_total = flat[-2:].tolist()
        if rows == 0:
            return 0.0, 0.0, loss
        off = 0
        for p in params:
            p.grad.copy_(flat[off:off + p.numel()].view_as(p) / rows)
            off += p.numel()
        # every trainer holds the same reduced gradient, so the scaler finds the same infs and keeps the same scale
        self.scaler.unscale_(self.opt)
        if self.train.truncate_grads:
            nn.utils.clip_grad_norm_(params, self.train.grad_norm)
        self.scaler.step(self.opt)
        self.scaler.update()
        step_boundary(params[0])  # weights and Adam's moments start the next minibatch's graph as data
        return rows, kl_total, loss

    @torch.no_grad()
    def _kl_after_step(self, d: dict[str, torch.Tensor] | None, n: int) -> tuple[float, float]:
        """(group rows, group KL sum) between the policy before A2C's step and after it, on the step's rows.

        A2C takes one step per round, so the KL before it (what PPO's minibatches measure) is only
        the behaviour policy's lag, 0 on fresh rows, and would drive the adaptive rate to its cap.
        """
        kl = torch.zeros(1, dtype=torch.float64)
        if n and d is not None and self._before is not None:
            idx, before = self._before
            self.model.eval()  # eval: the observation normaliser has seen these rows already
            res = self.model(model_input(d, idx, self.seq_length))
            self.model.train()
            kl = kl_estimate(before, res["prev_neglogp"]).sum().reshape(1).double().cpu()
        head = self._sum(torch.cat([torch.tensor([float(n)], dtype=torch.float64), kl]))
        rows, total = head.tolist()
        return rows, total

    def step(self, fresh: Rollouts, done: bool, off_policy: bool = False) -> tuple[int, int, bool]:
        """Train on rollouts; returns (my rows, all trainers' rows, all done).

        ``off_policy``: replayed rollouts (A2C weights them by the truncated importance weight).
        Every trainer of the group must call it the same number of times with the same flag.
        """
        t0 = time.perf_counter()
        comm0 = self.comm_s
        self._before = None
        self.model.train()
        d = self.dataset(fresh)
        n = 0 if d is None else int(d["advantages"].numel())
        a = d["advantages"].double().cpu() if d is not None else torch.zeros(0, dtype=torch.float64)
        units = n // self.seq_length  # rows, or whole sequences of a recurrent policy
        shares = torch.zeros(self.world, dtype=torch.float64)
        shares[self.rank] = units
        head = self._sum(torch.cat([torch.tensor([float(n), float(done), float(a.sum()), float((a * a).sum())],
                                                 dtype=torch.float64), shares]))
        total, all_done = int(head[0].item()), int(head[1].item()) == self.world
        shares = [int(u) for u in head[4:].tolist()]
        first = sum(shares[:self.rank])  # my units' place among the group's
        if d is not None and self.train.normalize_advantage and total > 1:
            # over every trainer's rows, as one trainer would over the whole batch: the partition is not the learning
            d["advantages"] = normalised(d["advantages"], total, head[2].item(), head[3].item())
        if total == 0:
            self.model.eval()
            self.train_s += time.perf_counter() - t0 - (self.comm_s - comm0)
            return 0, 0, all_done
        if not off_policy:
            self.frames += total
            self.updates += 1
        params = [p for p in self.model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        losses = []
        for _ in range(self.mini_epochs):
            # one permutation of the group's units, the same on every trainer: each trains its own of each minibatch
            group_units = sum(shares)
            chunks = torch.randperm(group_units, generator=self._gen).chunk(self.num_minibatches) if group_units else ()
            rows = kl = 0.0
            for i in range(self.num_minibatches):
                idx = chunks[i] if i < len(chunks) else torch.zeros(0, dtype=torch.long)
                idx = idx[(idx >= first) & (idx < first + units)] - first
                if self.states is not None:
                    idx = sequence_rows(idx, self.seq_length)
                r, k, loss = self._minibatch(d, idx, params, off_policy)
                rows, kl = rows + r, kl + k
                if loss is not None:
                    losses.append(loss)
                if self.legacy and self.ppo and not off_policy and r:  # rl-games' default: after every minibatch
                    self.last_kl = k / r
                    lr, _ = self.schedule.update(self.lr, self.train.entropy_coef, self.epoch0 + self.updates,
                                                 self.frames, self.last_kl)
                    self.set_lr(lr)
            if not off_policy and not (self.legacy and self.ppo):  # "standard": once per mini-epoch, on the mean KL
                if not self.ppo and needs_kl(self.train):
                    rows, kl = self._kl_after_step(d, n)
                self.last_kl = kl / rows if rows else 0.0
                lr, _ = self.schedule.update(self.lr, self.train.entropy_coef, self.epoch0 + self.updates,
                                             self.frames, self.last_kl)
                self.set_lr(lr)
        self.model.eval()
        self.last_loss = sum(losses) / len(losses) if losses else 0.0
        self.train_s += time.perf_counter() - t0 - (self.comm_s - comm0)
        return n, total, all_done


__all__ = ["Learner", "Reduce", "Rollouts", "make_optimiser"]
