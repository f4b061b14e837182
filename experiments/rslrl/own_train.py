"""mjlab's own training path, once: ``mjlab.scripts.train.run_train`` on the task's registered env and rsl_rl configs.

    python experiments/rslrl/own_train.py task=Mjlab-Cartpole-Balance num_envs=16 iterations=3 log_dir=/tmp/own

The peer ``python -m gmiexp train=rslrl task=<id>`` is compared with (``tests/rl/rslrl/test_parity_mjlab.py``: the
same weights; ``bench.py``: time to reward). TensorBoard instead of W&B; the CPU when ``CUDA_VISIBLE_DEVICES`` is
empty. Settings: own_train.yaml here.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig


def tb_rewards(log_dir: Path) -> list[tuple[float, int, float]]:
    """(wall time, iteration, mean reward) of rsl_rl's ``Train/mean_reward`` in a TensorBoard log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    if "Train/mean_reward" not in acc.Tags().get("scalars", []):
        return []
    return [(e.wall_time, e.step, e.value) for e in acc.Scalars("Train/mean_reward")]


@hydra.main(config_path=".", config_name="own_train", version_base=None)
def main(args: DictConfig) -> None:
    import torch

    torch.set_num_threads(int(args.threads))
    from mjlab.scripts.train import TrainConfig, run_train

    cfg = TrainConfig.from_task(args.task)
    cfg.env.scene.num_envs = int(args.num_envs)
    cfg.agent.max_iterations = int(args.iterations)
    cfg.agent.seed = int(args.seed)
    cfg.agent.logger = "tensorboard"
    cfg.agent.upload_model = False
    run_train(args.task, cfg, Path(args.log_dir))


if __name__ == "__main__":
    main()
