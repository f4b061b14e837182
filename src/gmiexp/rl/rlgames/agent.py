"""GMI-aware PPO agents for rl-games, registered through ``runner.algo_factory``.

rl-games 1.6.5 hard-codes ``init_process_group("nccl")`` and ``cuda:LOCAL_RANK`` behind
``config.multi_gpu``, and under it hands device tensors to the process group itself: the initial
weights pickled with ``broadcast_object_list``, the KL all-reduce, learning-rate and stop-flag
broadcasts, and the central value net's gradient all-reduce. The agents here construct rl-games
with ``multi_gpu=False`` and keep it off, so none of that code runs; every one of those steps is
done here through gmiexp's communication layer (:class:`~gmiexp.comm.manager.GMIManager`, staging
through the host where the device needs it) and the Plan's reduction:

* initial weights and normalisers: broadcast from GMI 0 tensor by tensor (``train``);
* KL: averaged over every GMI before rl-games' scheduler reads it (:class:`SyncedScheduler`);
* learning rate and stop flag: GMI 0's, broadcast (``update_lr``, ``train``);
* frames: the epoch's frames summed over every GMI (``train``);
* gradients, policy and central value: the Plan's strategy (``trancate_gradients_and_step``,
  rl-games' spelling; :class:`~gmiexp.rl.rlgames.central_value.GMICentralValue`);
* running normalisers: updated on the moments of every GMI's rows, where rl-games updates them
  (:class:`~gmiexp.rl.rlgames.sync.GroupRunningMeanStd`: each minibatch forward, ``prepare_dataset``);
* advantages: normalised over every GMI's rows (``prepare_dataset``).

A checkpoint holds the run, not only the model (:mod:`gmiexp.rl.rlgames.runstate`): every GMI's generators,
simulator state and running episodes, gathered to GMI 0 when it saves, and given back to each GMI when a run
starts from it, so a resumed run goes on as the run never stopped; a start on another partition (a re-shape) goes
on with what it can of them (:mod:`gmiexp.rl.rlgames.carry`).

With these, G GMIs fed one batch make the update one process makes on it, to float round-off, when each GMI's
environments are the ones :func:`gmiexp.plan.minibatch.gmi_envs` assigns it (docs/equivalence.md).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from rl_games.algos_torch import a2c_continuous, a2c_discrete, torch_ext
from rl_games.common.a2c_common import print_statistics
from rl_games.common.diagnostics import DefaultDiagnostics, PpoDiagnostics
from torch import nn

from gmiexp import signals
from gmiexp.rl.infos import mean_of_known
from gmiexp.rl.rlgames.carry import resume, resume_line
from gmiexp.rl.rlgames.central_value import GMICentralValue, central_value_args
from gmiexp.rl.rlgames.checkpoint import (
    EPISODES_KEY,
    RUN_KEY,
    SCHEDULE_KEY,
    checksummed,
    episode_meters,
    restore_episode_meters,
    restore_schedule,
    schedule_state,
)
from gmiexp.rl.rlgames.episodes import gather_over_group, local_mean, merge_meters, run_wide_meters
from gmiexp.rl.rlgames.exploit import InPlaceMember
from gmiexp.rl.rlgames.filming import EpochFilmer
from gmiexp.rl.rlgames.lazy import lazy_scalar_guard, unfused_adam
from gmiexp.rl.rlgames.observer import EpochReport, GMIObserver
from gmiexp.rl.rlgames.runstate import gmi_record, info_meter
from gmiexp.rl.rlgames.sync import (
    SyncedScheduler,
    broadcast_module,
    gloo_sum,
    group_normalisers,
    normalise_over_group,
    reduce_gradients,
)
from gmiexp.rl.state import model_digest, to_host
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
        config["multi_gpu"] = False  # and it stays off: rl-games' own sync code never runs
        if ctx.mgr.rank != 0:
            config["print_stats"] = False
        super().__init__(base_name, params)  # type: ignore[call-arg]
        if self.has_central_value:  # rl-games' net, rebuilt as gmiexp's subclass (its gradients: the Plan's)
            self.central_value_net = GMICentralValue(ctx, **central_value_args(self)).to(self.ppo_device)
            if self.normalize_value:
                self.value_mean_std = self.central_value_net.model.value_mean_std
        self.optimizer = unfused_adam(self.model, self.optimizer, self.last_lr, self.weight_decay)
        if self.has_central_value:  # its own fused Adam, likewise
            cv = self.central_value_net
            cv.optimizer = unfused_adam(cv.model, cv.optimizer, cv.lr, cv.weight_decay)
        if self.gmi_sync:  # normalisers step on the group's moments, where rl-games steps them
            group_normalisers(self.model, gloo_sum())
            if self.has_central_value:
                group_normalisers(self.central_value_net.model, gloo_sum())
            if self.normalize_value:
                self.value_mean_std = (self.central_value_net.model if self.has_central_value
                                       else self.model).value_mean_std
        self._take_over_distributed()
        # the reported return, best checkpoint and score_to_win read the last episodes of the whole run
        run_wide_meters(self, gather_over_group if self.gmi_sync else None)
        self.diagnostics = ClipFraction(self.diagnostics if isinstance(self.diagnostics, PpoDiagnostics)
                                        else DefaultDiagnostics())
        self._grad_norms: list[float] = []
        self._filmer = None
        plan = ctx.plan
        if plan.video and ctx.mgr.rank == 0 and hasattr(self, "actions_low"):  # capture_video=True (continuous)
            self._filmer = EpochFilmer(plan)
        self.timings: dict[str, float] = {"sim_s": 0.0, "inference_s": 0.0, "train_s": 0.0, "comm_s": 0.0}
        self.last_epoch: dict[str, float] = {}
        self.gmi_segment = 0  # of the run (gmiexp.planner.seeds): the role sets it for a start from a checkpoint
        self.resume_report: dict[str, Any] | None = None  # what a start from a checkpoint restored (runstate.resume)
        self._preloaded: tuple[str, dict[str, Any]] | None = None
        self._restored_run: dict[str, Any] | None = None
        self._resuming = False
        self._deferring = False  # inside GMI 0's epoch end: saves wait for every GMI's record
        self._pending_saves: list[str] = []
        self._records: list[dict[str, Any]] | None = None
        self._in_place = InPlaceMember.of(self, plan.run_dir)  # a pbt member's exploit in place (gmiexp.rl.exploit)

    def prepare_dataset(self, batch_dict: dict[str, Any]) -> None:
        """rl-games' dataset; with several GMIs, advantages normalised over every GMI's rows.

        rl-games normalises each GPU's batch on its own, so its update depends on how the batch is cut; over the
        group, G GMIs make the update one GMI makes on the whole batch, and a re-shape does not change the
        learning. A recurrent policy's batch has no ``rnn_masks`` in rl-games 1.6.5 (its masked normalisation is
        the plain one); ``normalize_rms_advantage`` is refused before launch (rl-games 1.6.5 cannot build it).
        """
        if not (self.gmi_sync and self.normalize_advantage and not self.normalize_rms_advantage):
            return super().prepare_dataset(batch_dict)  # type: ignore[misc]
        if batch_dict.get("rnn_masks") is not None:
            raise ValueError("rl-games' masked advantage normalisation is not reduced over GMIs")
        self.normalize_advantage = False
        try:
            super().prepare_dataset(batch_dict)  # type: ignore[misc]
        finally:
            self.normalize_advantage = True
        values = self.dataset.values_dict
        values["advantages"] = normalise_over_group(values["advantages"], gloo_sum())
        return None

    @property
    def gmi_sync(self) -> bool:
        """More than one GMI trains this policy: the steps rl-games' ``multi_gpu`` guards run here."""
        return self.gmi_ctx.mgr.distributed

    def _take_over_distributed(self) -> None:
        mgr = self.gmi_ctx.mgr
        self.global_rank = mgr.rank
        self.world_size = mgr.world_size
        if self.gmi_sync:  # the KL every GMI's scheduler reads: the mean over GMIs
            self.scheduler = SyncedScheduler(self.scheduler, mgr)
        if self.global_rank != 0 and self.writer is not None:
            self.writer.close()
            self.writer = None
            # the central value net was built with it: a closed tensorboardX writer opens a new event file at its
            # next add_scalar (in GMI 0's summaries dir), never closed; its thread then raised at the GMI's exit
            if getattr(self, "central_value_net", None) is not None:
                self.central_value_net.writter = None  # (sic) rl-games' name
            shutil.rmtree(self.summaries_dir, ignore_errors=True)

    # ---- rl-games hooks ------------------------------------------------
    def calc_gradients(self, input_dict: dict[str, Any]) -> None:
        with lazy_scalar_guard(self.model):
            super().calc_gradients(input_dict)  # type: ignore[misc]

    def train_central_value(self) -> Any:
        with lazy_scalar_guard(self.central_value_net.model):
            return super().train_central_value()  # type: ignore[misc]

    def update_lr(self, lr: float) -> None:
        if self.gmi_sync:  # GMI 0's rate, as rl-games' broadcast (its own on the device tensor)
            lr = self.gmi_ctx.mgr.broadcast_float(lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def trancate_gradients_and_step(self) -> None:  # (sic) rl-games' method name
        if self.gmi_sync:
            reduce_gradients(self.model.parameters(), self.gmi_ctx.reduction)
        self.scaler.unscale_(self.optimizer)  # the norm is measured (train/grad_norm) whether clipped or not
        limit = self.grad_norm if self.truncate_grads else float("inf")
        self._grad_norms.append(float(nn.utils.clip_grad_norm_(self.model.parameters(), limit)))
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def save(self, fn: str) -> None:
        """rl-games' save, with the checkpoint's checksum beside it (a damaged file is passed over on resume).

        With several GMIs, a save during GMI 0's epoch end waits until every GMI has sent its record of the run
        (:meth:`_write_pending`, right after the epoch's stop decision): same state, one gather per checkpoint.
        """
        if self._deferring:
            self._pending_saves.append(fn)
            return
        with checksummed(Path(fn + ".pth")):
            super().save(fn)  # type: ignore[misc]

    def get_full_state_weights(self) -> dict[str, Any]:
        """rl-games' checkpoint state with host tensors, the episode means, learning rate and run to go on from.

        The run: every GMI's generators, simulator and running episodes (:mod:`gmiexp.rl.rlgames.runstate`). Host
        tensors: loadable on any host, and lazy tensors cannot be pickled. Outside the epoch end (where the
        GMIs gather their records) a multi-GMI checkpoint holds GMI 0's record only, which no start restores.
        """
        state = to_host(super().get_full_state_weights())  # type: ignore[misc]
        state[EPISODES_KEY] = episode_meters(self)
        state[SCHEDULE_KEY] = schedule_state(self)
        state[RUN_KEY] = {"segment": int(self.gmi_segment), "world_size": int(self.world_size),
                          "gmis": self._records if self._records is not None else [gmi_record(self)]}
        return state

    def set_full_state_weights(self, weights: dict[str, Any], set_epoch: bool = True) -> None:
        """rl-games' restore; the run (generators, simulator, episodes) waits for the loop's first reset.

        rl-games would hand every GMI GMI 0's simulator state (its ``env_state``) and then reset it in ``train``:
        each GMI's own goes back in :meth:`_go_on` instead.
        """
        super().set_full_state_weights({**weights, "env_state": None}, set_epoch)  # type: ignore[misc]
        restore_episode_meters(self, weights)
        restore_schedule(self, weights)
        self._restored_run, self._resuming = weights.get(RUN_KEY), True

    def restore(self, fn: str, set_epoch: bool = True) -> None:
        """rl-games' restore, from the checkpoint the role already read (:meth:`starts_from`) when it is ``fn``."""
        pre, self._preloaded = self._preloaded, None
        if pre is not None and pre[0] == fn:
            self.set_full_state_weights(pre[1], set_epoch=set_epoch)
            return
        super().restore(fn, set_epoch)  # type: ignore[misc]

    def starts_from(self, path: str, state: dict[str, Any], segment: int) -> None:
        """Start as segment ``segment`` of its run, from the checkpoint at ``path`` (read: ``state``)."""
        self._preloaded, self.gmi_segment = (path, state), int(segment)

    def _go_on(self) -> None:
        """A start from a checkpoint: each GMI takes its own part of the run back (after the first reset)."""
        if not self._resuming:
            return
        run, self._restored_run, self._resuming = self._restored_run, None, False
        self.resume_report = {"segment": int(self.gmi_segment), **resume(
            self, run, int(self.global_rank), int(self.world_size), int(self.gmi_ctx.gmi.seed))}
        if self.global_rank == 0:
            print(resume_line(self.resume_report, int(self.epoch_num), int(self.gmi_segment)), file=sys.stderr,
                  flush=True)

    def _write_pending(self, flags: int) -> None:
        """Every GMI: when GMI 0 has checkpoints to write (bit 2 of ``flags``), send it this GMI's record."""
        if not flags & 2:
            return
        records: list[Any] = [None] * int(self.world_size)
        dist.all_gather_object(records, gmi_record(self))
        if self.global_rank == 0:
            pending, self._pending_saves = self._pending_saves, []
            self._records = records
            try:
                for fn in pending:
                    self.save(fn)
            finally:
                self._records = None

    def train_epoch(self) -> tuple:
        comm0 = self.gmi_ctx.reduction.comm_s
        result = super().train_epoch()  # type: ignore[misc]
        if signals.stop_requested() and self.global_rank == 0:
            # Ctrl-C/SIGTERM: end after this epoch. rl-games then saves its last checkpoint and GMI 0 broadcasts
            # the stop to every GMI (its own should_exit), so all GMIs leave the loop at the same epoch.
            self.max_epochs = int(self.epoch_num)
        t0 = time.perf_counter()
        if self.gmi_sync:
            merge_meters(self)
            result = self._reduced_kls(result)
        info = self._run_wide_info()
        sync_s = time.perf_counter() - t0
        self._account(result, self.gmi_ctx.reduction.comm_s - comm0 + sync_s, sync_s)
        if self.config.get("check_sync"):
            self.last_epoch["digest"] = self._check_sync()
        if isinstance(self.algo_observer, GMIObserver):  # it reads nothing back: the agent hands it the epoch
            self.algo_observer.epoch_done(self._epoch_report(result, info))
        if self._filmer is not None:
            self._filmer.after_epoch(int(self.epoch_num), self)
        return result

    def _reduced_kls(self, result: tuple) -> tuple:
        """The epoch's result with each mini-epoch's KL averaged over the GMIs, as rl-games' multi-GPU reports it.

        The scheduler already stepped on the group's KL (:class:`SyncedScheduler`); ``train/kl`` and rl-games'
        ``info/kl`` read these.
        """
        kls = result[-3]
        if not kls:
            return result
        flat = torch.tensor([float(k) for k in kls], dtype=torch.float64)
        gloo_sum()(flat)
        flat /= self.world_size
        return (*result[:-3], [torch.tensor(float(k)) for k in flat], *result[-2:])

    # ---- rl-games' training loop ------------------------------------------
    def train(self) -> tuple[float, int]:
        """rl-games 1.6.5's ``train`` loop (continuous and discrete), its multi-GPU steps done by gmiexp.

        GMI 0 starts every GMI from its weights, counts every GMI's frames, and decides when to stop
        (epochs, frames, score); the others follow its decision. The TensorBoard writer rl-games opened is
        closed however the loop ends: rl-games never closes it, and its logger thread, left reading its queue,
        raised "handle is closed" on stderr when the interpreter tore the queue down at the GMI's exit.
        """
        try:
            return self._train_loop()
        finally:
            if self.writer is not None:
                self.writer.close()
                self.writer = None

    def _train_loop(self) -> tuple[float, int]:
        mgr = self.gmi_ctx.mgr
        self.init_tensors()
        self.mean_rewards = self.last_mean_rewards = -1000000000
        total_time = 0.0
        self.obs = self.env_reset()
        self.curr_frames = self.batch_size_envs
        if self.gmi_sync:
            broadcast_module(self.model, mgr)
            if self.has_central_value:
                broadcast_module(self.central_value_net, mgr)
        self._go_on()  # a start from a checkpoint: generators, simulator and episodes as they were
        while True:
            epoch_num = self.update_epoch()
            result = self.train_epoch()
            self.dataset.update_values_dict(None)  # cleaning memory (rl-games)
            total_time += result[3]
            curr_frames = mgr.sum_int(int(self.curr_frames)) if self.gmi_sync else int(self.curr_frames)
            frame = self.frame // self.num_agents  # rl-games' TensorBoard axis: the frames before this epoch
            self.frame += curr_frames
            should_exit = False
            if self.global_rank == 0:
                self._deferring = self.gmi_sync  # its checkpoints wait for every GMI's record
                try:
                    should_exit = self._after_epoch(epoch_num, result, total_time, curr_frames, frame)
                finally:
                    self._deferring = False
            if self.gmi_sync:  # GMI 0's stop (bit 1) and whether it has checkpoints to write (bit 2)
                flags = int(mgr.broadcast_float(float(int(should_exit) | (2 if self._pending_saves else 0))))
                should_exit = bool(flags & 1)
                self._write_pending(flags)
            if self._in_place is not None:  # every GMI: publish at an interval's end, take a leader's state
                self._in_place.epoch_end(epoch_num, should_exit)
            if should_exit:
                return self.last_mean_rewards, epoch_num

    def _after_epoch(self, epoch_num: int, result: tuple, total_time: float, curr_frames: int, frame: int) -> bool:
        """GMI 0's part of rl-games' loop: statistics, checkpoints, and whether to stop.

        ``frame``: rl-games' TensorBoard axis, the frames per agent before this epoch (read before its increment).
        """
        step_time, play_time, update_time, sum_time = result[:4]
        a_losses, c_losses = result[4], result[5]
        b_losses = result[6] if len(result) == 11 else []  # the continuous agent's bounds loss
        entropies, kls, last_lr, lr_mul = result[-4:]
        self.diagnostics.epoch(self, current_epoch=epoch_num)
        scaled_time, scaled_play_time = self.num_agents * sum_time, self.num_agents * play_time
        print_statistics(self.print_stats, curr_frames, step_time, scaled_play_time, scaled_time,
                         epoch_num, self.max_epochs, frame, self.max_frames)
        self.write_stats(total_time, epoch_num, step_time, play_time, update_time, a_losses, c_losses, entropies,
                         kls, last_lr, lr_mul, frame, scaled_time, scaled_play_time, curr_frames)
        if len(b_losses) > 0:
            self.writer.add_scalar("losses/bounds_loss", torch.stack(b_losses).mean().item(), frame)
        self.algo_observer.after_print_stats(frame, epoch_num, total_time)
        should_exit = False
        name = self.config["name"]
        mean_rewards: Any = -np.inf
        if self.game_rewards.current_size > 0:
            mean_rewards = self.game_rewards.get_mean()
            self._write_rewards(mean_rewards, frame, epoch_num, total_time)
            self.mean_rewards = mean_rewards[0]
            if self.has_self_play_config:
                self.self_play_manager.update(self)
            checkpoint_name = f"{name}_ep_{epoch_num}_rew_{mean_rewards[0]}"
            if self.save_freq > 0 and epoch_num % self.save_freq == 0:
                self.save(os.path.join(self.nn_dir, "last_" + checkpoint_name))
            if mean_rewards[0] > self.last_mean_rewards and epoch_num >= self.save_best_after:
                print("saving next best rewards: ", mean_rewards)
                self.last_mean_rewards = mean_rewards[0]
                self.save(os.path.join(self.nn_dir, name))
                if "score_to_win" in self.config and self.last_mean_rewards > self.config["score_to_win"]:
                    print("Maximum reward achieved. Network won!")
                    self.save(os.path.join(self.nn_dir, checkpoint_name))
                    should_exit = True
        shown = str(mean_rewards).replace("[", "_").replace("]", "_")
        if epoch_num >= self.max_epochs and self.max_epochs != -1:
            if self.game_rewards.current_size == 0:
                print("WARNING: Max epochs reached before any env terminated at least once")
            self.save(os.path.join(self.nn_dir, f"last_{name}_ep_{epoch_num}_rew_{shown}"))
            print("MAX EPOCHS NUM!")
            should_exit = True
        if self.frame >= self.max_frames and self.max_frames != -1:
            if self.game_rewards.current_size == 0:
                print("WARNING: Max frames reached before any env terminated at least once")
            self.save(os.path.join(self.nn_dir, f"last_{name}_frame_{self.frame}_rew_{shown}"))
            print("MAX FRAMES NUM!")
            should_exit = True
        return should_exit

    def _write_rewards(self, mean_rewards: Any, frame: int, epoch_num: int, total_time: float) -> None:
        shaped, lengths = self.game_shaped_rewards.get_mean(), self.game_lengths.get_mean()
        for i in range(self.value_size):
            tag = "rewards" if i == 0 else f"rewards{i}"
            for suffix, x in (("step", frame), ("iter", epoch_num), ("time", total_time)):
                self.writer.add_scalar(f"{tag}/{suffix}", mean_rewards[i], x)
                self.writer.add_scalar(f"shaped_{tag}/{suffix}", shaped[i], x)
        for suffix, x in (("step", frame), ("iter", epoch_num), ("time", total_time)):
            self.writer.add_scalar(f"episode_lengths/{suffix}", lengths, x)

    def _run_wide_info(self) -> float | None:
        """``train.info_key``'s epoch value averaged over the GMIs that have one (each steps its own environments)."""
        meter = info_meter(self)
        if meter is None:
            return None
        mine = meter.epoch_value(int(self.epoch_num))
        return mean_of_known(mine, gloo_sum()) if self.gmi_sync else mine

    def _epoch_report(self, result: tuple, info: float | None = None) -> EpochReport:
        rewards = self.game_rewards
        return EpochReport(epoch=int(self.epoch_num), frame=int(self.frame), curr_frames=int(self.curr_frames),
                           world_size=int(self.world_size), timings=dict(self.last_epoch),
                           reward=float(rewards.get_mean().reshape(-1)[0]) if rewards.current_size else None,
                           gmi_reward=local_mean(rewards),
                           totals=dict(self.timings), learning=self._learning(result), info=info)

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
        if self.gmi_sync:
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

