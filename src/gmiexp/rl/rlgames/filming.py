"""``capture_video=True``: GMI 0 films an evaluation episode of the current policy every N epochs.

The episode is played by the task's filmer (:func:`gmiexp.envs.video.open_filmer`: gymnasium's MuJoCo twin, or an
mjlab task's own environment; the same as ``mode=eval eval.video=true``), with the policy's mean action, into
``<run_dir>/videos/epoch_<N>.mp4``.
Only the rl-games agent (layout ``tcg_ex``) films; :func:`check` refuses anything else before launch, with
the reason (exit 2).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch

from gmiexp.envs import task_dims
from gmiexp.envs.video import open_filmer
from gmiexp.errors import ConfigError

FILMING_LAYOUTS = ("tcg_ex",)


def check(plan: Any) -> None:
    """Before launch: the layout films, and the task's simulator renders here (probed once)."""
    if not plan.video:
        return
    if plan.layout not in FILMING_LAYOUTS or plan.role != "ppo":
        raise ConfigError(f"invalid capture_video=True with layout={plan.layout} role={plan.role}: only rl-games' "
                          f"PPO agent films during training; valid: layout={', '.join(FILMING_LAYOUTS)} role=ppo "
                          "(or film a checkpoint: mode=eval eval.video=true)")
    filmer = _filmer(plan)
    filmer.close()


def _filmer(plan: Any) -> Any:
    v, task = plan.video, plan.task
    msg = None
    try:
        return open_filmer(task, (task_dims(task)[0],), v["width"], v["height"],
                           min(v["steps"], int(task.max_episode_length)))
    except ConfigError as e:
        msg = str(e).replace("eval.video=true", "capture_video=True").replace("drop eval.video", "drop capture_video")
    raise ConfigError(msg)


class EpochFilmer:
    """Films every ``plan.video['every']`` epochs with the agent's current model (deterministic actions)."""

    def __init__(self, plan: Any) -> None:
        self.plan, self.every = plan, int(plan.video["every"])
        self.out = Path(plan.run_dir) / "videos"
        self.filmer: Any = None

    def after_epoch(self, epoch: int, agent: Any) -> Path | None:
        if epoch % self.every:
            return None
        if self.filmer is None:
            self.filmer = _filmer(self.plan)
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"epoch_{epoch}.mp4"
        # here, not at the top: the launcher's check() above refuses a video without importing rl-games (~4 s)
        from rl_games.common.a2c_common import rescale_actions

        was_training = agent.model.training
        agent.model.eval()

        def act(obs: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                res = agent.model({"is_train": False, "prev_actions": None, "obs": obs.to(agent.ppo_device),
                                   "rnn_states": None})
                mu = res["mus"]
                if agent.clip_actions:  # as rl-games' player does
                    return rescale_actions(agent.actions_low, agent.actions_high, torch.clamp(mu, -1.0, 1.0))
                return mu

        try:
            self.filmer.film(act, path, seed=self.plan.seed + epoch)
        finally:
            if was_training:
                agent.model.train()
        return path

    def close(self) -> None:
        if self.filmer is not None:
            with contextlib.suppress(Exception):
                self.filmer.close()
