"""GMI-aware PPO agents for rl-games, registered through ``runner.algo_factory``.

rl-games 1.6.5 hard-codes ``init_process_group("nccl")`` and ``cuda:LOCAL_RANK``
behind ``config.multi_gpu``. The agents here construct rl-games with
``multi_gpu=False`` (so it never touches NCCL), then switch its multi-GPU
synchronisation back on over gmiexp's gloo default group: the initial weight
broadcast, KL averaging, learning-rate broadcast, global frame counting and
the stop flag all stay rl-games' own code. gmiexp adds what 1.6.5 lacks or
does its own way: the gradient reduction goes through the Plan's strategy
(``trancate_gradients_and_step``, rl-games' spelling), and the running
observation/value normalisers are merged after every epoch.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import torch
import torch.distributed as dist
from rl_games.algos_torch import a2c_continuous, a2c_discrete, torch_ext
from rl_games.common.diagnostics import DefaultDiagnostics, PpoDiagnostics
from torch import nn

from gmiexp import signals
from gmiexp.rl.rlgames.checkpoint import host, model_digest
from gmiexp.rl.rlgames.lazy import fused_adam_supported, lazy_scalar_guard
from gmiexp.rl.rlgames.observer import EpochReport, GMIObserver
from gmiexp.rl.rlgames.sync import gloo_sum, merge_running_stats, reduce_gradients, start_counts
from gmiexp.role import GMIContext


class ClipFraction(DefaultDiagnostics):
    """rl-games' diagnostics hook, kept for the epoch's PPO clip fraction (``train/clip_frac``) on every GMI.

    rl-games computes it only in its ``PpoDiagnostics`` (``use_diagnostics``, rank 0, TensorBoard only); this one
    runs its formula per minibatch and hands the epoch's mean to the agent. With ``use_diagnostics`` on, rl-games'
    own diagnostics still run beside it.
    """

    def __init__(self, inner: DefaultDiagnostics) -> None:
        super().__init__()
        self.inner, self.fracs = inner, []

    def send_info(self, writter: Any) -> None:  # (sic) rl-games' argument name
        self.inner.send_info(writter)

    def epoch(self, agent: Any, current_epoch: int) -> None:
        self.inner.epoch(agent, current_epoch)

    def mini_epoch(self, agent: Any, miniepoch: int) -> None:
        self.inner.mini_epoch(agent, miniepoch)

    def mini_batch(self, agent: Any, batch: dict[str, Any], e_clip: float, minibatch: int) -> None:
        self.inner.mini_batch(agent, batch, e_clip, minibatch)
        with torch.no_grad():
            self.fracs.append(float(torch_ext.policy_clip_fraction(
                batch["new_neglogp"].detach(), batch["old_neglogp"].detach(), e_clip, batch["masks"])))

    def take(self) -> float | None:
        out = sum(self.fracs) / len(self.fracs) if self.fracs else None
        self.fracs = []
        return out


def _mean(values: list[Any]) -> float | None:
    return float(torch_ext.mean_list(values).item()) if values else None


class GMISyncMixin:
    """Process-group ownership and GMI synchronisation; mixed into rl-games' A2C agents."""

    gmi_ctx: GMIContext

    def __init__(self, base_name: str, params: dict[str, Any], ctx: GMIContext) -> None:
        self.gmi_ctx = ctx
        config = params["config"]
        config["multi_gpu"] = False
        if ctx.mgr.rank != 0:
            config["print_stats"] = False
        super().__init__(base_name, params)  # type: ignore[call-arg]
        if not fused_adam_supported(self.model):
            # rl-games 1.6.5 builds Adam with fused=True, which only a few device types implement
            self.optimizer = torch.optim.Adam(self.model.parameters(), float(self.last_lr), eps=1e-08,
                                              weight_decay=self.weight_decay)
        if self.has_central_value and not fused_adam_supported(self.central_value_net.model):
            cv = self.central_value_net  # its own fused Adam, likewise
            cv.optimizer = torch.optim.Adam(cv.model.parameters(), float(cv.lr), eps=1e-08,
                                            weight_decay=cv.weight_decay)
        self._take_over_distributed()
        self.diagnostics = ClipFraction(self.diagnostics if isinstance(self.diagnostics, PpoDiagnostics)
                                        else DefaultDiagnostics())
        self._grad_norms: list[float] = []
        self._filmer = None
        plan = ctx.plan
        if plan.video and ctx.mgr.rank == 0 and hasattr(self, "actions_low"):  # capture_video=True (continuous)
            from gmiexp.eval.training_video import EpochFilmer

            self._filmer = EpochFilmer(plan)
        self.timings: dict[str, float] = {"sim_s": 0.0, "inference_s": 0.0, "train_s": 0.0, "comm_s": 0.0}
        self.last_epoch: dict[str, float] = {}
        self._stats_counts: dict[int, float] = {}
        self._cv_stats_counts: dict[int, float] = {}

    def _take_over_distributed(self) -> None:
        mgr = self.gmi_ctx.mgr
        self.global_rank = mgr.rank
        self.world_size = mgr.world_size
        self.multi_gpu = mgr.distributed
        # rl-games' train() calls torch.cuda.set_device(local_rank); each GMI sees one device
        # (CUDA_VISIBLE_DEVICES), and -1 makes the call a no-op on a CPU-only GMI.
        self.local_rank = 0 if mgr.torch_device.type == "cuda" else -1
        if self.has_central_value:  # its gradients: rl-games' own all-reduce, over gmiexp's default group
            cv = self.central_value_net
            cv.multi_gpu, cv.world_size, cv.global_rank = self.multi_gpu, self.world_size, self.global_rank
        if self.global_rank != 0 and self.writer is not None:
            self.writer.close()
            self.writer = None
            shutil.rmtree(self.summaries_dir, ignore_errors=True)

    # ---- rl-games hooks ------------------------------------------------
    def calc_gradients(self, input_dict: dict[str, Any]) -> None:
        with lazy_scalar_guard(self.model):
            super().calc_gradients(input_dict)  # type: ignore[misc]

    def train_central_value(self) -> Any:
        with lazy_scalar_guard(self.central_value_net.model):
            return super().train_central_value()  # type: ignore[misc]

    def trancate_gradients_and_step(self) -> None:  # (sic) rl-games' method name
        if self.multi_gpu:
            reduce_gradients(self.model.parameters(), self.gmi_ctx.reduction)
        self.scaler.unscale_(self.optimizer)  # the norm is measured (train/grad_norm) whether clipped or not
        limit = self.grad_norm if self.truncate_grads else float("inf")
        self._grad_norms.append(float(nn.utils.clip_grad_norm_(self.model.parameters(), limit)))
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def get_full_state_weights(self) -> dict[str, Any]:
        """rl-games' checkpoint state with host tensors: loadable on any host (and lazy tensors cannot be pickled)."""
        return host(super().get_full_state_weights())  # type: ignore[misc]

    def train_epoch(self) -> tuple:
        comm0 = self.gmi_ctx.reduction.comm_s
        if self.multi_gpu and not self._stats_counts:  # the counts every GMI starts the first merge from
            self._stats_counts = start_counts(self.model)
            if self.has_central_value:
                self._cv_stats_counts = start_counts(self.central_value_net.model)
        result = super().train_epoch()  # type: ignore[misc]
        if signals.stop_requested() and self.global_rank == 0:
            # Ctrl-C/SIGTERM: end after this epoch. rl-games then saves its last checkpoint and GMI 0 broadcasts
            # the stop to every GMI (its own should_exit), so all GMIs leave the loop at the same epoch.
            self.max_epochs = int(self.epoch_num)
        t0 = time.perf_counter()
        if self.multi_gpu:
            merge_running_stats(self.model, gloo_sum(), self.world_size, self._stats_counts)
            if self.has_central_value:
                merge_running_stats(self.central_value_net.model, gloo_sum(), self.world_size, self._cv_stats_counts)
        sync_s = time.perf_counter() - t0
        self._account(result, self.gmi_ctx.reduction.comm_s - comm0 + sync_s, sync_s)
        if self.config.get("check_sync"):
            self.last_epoch["digest"] = self._check_sync()
        if isinstance(self.algo_observer, GMIObserver):  # it reads nothing back: the agent hands it the epoch
            self.algo_observer.epoch_done(self._epoch_report(result))
        if self._filmer is not None:
            self._filmer.after_epoch(int(self.epoch_num), self)
        return result

    def _epoch_report(self, result: tuple) -> EpochReport:
        rewards = self.game_rewards
        return EpochReport(epoch=int(self.epoch_num), frame=int(self.frame), curr_frames=int(self.curr_frames),
                           world_size=int(self.world_size), timings=dict(self.last_epoch),
                           reward=float(rewards.get_mean()[0]) if rewards.current_size else None,
                           totals=dict(self.timings), learning=self._learning(result))

    def _learning(self, result: tuple) -> dict[str, float]:
        """The epoch's figures rl-games writes to its TensorBoard (losses/*, info/*), under gmiexp's names."""
        a_losses, c_losses = result[4], result[5]
        b_losses = result[6] if len(result) == 11 else []  # continuous agents also return the bounds loss
        entropies, kls, last_lr, lr_mul = result[-4:]
        norms, self._grad_norms = self._grad_norms, []
        out = {"loss/actor": _mean(a_losses), "loss/critic": _mean(c_losses), "loss/entropy": _mean(entropies),
               "loss/bounds": _mean(b_losses), "train/kl": _mean(kls), "train/lr": float(last_lr) * float(lr_mul),
               "train/clip_frac": self.diagnostics.take(),
               "train/grad_norm": sum(norms) / len(norms) if norms else None,
               "episode/length": float(self.game_lengths.get_mean()) if self.game_lengths.current_size else None}
        return {k: v for k, v in out.items() if v is not None}

    def _check_sync(self) -> str:
        """Raise if any GMI's weights or normalisers differ from the others' (bit for bit)."""
        digest = model_digest(self.model)
        if self.has_central_value:
            digest += model_digest(self.central_value_net.model)
        if self.multi_gpu:
            digests: list[str | None] = [None] * self.world_size
            dist.all_gather_object(digests, digest)
            if len(set(digests)) != 1:
                raise RuntimeError(f"GMI models diverged at epoch {self.epoch_num}: digests {digests}")
        return digest

    def _account(self, result: tuple, comm_s: float, extra_s: float) -> None:
        step_time, play_time, update_time, total_time = result[:4]
        epoch = {
            "sim_s": float(step_time),
            "inference_s": float(play_time - step_time),
            "train_s": float(max(0.0, update_time - comm_s)),
            "comm_s": float(comm_s),
            "total_s": float(total_time) + extra_s,
            "frames": float(self.curr_frames),
        }
        for k in self.timings:
            self.timings[k] += epoch[k]
        self.last_epoch = epoch


class GMIContinuousAgent(GMISyncMixin, a2c_continuous.A2CAgent):
    """rl-games' continuous PPO with GMI synchronisation."""


class GMIDiscreteAgent(GMISyncMixin, a2c_discrete.DiscreteA2CAgent):
    """rl-games' discrete PPO with GMI synchronisation."""

