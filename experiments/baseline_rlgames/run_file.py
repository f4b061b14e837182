"""Vanilla rl-games on an rl-games YAML file, as rl-games' own runner would run it.

The peer ``python -m gmiexp train=rlgames train.file=<file>`` is compared with: the file is
loaded as is and run by rl-games' stock Runner, its own ``envpool`` vec-env and stock agent.
Only the run's size is changed, and what a CPU host needs: ``num_actors``, ``max_epochs``,
``minibatch_size`` and ``horizon_length`` when given, ``env_config`` entries when given (e.g.
``env_config.max_episode_steps=16``: episodes short enough to end in a small run), ``torch_threads`` and ``seed`` when
given, ``device: cpu`` without CUDA, and ``torch_compile: False`` unless the file sets it (rl-games 1.6.5
compiles by default; gmiexp does not). Prints the same
one-line summary as ``python -m gmiexp`` and writes summary.json with the per-epoch history into
its run directory (``hydra.run.dir``, as gmiexp's). Settings: run_file.yaml here.

    python experiments/baseline_rlgames/run_file.py file=rl_games:configs/mujoco/ant_envpool.yaml num_actors=32 \
        max_epochs=3
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from copy import deepcopy
from pathlib import Path
from typing import Any

import hydra
import torch
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from rl_games.torch_runner import Runner
from run_baseline import RateObserver  # the one per-epoch observer of these baselines (a sibling script)

from gmiexp.config.rlgames_yaml import locate
from gmiexp.launch.summary import one_line
from gmiexp.stats import steady_rate


def file_params(spec: str, num_actors: int | None, max_epochs: int | None, minibatch_size: int | None,
                train_dir: Path, horizon_length: int | None = None, env_config: dict[str, Any] | None = None,
                torch_threads: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """The file's ``params``, with only the run's size, its seed and the host's needs changed."""
    params = deepcopy(yaml.safe_load(locate(spec).read_text())["params"])
    cfg = params["config"]
    if seed is not None:
        params["seed"] = seed
    if horizon_length is not None:
        cfg["horizon_length"] = horizon_length
    if env_config:
        cfg.setdefault("env_config", {}).update(env_config)
    if torch_threads is not None:
        params["torch_threads"] = torch_threads
    if num_actors is not None:
        cfg["num_actors"] = num_actors
    if max_epochs is not None:
        cfg["max_epochs"] = max_epochs
    if minibatch_size is not None:
        cfg["minibatch_size"] = minibatch_size
    if not torch.cuda.is_available():
        cfg["device"] = "cpu"
    cfg.setdefault("torch_compile", False)
    cfg["print_stats"] = False  # rl-games prints on stdout; stdout carries the summary line
    cfg["train_dir"], cfg["full_experiment_name"] = str(train_dir), "run"
    return params


def run(run_dir: Path, spec: str, num_actors: int | None = None, max_epochs: int | None = None,
        minibatch_size: int | None = None, horizon_length: int | None = None,
        env_config: dict[str, Any] | None = None, torch_threads: int | None = None,
        seed: int | None = None) -> dict[str, Any]:
    params = file_params(spec, num_actors, max_epochs, minibatch_size, run_dir / "rl_games", horizon_length,
                         env_config, torch_threads, seed)
    obs = RateObserver()
    runner = Runner(algo_observer=obs)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # rl-games' own prints are logs
        runner.load({"params": params})
        runner.run({"train": True, "play": False, "checkpoint": None})
    wall = time.perf_counter() - t0
    rewards = [r["reward/mean"] for r in obs.rows if r["reward/mean"] is not None]
    summary = {
        "status": "ok", "run_dir": str(run_dir), "wall_s": wall,
        "config": {"task": params["config"]["name"], "layout": "rl_games", "backend": "none", "reduction": "none",
                   "gmis": 1, "num_envs": params["config"]["num_actors"]},
        "metrics": {"perf/env_steps_per_s": steady_rate(obs.rows, "frames", cumulative=True),
                    "reward/mean": rewards[-1] if rewards else None},
        "checkpoint_dir": str(obs.algo.nn_dir),
        "history": obs.rows,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(one_line(summary).replace("gmiexp ok", "rl_games file ok"), flush=True)
    return summary


@hydra.main(config_path=".", config_name="run_file", version_base=None)
def main(cfg: DictConfig) -> None:
    run(Path(HydraConfig.get().runtime.output_dir), cfg.file, cfg.num_actors, cfg.max_epochs, cfg.minibatch_size,
        cfg.horizon_length, OmegaConf.to_container(cfg.env_config), cfg.torch_threads, cfg.seed)


if __name__ == "__main__":
    main()
