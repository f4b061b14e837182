"""gmiexp with 1 GMI and vanilla rl-games on rl-games' own Atari and dm_control files: identical rewards and weights.

Vanilla: ``experiments/baseline_rlgames/run_file.py`` runs the shipped file with rl-games' runner, envpool vec-env
and agent. gmiexp: the shipped task config (``task=Pong``, ``task=WalkerWalk``) with the file's PPO settings given
as explicit ``train.*`` overrides (not ``train=rlgames``), so the comparison checks the simulator adapters and the
policies, not the importer. Both: the file's seed, 4 envs, 32-step horizon, episodes cut to a few dozen steps
(so episodes end within 3 epochs) and the same torch thread count (CPU float results depend on it). Slow: two
training runs per file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from gmitest import cli_env, run_cli

ROOT = Path(__file__).resolve().parents[1]
SIZE = ["num_envs=4", "max_iterations=3", "gmis_per_gpu=1", "train.horizon_length=32", "train.minibatch_size=64",
        "launch.progress=false"]
PPO = ["train.learning_rate=3e-4", "train.lr_schedule=adaptive", "train.grad_norm=1.0", "train.e_clip=0.2",
       "train.clip_value=false", "train.value_bootstrap=false", "train.gamma=0.99", "train.tau=0.95",
       "train.normalize_input=true", "train.normalize_value=true", "train.normalize_advantage=true"]
FILES = {  # file -> (episode steps, gmiexp overrides holding the file's values)
    "atari/ppo_pong_envpool.yaml": (50, ["task=Pong", "seed=42", "train.mini_epochs=4", "train.kl_threshold=0.01",
                                        "train.entropy_coef=0.01", "train.critic_coef=2", "train.score_to_win=20"]),
    "dm_control/walker_walk.yaml": (40, ["task=WalkerWalk", "seed=5", "train.mini_epochs=5",
                                         "train.kl_threshold=0.008", "train.entropy_coef=0.0", "train.critic_coef=4",
                                         "train.use_smooth_clamp=false", "train.bound_loss_type=regularisation",
                                         "train.bounds_loss_coef=0.001", "train.score_to_win=20000"]),
}


def last_weights(nn_dir: Path) -> dict:
    return torch.load(next(nn_dir.glob("last_*.pth")), map_location="cpu", weights_only=False)["model"]


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("file", list(FILES))
def test_gmiexp_and_vanilla_rl_games_give_identical_rewards_and_weights(file: str, tmp_path: Path) -> None:
    steps, overrides = FILES[file]
    ours = run_cli(*SIZE, *PPO, *overrides, f"task.max_episode_length={steps}",
                   f"hydra.run.dir={tmp_path / 'gmiexp'}", timeout=1200)
    assert ours.returncode == 0, ours.stderr[-2000:]
    threads = yaml.safe_load((tmp_path / "gmiexp" / "plan.yaml").read_text())["gmis"][0]["torch_threads"]
    vanilla = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "baseline_rlgames" / "run_file.py"),
         f"file=rl_games:configs/{file}", "num_actors=4", "max_epochs=3", "minibatch_size=64", "horizon_length=32",
         f"+env_config={{max_episode_steps:{steps}}}", f"torch_threads={threads}",
         f"hydra.run.dir={tmp_path / 'vanilla'}"],
        capture_output=True, text=True, timeout=1200, env=cli_env())
    assert vanilla.returncode == 0, vanilla.stderr[-2000:]
    a = json.loads((tmp_path / "vanilla" / "summary.json").read_text())
    b = json.loads((tmp_path / "gmiexp" / "summary.json").read_text())
    rewards_a, rewards_b = ([r["reward/mean"] for r in s["history"]] for s in (a, b))
    assert len(rewards_a) == 3 and any(r is not None for r in rewards_a)  # episodes ended: rewards compared
    assert rewards_a == rewards_b
    wa, wb = last_weights(Path(a["checkpoint_dir"])), last_weights(tmp_path / "gmiexp" / "rl_games" / "run" / "nn")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
