"""An Isaac Lab user's environment: rsl-rl-lib 5.5.1 (Isaac Lab 3.0's) and no mjlab. ``params/agent.yaml`` as
Isaac Lab writes it and the user's own rsl_rl VecEnv through ``task.vec_env``, 2 GMIs.

``make test-rslrl-isaaclab`` runs it (``.ci/run``). Where mjlab is importable (the venv, mjlab's rsl-rl-lib 5.4.2)
it skips: ``make test`` trains this path there in test_training.py (2 GMIs on lazy with mjlab's adaptive
recipe, the Isaac Lab agent.yaml, the vec_env seam), and the default suite does not grow by a second copy.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from gmitest import run_cli

AGENT_YAML = Path(__file__).parent / "fixtures" / "isaaclab3_anymal_d_rough.yaml"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mjlab") is not None,
                                reason="mjlab is importable: test_training.py trains this path here; this test is "
                                       "for an Isaac Lab user's environment (make test-rslrl-isaaclab)")


def history(run_dir: Path, gmi: int) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "gmis" / str(gmi) / "history.jsonl").read_text().splitlines() if x]


def test_two_gmis_on_the_lazy_device_train_an_isaac_lab_agent_yaml_with_its_adaptive_schedule(tmp_path: Path) -> None:
    """The file's ``schedule: adaptive`` on the lazy stand-in device: rsl_rl broadcasts the learning rate it steps
    (and rsl_rl 5.5 wraps the update in autocast on the models' device type, which has no lazy type). A tiny
    ``desired_kl`` makes the schedule lower the rate at every minibatch whose KL is not 0 (the first of an update
    is 0: the policy sampled the rollout), so the rows show it stepped."""
    assert "device: cuda:0" in AGENT_YAML.read_text() and "schedule: adaptive" in AGENT_YAML.read_text()
    r = run_cli("train=rslrl", "gmis_per_gpu=2", "launch.progress=false", "train.check_sync=true",
                "task=Cartpole", "task.vec_env=rslrl_vecenv:make", f"train.file={AGENT_YAML}", "train.device=lazy",
                "batch.total_envs=8", "+train.rslrl.num_steps_per_env=8", "+train.rslrl.actor.hidden_dims=[16]",
                "+train.rslrl.critic.hidden_dims=[16]", "+train.rslrl.algorithm.num_learning_epochs=1",
                "+train.rslrl.algorithm.num_mini_batches=2",
                "+train.rslrl.algorithm.desired_kl=1e-6", "+train.rslrl.actor.obs_normalization=true",
                "max_iterations=2", f"hydra.run.dir={tmp_path}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = history(tmp_path, 0), history(tmp_path, 1)
    assert [x["iteration"] for x in a] == [1, 2] and [x["frames"] for x in a] == [64, 128]
    assert [x["sync/digest"] for x in a] == [x["sync/digest"] for x in b]  # one model, normalisers included
    assert len({x["sync/digest"] for x in a}) == 2  # it trained
    lrs = [x["train/lr"] for x in a]
    assert lrs == [x["train/lr"] for x in b], lrs  # one schedule
    assert lrs == pytest.approx([1e-3 / 1.5, 1e-3 / 1.5 ** 2], rel=1e-6), lrs  # it stepped once per update


def test_rsl_rl_5_5_s_mixed_precision_reaches_its_ppo_in_two_gmis(tmp_path: Path) -> None:
    """``algorithm.use_mixed_precision`` (rsl-rl-lib 5.5's bfloat16 autocast of the update; before, refused as an
    unknown key) on the host's device: the two GMIs stay one model, and the update is not fp32's."""
    base = ["train=rslrl", "gmis_per_gpu=2", "launch.progress=false", "train.check_sync=true", "task=Cartpole",
            "task.vec_env=rslrl_vecenv:make", f"train.file={AGENT_YAML}", "train.device=cpu", "batch.total_envs=8",
            "+train.rslrl.num_steps_per_env=8", "+train.rslrl.actor.hidden_dims=[16]",
            "+train.rslrl.critic.hidden_dims=[16]", "+train.rslrl.algorithm.num_learning_epochs=1",
            "+train.rslrl.algorithm.num_mini_batches=2", "max_iterations=2"]
    digests = {}
    for mixed in (False, True):
        run_dir = tmp_path / str(mixed)
        r = run_cli(*base, f"+train.rslrl.algorithm.use_mixed_precision={str(mixed).lower()}",
                    f"hydra.run.dir={run_dir}", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        a, b = history(run_dir, 0), history(run_dir, 1)
        assert [x["sync/digest"] for x in a] == [x["sync/digest"] for x in b]  # one model
        digests[mixed] = [x["sync/digest"] for x in a]
    assert digests[True] != digests[False]  # bfloat16 forward passes: another update than fp32's
