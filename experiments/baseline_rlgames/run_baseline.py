"""Vanilla rl-games: one process, stock ``a2c_continuous``/``a2c_discrete`` agent, same task and PPO config.

The peer gmiexp is measured against. It builds the same rl-games params as a
gmiexp GMI would (``gmiexp.rl.rlgames.params.build_params``) for one process holding
all the environments, registers the same simulator adapter, and runs rl-games'
own Runner untouched, on the device a gmiexp GMI of the same plan uses (its
GPU on a GPU host: a baseline left on the CPU would inflate every ratio
against it). Takes gmiexp's overrides, ``hydra.run.dir`` included, and writes summary.json there
(a fresh temporary directory without it); prints the same one-line summary as ``python -m gmiexp``.

    python experiments/baseline_rlgames/run_baseline.py task=Ant num_envs=128 max_iterations=30
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from rl_games.common.algo_observer import AlgoObserver
from rl_games.torch_runner import Runner

from gmiexp.comm.manager import GMIManager
from gmiexp.config.compose import compose_config
from gmiexp.launch.gmi_env import apply_gmi_environment
from gmiexp.launch.summary import one_line
from gmiexp.planner.build import build_plan
from gmiexp.rl.rlgames.params import build_params
from gmiexp.rl.rlgames.ppo_role import register_env
from gmiexp.stats import steady_rate


class RateObserver(AlgoObserver):
    """Per epoch, like gmiexp's history: wall time, global frames, mean episode reward (rl-games' game_rewards)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.t0 = time.perf_counter()
        self.algo = None

    def after_init(self, algo) -> None:
        self.algo = algo
        self.t0 = time.perf_counter()

    def after_print_stats(self, frame: int, epoch_num: int, total_time: float) -> None:
        if self.rows and self.rows[-1]["iteration"] == epoch_num:
            return
        a = self.algo
        reward = float(a.game_rewards.get_mean()[0]) if a.game_rewards.current_size else None
        self.rows.append({"iteration": epoch_num, "wall_s": time.perf_counter() - self.t0, "time": time.time(),
                          "frames": int(a.frame), "reward/mean": reward})


RUN_DIR = "hydra.run.dir="


def main(argv: list[str]) -> dict:
    given = [a.removeprefix(RUN_DIR) for a in argv if a.startswith(RUN_DIR)]
    cfg = compose_config("num_gpus=1", "gmis_per_gpu=1", *(a for a in argv if not a.startswith(RUN_DIR)))
    run_dir = Path(given[-1]) if given else Path(tempfile.mkdtemp(prefix="baseline_rlgames_"))
    run_dir.mkdir(parents=True, exist_ok=True)
    plan, _ = build_plan(cfg, run_dir)
    gmi = plan.gmis[0]
    apply_gmi_environment(gmi)  # CUDA_VISIBLE_DEVICES and thread caps, as the GMI's process gets them
    device = str(GMIManager(plan, gmi.id).torch_device)  # the device that GMI would train on
    register_env(plan.task, gmi.sim_threads, device, {})
    params = build_params(plan, gmi, device=device)
    params["torch_threads"] = "auto"  # rl-games' own default: min(4, cores)
    obs = RateObserver()
    runner = Runner(algo_observer=obs)  # stock agents, stock builders
    runner.load({"params": params})
    t0 = time.perf_counter()
    runner.run({"train": True, "play": False, "checkpoint": None})
    wall = time.perf_counter() - t0
    rate = steady_rate(obs.rows, "frames", cumulative=True)
    rewards = [r["reward/mean"] for r in obs.rows if r["reward/mean"] is not None]
    summary = {
        "status": "ok", "run_dir": str(run_dir), "wall_s": wall,
        "config": {"task": plan.task.name, "layout": "rl_games", "backend": "none", "reduction": "none",
                   "gmis": 1, "num_envs": gmi.num_envs},
        "metrics": {"perf/env_steps_per_s": rate, "reward/mean": rewards[-1] if rewards else None},
        "history": obs.rows,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(one_line(summary).replace("gmiexp ok", "rl_games baseline ok"), flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
