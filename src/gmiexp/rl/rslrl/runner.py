"""rsl_rl's OnPolicyRunner (or the task's subclass, mjlab's) in a GMI: gmiexp's group, history rows, graceful stop.

:func:`gmi_runner` subclasses the runner class a task names, so mjlab's checkpoint format (its environment
state, its legacy migration) stays mjlab's. The subclass never starts a process group (rsl_rl would start NCCL,
which refuses two ranks on one GPU); its PPO is :class:`gmiexp.rl.rslrl.ppo.GMIPPO`, and its logger writes each
iteration's row to the GMI's ``history.jsonl`` and ends training at an iteration boundary once a stop is asked.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

from gmiexp.rl.rslrl.ppo import GMIPPO
from gmiexp.rl.rslrl.sync import GroupSync
from gmiexp.signals import stop_requested
from gmiexp.status import StatusWriter


def state_digest(models: list[torch.nn.Module]) -> str:
    """A hash of every parameter and buffer (normalisers included) of ``models``: equal on GMIs in sync."""
    h = hashlib.sha1()
    for m in models:
        for name, t in m.state_dict().items():
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class StopTraining(Exception):
    """Raised at an iteration boundary when the run is asked to stop (Ctrl-C, SIGTERM, a re-shape)."""


class GMILogger(Logger):
    """rsl_rl's logger (TensorBoard on group rank 0) plus gmiexp's per-iteration rows and heartbeats on every GMI."""

    def __init__(self, *args: Any, status: StatusWriter, group: GroupSync | None,
                 digest: Callable[[], str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.status, self.group, self.digest = status, group, digest
        self.returns = torch.zeros(self.num_envs, device=self.device)
        self.lengths = torch.zeros(self.num_envs, device=self.device)
        self.finished: deque[float] = deque(maxlen=100)
        self.finished_len: deque[float] = deque(maxlen=100)
        self.new: tuple[list[float], list[float]] = ([], [])  # this iteration's episodes, for the run-wide window
        self.t_start = time.perf_counter()
        self.frames0: int | None = None
        self.totals = {"collect_s": 0.0, "learn_s": 0.0}

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict,
                         intrinsic_rewards: torch.Tensor | None = None) -> None:
        super().process_env_step(rewards, dones, extras, intrinsic_rewards)
        self.returns += rewards.reshape(-1)
        self.lengths += 1
        ended = (dones.reshape(-1) > 0).nonzero(as_tuple=False).reshape(-1)
        if ended.numel():
            returns, lengths = self.returns[ended].cpu().tolist(), self.lengths[ended].cpu().tolist()
            self.finished.extend(returns)
            self.finished_len.extend(lengths)
            self.new[0].extend(returns)
            self.new[1].extend(lengths)
            self.returns[ended] = 0
            self.lengths[ended] = 0
        self.status.beat()

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
        reward = statistics.mean(self.finished) if self.finished else None
        row = {
            "iteration": it + 1,
            "time": time.time(),
            "wall_s": time.perf_counter() - self.t_start,
            "frames": (it + 1) * local * world,  # every GMI steps its share: the group's frames, counted once
            "frames0": self.frames0,
            "local_frames": local,
            "reward/mean": reward,  # this GMI's window; the run row's is every GMI's (gmiexp.stats.last_episodes)
            "gmi/reward/mean": reward,
            "episodes/returns": self.new[0],
            "episodes/lengths": self.new[1],
            "episode/length": statistics.mean(self.finished_len) if self.finished_len else None,
            "perf/env_steps_per_s": local / max(collect_time + learn_time, 1e-9),
            "time/collect_s": self.totals["collect_s"],
            "time/train_s": self.totals["learn_s"],
            "train/lr": float(learning_rate),
            "train/action_std": float(action_std.mean().item()),
            **{f"loss/{k}": float(v) for k, v in loss_dict.items()},
            **({"sync/digest": self.digest()} if self.digest else {}),
        }
        self.status.beat(force=True, iteration=row["iteration"], frames=row["frames"],
                         steps_per_s=row["perf/env_steps_per_s"] * world, reward=reward)
        self.status.history(row)
        self.new = ([], [])
        stop = stop_requested()
        if self.group is not None:  # every GMI ends the same iteration: group rank 0's word
            stop = self.group.mgr.broadcast_float(float(stop), self.group.mgr.plan.trainer_group[0]) > 0
        if stop and it + 1 < total_it:
            raise StopTraining(f"stop requested after iteration {it + 1}")


class GMIRunnerMixin:
    """Put before the task's runner class: gmiexp's group instead of rsl_rl's NCCL, GMIPPO, GMILogger."""

    def __init__(self, env: Any, train_cfg: dict, log_dir: str | None = None, device: str = "cpu", *,
                 status: StatusWriter, group: GroupSync | None = None, check_sync: bool = False,
                 **kwargs: Any) -> None:
        self.group, self.status = group, status
        algorithm = train_cfg.setdefault("algorithm", {})
        algorithm["class_name"], algorithm["group"] = GMIPPO, group  # rsl_rl's class_name hook: PPO, subclassed
        algorithm.setdefault("rnd_cfg", None)
        super().__init__(env, train_cfg, log_dir, device, **kwargs)  # type: ignore[call-arg]
        old: Logger = self.logger  # type: ignore[has-type]
        self.logger = GMILogger(log_dir=old.log_dir, cfg=self.cfg, env_cfg=old.env_cfg, num_envs=old.num_envs,
                                is_distributed=self.is_distributed, gpu_world_size=self.gpu_world_size,
                                gpu_global_rank=self.gpu_global_rank, device=self.device, status=status, group=group,
                                digest=(lambda: state_digest(self.alg.models())) if check_sync else None)

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
