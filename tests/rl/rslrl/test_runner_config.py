"""rsl_rl runner configs as users keep them: the pre-4.0 format imported, unsupported keys refused all at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from gmitest import compose_config
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from gmiexp.app import run
from gmiexp.errors import ConfigError
from gmiexp.rl.rslrl.config import (
    LATER_ALGORITHM_KEYS,
    algorithm_key_problems,
    check,
    device_note,
    fit_batch,
    installed_release,
    merge,
    runner_config,
    trained_on,
    upgrade_legacy,
)

#: rsl_rl 3.x / Isaac Lab 2.x style: one ActorCritic ``policy`` block and ``empirical_normalization``
LEGACY = {
    "num_steps_per_env": 24, "max_iterations": 1500, "save_interval": 50, "experiment_name": "anymal",
    "empirical_normalization": True,
    "policy": {"class_name": "ActorCritic", "init_noise_std": 0.8, "actor_hidden_dims": [128, 64],
               "critic_hidden_dims": [256, 128], "activation": "elu"},
    "algorithm": {"class_name": "PPO", "value_loss_coef": 1.0, "use_clipped_value_loss": True, "clip_param": 0.2,
                  "entropy_coef": 0.005, "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
                  "schedule": "adaptive", "gamma": 0.99, "lam": 0.95, "desired_kl": 0.01, "max_grad_norm": 1.0},
}


def test_pre_4_0_policy_block_becomes_current_actor_and_critic_models(tmp_path: Path) -> None:
    f = tmp_path / "agent.yaml"
    f.write_text(yaml.safe_dump(LEGACY))
    cfg = runner_config({}, str(f), {})
    assert "policy" not in cfg and "empirical_normalization" not in cfg
    assert cfg["actor"] == {"class_name": "MLPModel", "hidden_dims": [128, 64], "activation": "elu",
                            "obs_normalization": True,
                            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.8,
                                                 "std_type": "scalar"}}
    assert cfg["critic"] == {"class_name": "MLPModel", "hidden_dims": [256, 128], "activation": "elu",
                             "obs_normalization": True}
    assert cfg["algorithm"]["desired_kl"] == 0.01 and cfg["num_steps_per_env"] == 24


def test_the_imported_legacy_config_builds_rsl_rl_s_own_models() -> None:
    """What the import writes is what rsl_rl's current models take (their constructor keywords)."""
    cfg = upgrade_legacy(LEGACY)
    obs = TensorDict({"policy": torch.zeros(2, 5)}, batch_size=[2])
    groups = {"actor": ["policy"], "critic": ["policy"]}
    actor = MLPModel(obs, groups, "actor", 3, **{k: v for k, v in cfg["actor"].items() if k != "class_name"})
    assert float(actor.distribution.std_param.detach().mean()) == pytest.approx(0.8)
    assert actor.obs_normalizer.__class__.__name__ == "EmpiricalNormalization"


