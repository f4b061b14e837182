"""1 GMI of train=rslrl and mjlab's own training path on Mjlab-Cartpole-Balance: bit-identical weights, same rewards.

mjlab's own: ``experiments/rslrl/own_train.py`` runs ``mjlab.scripts.train.run_train`` (the registered env
and rsl_rl configs, ``ManagerBasedRlEnv`` + ``RslRlVecEnvWrapper`` + the task's runner class, ``learn()``) on the
CPU. Both: mjlab's recipe, seed 42, 16 environments, 3 iterations, the same torch thread count. Slow: two runs.
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

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "experiments" / "rslrl"))
from own_train import tb_rewards  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_gmi_matches_mjlab_s_own_training_bit_for_bit(tmp_path: Path) -> None:
    ours = tmp_path / "gmiexp"
    r = run_cli("train=rslrl", "task=Mjlab-Cartpole-Balance", "gmis_per_gpu=1", "num_envs=16", "max_iterations=3",
                "seed=42", "launch.progress=false", f"hydra.run.dir={ours}", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    threads = yaml.safe_load((ours / "plan.yaml").read_text())["gmis"][0]["torch_threads"]
    own = tmp_path / "own"
    v = subprocess.run([sys.executable, str(ROOT / "experiments" / "rslrl" / "own_train.py"),
                        "task=Mjlab-Cartpole-Balance", "num_envs=16", "iterations=3", "seed=42",
                        f"threads={threads}", f"log_dir={own}"],
                       capture_output=True, text=True, timeout=600, env={**cli_env(), "CUDA_VISIBLE_DEVICES": ""})
    assert v.returncode == 0, v.stderr[-3000:]
    a = torch.load(own / "model_2.pt", weights_only=False)
    b = torch.load(ours / "rsl_rl" / "model_2.pt", weights_only=False)
    for part in ("actor_state_dict", "critic_state_dict", "optimizer_state_dict"):
        assert a[part].keys() == b[part].keys()
    for part in ("actor_state_dict", "critic_state_dict"):
        assert all(torch.equal(a[part][k], b[part][k]) for k in a[part]), part
    assert a["iter"] == b["iter"] == 2 and a["infos"] == b["infos"]
    mine = [(it, rew) for _, it, rew in tb_rewards(ours / "rsl_rl")]
    assert mine and mine == [(it, rew) for _, it, rew in tb_rewards(own)]
    rows = [json.loads(x) for x in (ours / "gmis" / "0" / "history.jsonl").read_text().splitlines()]
    assert [(x["iteration"] - 1, x["reward/mean"]) for x in rows if x["reward/mean"] is not None] == \
        [(it, pytest.approx(rew, rel=1e-6)) for it, rew in mine]
