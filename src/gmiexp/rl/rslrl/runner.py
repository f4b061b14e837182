"""rsl_rl's OnPolicyRunner (or the task's subclass, mjlab's) in a GMI: gmiexp's group, history rows, graceful stop.

:func:`gmi_runner` subclasses the runner class a task names, so mjlab's checkpoint format (its environment
state, its legacy migration) stays mjlab's. The subclass never starts a process group (rsl_rl would start NCCL,
which refuses two ranks on one GPU); its PPO is :class:`gmiexp.rl.rslrl.ppo.GMIPPO`, and its logger writes each
iteration's row to the GMI's ``history.jsonl`` and ends training at an iteration boundary once a stop is asked.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

from gmiexp.rl.infos import InfoMeter, mean_of_known
from gmiexp.rl.rslrl import runstate
from gmiexp.rl.rslrl.exploit import RslRlMember
from gmiexp.rl.rslrl.ppo import GMIPPO
from gmiexp.rl.rslrl.sync import GroupSync
from gmiexp.rl.state import model_digest
from gmiexp.signals import stop_requested
from gmiexp.status import StatusWriter

#: the episode figures a GMI keeps: return (with RND: extrinsic + intrinsic, as rsl_rl counts it), length, RND's parts
EPISODE_PARTS = ("returns", "lengths", "extrinsic", "intrinsic")
#: their windows' means in a history row, each rsl_rl's figure: Train/mean_reward, Train/mean_episode_length,
#: Rnd/mean_extrinsic_reward, Rnd/mean_intrinsic_reward
ROW_KEYS = {"returns": "reward/mean", "lengths": "episode/length", "extrinsic": "reward/extrinsic_mean",
            "intrinsic": "reward/intrinsic_mean"}


class StopTraining(Exception):
    """Raised at an iteration boundary when the run is asked to stop (Ctrl-C, SIGTERM, a re-shape)."""


class GMILogger(Logger):
    """rsl_rl's logger (TensorBoard on group rank 0) plus gmiexp's per-iteration rows and heartbeats on every GMI.

    Every GMI keeps its own episode window the way rsl_rl's logger keeps group rank 0's (the last 100 episodes;
    with RND an episode's return is its extrinsic plus intrinsic reward, as rsl_rl's ``Train/mean_reward`` counts
    it), so a GMI's ``gmi/reward/mean`` and ``episode/length`` are rsl_rl's ``Train/mean_reward`` and
    ``Train/mean_episode_length`` of that GMI; RND's two parts are ``reward/extrinsic_mean`` and
    ``reward/intrinsic_mean`` (rsl_rl's ``Rnd/mean_extrinsic_reward`` and ``Rnd/mean_intrinsic_reward``).
    """

    def __init__(self, *args: Any, status: StatusWriter, group: GroupSync | None,
                 digest: Callable[[], str] | None = None, boundary: Callable[[int, int, bool], None] | None = None,
                 info_key: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.status, self.group, self.digest = status, group, digest
        #: ``train.info_key`` read from every step's extras (mjlab's and Isaac Lab's episode logs are ``log``)
        self.info = InfoMeter(info_key, status.gmi_id) if info_key else None
        #: called at every iteration's end with (it, total_it, stop), before a checkpoint is written
        self.boundary = boundary
        self.rnd = bool(self.cfg["algorithm"].get("rnd_cfg"))
        # running sums and the last 100 episodes, as rsl_rl's (rewards+intrinsic, extrinsic, intrinsic, lengths)
        self.sums = {k: torch.zeros(self.num_envs, dtype=torch.float, device=self.device) for k in EPISODE_PARTS}
        self.windows: dict[str, deque[float]] = {k: deque(maxlen=100) for k in EPISODE_PARTS}
        self.new: dict[str, list[float]] = {k: [] for k in EPISODE_PARTS}  # this iteration's, for the run's window
        self.t_start = time.perf_counter()
        self.frames0: int | None = None
        self.totals = {"collect_s": 0.0, "learn_s": 0.0}

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict,
                         intrinsic_rewards: torch.Tensor | None = None) -> None:
        super().process_env_step(rewards, dones, extras, intrinsic_rewards)
        if self.info is not None:
            self.info.step(extras)
        s = self.sums
        if intrinsic_rewards is not None:  # rsl_rl's arithmetic, so the windows are its own to the bit
            s["extrinsic"] += rewards
            s["intrinsic"] += intrinsic_rewards
            s["returns"] += rewards + intrinsic_rewards
        else:
            s["returns"] += rewards
        s["lengths"] += 1
        ended = (dones.reshape(-1) > 0).nonzero(as_tuple=False).reshape(-1)
        if ended.numel():
            for k in self.parts():
                values = s[k][ended].cpu().tolist()
                self.windows[k].extend(values)
                self.new[k].extend(values)
                s[k][ended] = 0
        self.status.beat()

    def parts(self) -> tuple[str, ...]:
        """The episode figures this run keeps: RND's two parts only with RND."""
        return EPISODE_PARTS if self.rnd else ("returns", "lengths")

    def means(self) -> dict[str, float | None]:
        """The windows' means under gmiexp's row keys (None before an episode ended)."""
        return {ROW_KEYS[k]: statistics.mean(self.windows[k]) if self.windows[k] else None for k in self.parts()}

    @property
    def finished(self) -> deque[float]:
        """The last 100 episodes' returns (rsl_rl's ``rewbuffer`` of this GMI)."""
        return self.windows["returns"]

    def log(self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float,
            loss_dict: dict, learning_rate: float, action_std: torch.Tensor, rnd_weight: float | None,
            **kwargs: Any) -> None:
        super().log(it=it, start_it=start_it, total_it=total_it, collect_time=collect_time, learn_time=learn_time,
                    loss_dict=loss_dict, learning_rate=learning_rate, action_std=action_std, rnd_weight=rnd_weight,
                    **kwargs)
        world = self.group.world if self.group else 1
        local = int(self.cfg["num_steps_per_env"]) * self.num_envs
        if self.frames0 is None:
            self.frames0 = start_it * local * world  # non-zero after resuming from a checkpoint
        self.totals["collect_s"] += collect_time
        self.totals["learn_s"] += learn_time
        means = self.means()
        reward = means["reward/mean"]
        info = {}
        if self.info is not None:
            mine = self.info.epoch_value(it + 1)
            info[f"info/{self.info.key}"] = mean_of_known(mine, self.group.sum_) if self.group is not None else mine
        row = {
            "iteration": it + 1,
            "time": time.time(),
            "wall_s": time.perf_counter() - self.t_start,
            "frames": (it + 1) * local * world,  # every GMI steps its share: the group's frames, counted once
            "frames0": self.frames0,
            "local_frames": local,
            # this GMI's windows; the run row's are every GMI's (gmiexp.stats.last_episodes)
            **means,
            "gmi/reward/mean": reward,
            **{f"episodes/{k}": self.new[k] for k in self.parts()},
            "perf/env_steps_per_s": local / max(collect_time + learn_time, 1e-9),
            "time/collect_s": self.totals["collect_s"],
            "time/train_s": self.totals["learn_s"],
            "train/lr": float(learning_rate),
            "train/action_std": float(action_std.mean().item()),
            **{f"loss/{k}": float(v) for k, v in loss_dict.items()},
            **({"sync/digest": self.digest()} if self.digest else {}),
            **info,
        }
        self.status.beat(force=True, iteration=row["iteration"], frames=row["frames"],
                         steps_per_s=row["perf/env_steps_per_s"] * world, reward=reward)
        self.status.history(row)
        self.new = {k: [] for k in EPISODE_PARTS}
        stop = stop_requested()
        if self.group is not None:  # every GMI ends the same iteration: group rank 0's word
            stop = self.group.mgr.broadcast_float(float(stop), self.group.mgr.plan.trainer_group[0]) > 0
        stop = stop and it + 1 < total_it
        if self.boundary is not None:
            self.boundary(it, total_it, stop)
        if stop:
            raise StopTraining(f"stop requested after iteration {it + 1}")


class GMIRunnerMixin:
    """Put before the task's runner class: gmiexp's group instead of rsl_rl's NCCL, GMIPPO, GMILogger.

    Its checkpoints hold the run (:mod:`gmiexp.rl.rslrl.runstate`): every GMI's record under ``infos``, gathered
    over the group at the end of each iteration whose checkpoint group rank 0 writes.
    """

    def __init__(self, env: Any, train_cfg: dict, log_dir: str | None = None, device: str = "cpu", *,
                 status: StatusWriter, group: GroupSync | None = None, check_sync: bool = False, segment: int = 0,
                 run_dir: str | Path | None = None, save_every: int = 0, info_key: str = "",
                 **kwargs: Any) -> None:
        self.group, self.status = group, status
        #: ``train.save_frequency``: a checkpoint after every ``save_every``-th iteration too (counted from 1, as
        #: rl-games' epochs: a population member's interval ends), besides rsl_rl's ``save_interval`` (from 0)
        self.save_every = int(save_every)
        self.segment = int(segment)  # of the run (gmiexp.planner.seeds), written into its checkpoints
        self._records: list[Any] | None = None  # every GMI's record of the iteration being saved (several GMIs)
        algorithm = train_cfg.setdefault("algorithm", {})
        algorithm["class_name"], algorithm["group"] = GMIPPO, group  # rsl_rl's class_name hook: PPO, subclassed
        algorithm.setdefault("rnd_cfg", None)
        super().__init__(env, train_cfg, log_dir, device, **kwargs)  # type: ignore[call-arg]
        old: Logger = self.logger  # type: ignore[has-type]
        self.logger = GMILogger(log_dir=old.log_dir, cfg=self.cfg, env_cfg=old.env_cfg, num_envs=old.num_envs,
                                is_distributed=self.is_distributed, gpu_world_size=self.gpu_world_size,
                                gpu_global_rank=self.gpu_global_rank, device=self.device, status=status, group=group,
                                digest=(lambda: model_digest(*self.alg.models())) if check_sync else None,
                                boundary=self._at_boundary, info_key=info_key)
        #: a population member's side of the in-place exploit (gmiexp.rl.exploit), None outside a population
        self.member = RslRlMember.of(self, run_dir)

    def _saves(self, it: int, total_it: int, stop: bool) -> bool:
        """Whether group rank 0 writes a checkpoint after iteration ``it`` (rsl_rl's interval, the last, a stop)."""
        return (it % int(self.cfg["save_interval"]) == 0 or it + 1 == total_it or stop  # type: ignore[attr-defined]
                or self._saves_extra(it))

    def _saves_extra(self, it: int) -> bool:
        """``train.save_frequency``: after iteration ``it`` (0-based) the runner saves itself, as rsl_rl would not."""
        return self.save_every > 0 and (it + 1) % self.save_every == 0

    def _at_boundary(self, it: int, total_it: int, stop: bool) -> None:
        """A member's exploit at its interval's end; with several GMIs, every GMI's record where rank 0 saves.

        The exploit comes first: a checkpoint written after it holds what the member trains on from there.
        """
        if self.member is not None:
            world = self.group.world if self.group else 1
            frames = (it + 1) * int(self.cfg["num_steps_per_env"]) * int(self.env.num_envs) * world  # type: ignore[attr-defined]
            self.member.interval_end(it + 1, frames, stop or it + 1 >= total_it)
        self._records = None
        if self.group is not None and self._saves(it, total_it, stop):
            self._records = self.group.gather(runstate.gmi_record(self))
        rsl_rl_saves = it % int(self.cfg["save_interval"]) == 0 or it + 1 == total_it or stop  # type: ignore[attr-defined]
        if self._saves_extra(it) and not rsl_rl_saves and self.logger.writer is not None:
            self.save(os.path.join(self.logger.log_dir, f"model_{it}.pt"))  # rsl_rl's name and place

    def run_state(self) -> dict[str, Any]:
        """The run as a checkpoint holds it: the segment and every GMI's record (GMI 0's alone outside a save)."""
        world = self.group.world if self.group else 1
        gmis = self._records if self._records is not None else [runstate.gmi_record(self)]
        return {"segment": self.segment, "world_size": world, "gmis": gmis}

    def save(self, path: str, infos: dict | None = None) -> None:
        """rsl_rl's (or the task runner's) save, with the run under ``infos`` (rsl_rl's own place for more)."""
        super().save(path, infos={**(infos or {}), runstate.RUN_KEY: self.run_state()})  # type: ignore[misc]

    def resume_run(self, infos: dict | None) -> dict[str, Any]:
        """After ``load``: this GMI's part of the run back (:func:`gmiexp.rl.rslrl.runstate.resume`)."""
        rank, world = (self.group.rank, self.group.world) if self.group else (0, 1)
        return runstate.resume(self, (infos or {}).get(runstate.RUN_KEY), rank, world)

    def _configure_multi_gpu(self) -> None:
        """The group is gmiexp's (rsl_rl would read WORLD_SIZE, demand ``cuda:LOCAL_RANK`` and start NCCL)."""
        world = self.group.world if self.group else 1
        self.gpu_world_size, self.is_distributed = world, world > 1
        self.gpu_global_rank = self.group.rank if self.group else 0
        self.gpu_local_rank = 0
        self.cfg["multi_gpu"] = ({"global_rank": self.gpu_global_rank, "local_rank": 0, "world_size": world}
                                 if world > 1 else None)

    def close_writer(self) -> None:
        """Flush and close rsl_rl's TensorBoard writer (rsl_rl only stops its own LogWriter classes)."""
        writer = getattr(self.logger, "writer", None)
        if writer is not None and hasattr(writer, "close"):
            writer.close()


def gmi_runner(base: type[OnPolicyRunner]) -> type[OnPolicyRunner]:
    """The GMI's runner class over ``base`` (rsl_rl's OnPolicyRunner or a task's subclass such as mjlab's)."""
    return type(f"GMI{base.__name__}", (GMIRunnerMixin, base), {})