def test_overrides_merge_key_by_key_over_the_recipe() -> None:
    recipe = {"algorithm": {"learning_rate": 1e-3, "gamma": 0.99}, "num_steps_per_env": 32}
    cfg = runner_config(recipe, "", {"algorithm": {"gamma": 0.9}})
    assert cfg["algorithm"] == {"class_name": "PPO", "learning_rate": 1e-3, "gamma": 0.9}
    assert recipe["algorithm"]["gamma"] == 0.99  # the caller's dict is left alone
    assert merge({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}


def test_unsupported_keys_are_refused_all_at_once_with_their_reasons() -> None:
    distill = {"class_name": "DistillationRunner", "num_steps_per_env": 24, "multi_gpu": {"world_size": 2},
               "policy": {"class_name": "StudentTeacher", "student_hidden_dims": [64]},
               "algorithm": {"class_name": "Distillation", "gradient_length": 15}, "typo_key": 1}
    with pytest.raises(ConfigError) as e:
        check(distill, "train.file=distill.yaml")
    msg = str(e.value)
    for reason in ("class_name: 'DistillationRunner'", "multi_gpu: gmiexp owns the process group",
                   "policy.class_name: 'StudentTeacher'", "policy.student_hidden_dims",
                   "algorithm.class_name: 'Distillation'", "algorithm.gradient_length", "typo_key"):
        assert reason in msg, reason
    assert "7 key(s)" in msg
    # one reason a key, each naming the file (ConfigError.reasons, as every refusal of several reasons carries)
    assert len(e.value.reasons) == 7 and all(r.startswith("invalid rsl_rl config train.file=distill.yaml: ")
                                             for r in e.value.reasons), e.value.reasons


def test_ppo_keys_of_rsl_rl_5_5_are_taken_under_it_and_refused_naming_the_release_under_5_4() -> None:
    """Before, ``use_mixed_precision`` and ``grad_reduce_bucket_mb`` were unknown keys under every release: an Isaac
    Lab 3.0 user (rsl-rl-lib 5.5.1, whose PPO takes them) could not set them."""
    later = {"use_mixed_precision": True, "grad_reduce_bucket_mb": 10}
    assert set(later) == set(LATER_ALGORITHM_KEYS)
    assert algorithm_key_problems(later, (5, 5, 1)) == []
    old = algorithm_key_problems(later, (5, 4, 2))
    assert old == [f"algorithm.{k}: rsl-rl-lib 5.5 added it, the installed one is 5.4.2 (valid: rsl-rl-lib>=5.5 as "
                   "Isaac Lab 3.0 installs it, or leave the key out)" for k in later]
    assert "use_mixed_precision" in algorithm_key_problems({"typo": 1}, (5, 5, 1))[0]  # known there, listed
    assert "use_mixed_precision" not in algorithm_key_problems({"typo": 1}, (5, 4, 2))[0]
    # the installed release decides: the venv's 5.4.2 (make test), Isaac Lab's 5.5.1 (make test-rslrl-isaaclab)
    cfg = {"algorithm": {"class_name": "PPO", "use_mixed_precision": True}}
    if installed_release() >= (5, 5):
        check(cfg, "train.rslrl")
    else:
        with pytest.raises(ConfigError, match="algorithm.use_mixed_precision: rsl-rl-lib 5.5 added it"):
            check(cfg, "train.rslrl")


def test_a_partition_that_cannot_split_the_minibatches_is_refused_naming_valid_counts() -> None:
    cfg = runner_config({}, "", {"num_steps_per_env": 3, "algorithm": {"num_mini_batches": 4}})
    assert fit_batch(cfg, 4, 2) == ""  # 4 envs x 3 steps = 12 samples per GMI: 4 minibatches of 3
    warning = fit_batch(cfg, 1, 2)  # 6 samples in all: even one process drops 2, rsl_rl's own behaviour
    assert "drops the remainder" in warning and warning.endswith("divide each GMI's share: 1, 3")
    with pytest.raises(ConfigError, match=r"4 GMIs of 2 environments .* valid GMI counts for 8 environments: 1, 2$"):
        fit_batch(cfg, 2, 4)  # 6 samples per GMI cannot make 4 equal minibatches


def test_cli_refuses_a_distillation_file_and_other_layouts_before_launch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The jobs the CLI runs, in this process (two launches cost ~30 s of CPU, each importing mjlab's tasks); the
    CLI's exit 2 on gmiexp's refusals is tests/test_cli_errors.py::test_cli_value_error_exits_2's."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (an mjlab task id)")
    f = tmp_path / "distill.yaml"
    f.write_text(yaml.safe_dump({"class_name": "DistillationRunner", "algorithm": {"class_name": "Distillation"}}))
    capsys.readouterr()
    code = run(compose_config("mode=plan", "train=rslrl", "task=Mjlab-Cartpole-Balance", f"train.file={f}"),
               tmp_path / "a")
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "DistillationRunner" in err and "algorithm.class_name: 'Distillation'" in err
    code = run(compose_config("mode=plan", "train=rslrl", "task=Mjlab-Cartpole-Balance", "layout=tdg_ex"),
               tmp_path / "b")
    err = capsys.readouterr().err
    assert code == 2 and "valid: tcg_ex" in err, err[-2000:]


FIXTURES = Path(__file__).parent / "fixtures"
#: Isaac Lab's params/agent.yaml as its train.py writes them (tests/rl/rslrl/fixtures: how each was written)
ISAACLAB = sorted(p.name for p in FIXTURES.glob("isaaclab*.yaml"))


def test_every_isaac_lab_agent_yaml_is_read_device_included_and_refused_only_for_what_cannot_run_here() -> None:
    """device: cuda:0 (where it trained) and the MISSING fields ({}) are accepted; the one refusal is the symmetry
    function of Isaac Lab's task package, which this environment cannot import, and it is the only reason given."""
    assert len(ISAACLAB) == 5
    refused = {}
    for name in ISAACLAB:
        try:
            runner_config({}, str(FIXTURES / name), {})
        except ConfigError as e:
            refused[name] = str(e)
    assert list(refused) == ["isaaclab3_anymal_d_flat_symmetry.yaml"]
    msg = refused["isaaclab3_anymal_d_flat_symmetry.yaml"]
    assert "1 key(s)" in msg and "algorithm.symmetry_cfg.data_augmentation_func" in msg
    assert "'isaaclab_tasks.manager_based.locomotion.velocity.mdp.symmetry.anymal' is not importable" in msg


def test_isaac_lab_3_0_format_becomes_the_runner_config_rsl_rl_5_takes(tmp_path: Path) -> None:
    cfg = runner_config({}, str(FIXTURES / "isaaclab3_anymal_d_rough.yaml"), {})
    for gone in ("device", "policy", "empirical_normalization"):
        assert gone not in cfg, gone
    assert cfg["actor"] == {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu",
                            "obs_normalization": False,
                            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                                 "std_type": "scalar"}}
    assert cfg["critic"]["distribution_cfg"] is None and cfg["obs_groups"] == {"actor": ["policy"],
                                                                              "critic": ["policy"]}
    rnn = runner_config({}, str(FIXTURES / "isaaclab3_anymal_d_flat_recurrent.yaml"), {})
    assert rnn["actor"]["class_name"] == "RNNModel" and rnn["actor"]["rnn_type"] == "lstm"
    # the symmetry file runs once its function is one this environment has (the tests' own mirror)
    text = (FIXTURES / "isaaclab3_anymal_d_flat_symmetry.yaml").read_text().replace(
        "isaaclab_tasks.manager_based.locomotion.velocity.mdp.symmetry.anymal:compute_symmetric_states",
        "rslrl_parity:mirror")
    (tmp_path / "agent.yaml").write_text(text)
    sym = runner_config({}, str(tmp_path / "agent.yaml"), {})
    assert sym["algorithm"]["symmetry_cfg"]["data_augmentation_func"] == "rslrl_parity:mirror"


def test_isaac_lab_2_x_and_3_0_files_of_one_task_give_the_same_models() -> None:
    """Franka lift as Isaac Lab 2.x writes it (policy: ActorCritic) and as 3.0 writes it (actor/critic)."""
    old = runner_config({}, str(FIXTURES / "isaaclab2_franka_lift.yaml"), {})
    new = runner_config({}, str(FIXTURES / "isaaclab3_franka_lift.yaml"), {})
    assert old["actor"] == new["actor"]
    assert {k: v for k, v in old["critic"].items()} == {k: v for k, v in new["critic"].items() if v is not None}
    shared = set(old["algorithm"]) & set(new["algorithm"])
    assert {k: old["algorithm"][k] for k in shared} == {k: new["algorithm"][k] for k in shared}


def test_rsl_rl_4_model_keys_and_the_recurrent_policy_are_upgraded_as_isaac_lab_does() -> None:
    """Isaac Lab with rsl_rl 4.x keeps ``stochastic``/``init_noise_std``; ActorCriticRecurrent becomes RNNModel."""
    cfg = upgrade_legacy({"actor": {"class_name": "MLPModel", "hidden_dims": [8], "activation": "elu",
                                    "stochastic": True, "init_noise_std": 0.5, "noise_std_type": "log",
                                    "state_dependent_std": True},
                          "critic": {"class_name": "MLPModel", "hidden_dims": [8], "activation": "elu",
                                     "stochastic": False}})
    assert cfg["actor"]["distribution_cfg"] == {"class_name": "HeteroscedasticGaussianDistribution",
                                                "init_std": 0.5, "std_type": "log"}
    assert "stochastic" not in cfg["critic"] and "distribution_cfg" not in cfg["critic"]
    rec = upgrade_legacy({"policy": {"class_name": "ActorCriticRecurrent", "init_noise_std": 1.0,
                                     "actor_hidden_dims": [8], "critic_hidden_dims": [8], "activation": "elu",
                                     "rnn_type": "gru", "rnn_hidden_dim": 16, "rnn_num_layers": 1}})
    assert rec["actor"]["class_name"] == rec["critic"]["class_name"] == "RNNModel"
    assert rec["critic"]["rnn_type"] == "gru" and rec["actor"]["rnn_hidden_dim"] == 16


def test_device_is_a_record_in_a_file_and_refused_as_an_override() -> None:
    assert trained_on({}, str(FIXTURES / "isaaclab3_franka_lift.yaml")) == "cuda:0"
    note = device_note("cuda:0", "cpu", 2)
    assert "'cuda:0'" in note and "GMI 0 on 'cpu'" in note and "\n" not in note
    with pytest.raises(ConfigError, match="device: the GMIs' device is train.device"):
        runner_config({}, "", {"device": "cuda:1"})


def test_mjlab_s_own_agent_yaml_with_its_tuples_is_read(tmp_path: Path) -> None:
    """mjlab's train writes ``yaml.dump(asdict(cfg))``: its tuples come out tagged ``!!python/tuple``."""
    pytest.importorskip("mjlab.rl", reason="needs gmiexp[mjlab]")
    from dataclasses import asdict

    from mjlab.rl import RslRlOnPolicyRunnerCfg
    from mjlab.utils.os import dump_yaml

    dump_yaml(tmp_path / "agent.yaml", asdict(RslRlOnPolicyRunnerCfg()))
    assert "!!python/tuple" in (tmp_path / "agent.yaml").read_text()
    cfg = runner_config({}, str(tmp_path / "agent.yaml"), {})
    assert cfg["actor"]["hidden_dims"] == [128, 128, 128] and cfg["obs_groups"]["actor"] == ["actor"]
