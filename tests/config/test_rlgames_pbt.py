"""An rl-games YAML's pbt: section is read as it is: rl-games master's, Isaac Lab's and DexPBT's keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gmitest import compose_config

from gmiexp.config.rlgames_pbt import map_section
from gmiexp.config.rlgames_yaml import locate
from gmiexp.errors import ConfigError

# verbatim: rl-games master docs/PBT.md ("with a pbt section in the params")
RL_GAMES_MASTER = """
pbt:
  enabled: True
  policy_idx: 0          # unique per process, 0..num_policies-1
  num_policies: 8
  directory: ./pbt_run
  interval_steps: 100000
  threshold_std: 0.10
  threshold_abs: 0.05
  mutation_rate: 0.25
  change_range: [1.1, 2.0]
  objective: episode.success
  mutation:
    agent.params.config.learning_rate: mutate_float
    agent.params.config.grad_norm: mutate_float
    agent.params.config.gamma: mutate_discount
"""

# verbatim: Isaac Lab docs/source/features/population_based_training.rst ("Example Config")
ISAAC_LAB = """
pbt:
  enabled: True
  policy_idx: 0
  num_policies: 8
  directory: .
  workspace: "pbt_workspace"
  objective: episode.Curriculum/difficulty_level
  interval_steps: 50000000
  threshold_std: 0.1
  threshold_abs: 0.025
  mutation_rate: 0.25
  change_range: [1.1, 2.0]
  mutation:
    agent.params.config.learning_rate: "mutate_float"
    agent.params.config.grad_norm: "mutate_float"
    agent.params.config.entropy_coef: "mutate_float"
    agent.params.config.critic_coef: "mutate_float"
    agent.params.config.bounds_loss_coef: "mutate_float"
    agent.params.config.kl_threshold: "mutate_float"
    agent.params.config.gamma: "mutate_discount"
    agent.params.config.tau: "mutate_discount"
"""


def test_rl_games_masters_section_maps_onto_pbt() -> None:
    s = map_section(yaml.safe_load(RL_GAMES_MASTER)["pbt"])
    assert s.refusals == []
    assert s.values == {"population": 8, "interval_steps": 100000, "threshold_std": 0.10, "threshold_abs": 0.05,
                        "mutation_rate": 0.25, "change_range": [1.1, 2.0], "objective": "episode.success",
                        "mutation": {"train.learning_rate": "mutate_float", "train.grad_norm": "mutate_float",
                                     "train.gamma": "mutate_discount"}}
    assert [n.split("=")[0] for n in s.notes] == ["pbt.enabled", "pbt.policy_idx", "pbt.directory"]


def file_with(section: str, tmp_path: Path) -> Path:
    """rl-games' shipped ant_envpool.yaml with the section beside its params (as Isaac Lab's agent files hold it)."""
    doc = yaml.safe_load(locate("rl_games:configs/mujoco/ant_envpool.yaml").read_text())
    path = tmp_path / "ant_pbt.yaml"
    path.write_text(yaml.safe_dump({**doc, **yaml.safe_load(section)}))
    return path


def test_isaac_labs_section_is_read_with_pbt_rlgames(tmp_path: Path) -> None:
    path = file_with(ISAAC_LAB, tmp_path)
    cfg = compose_config("train=rlgames", f"train.file={path}", "pbt=rlgames")
    p = cfg.pbt
    assert (p.population, p.interval_steps, p.threshold_std, p.threshold_abs, p.objective) == (
        8, 50_000_000, 0.1, 0.025, "episode.Curriculum/difficulty_level")
    assert p.mutation == {f"train.{k}": "mutate_float" for k in (
        "learning_rate", "grad_norm", "entropy_coef", "critic_coef", "bounds_loss_coef", "kl_threshold")} | {
        "train.gamma": "mutate_discount", "train.tau": "mutate_discount"}
    assert (p.replace_rule, p.start_after) == ("default", 0)  # left out: rl-games' defaults
    assert compose_config("train=rlgames", f"train.file={path}", "pbt=rlgames", "pbt.population=4").pbt.population == 4


def test_the_import_note_names_pbt_rlgames(tmp_path: Path, capsys) -> None:
    path = file_with(ISAAC_LAB, tmp_path)
    compose_config("train=rlgames", f"train.file={path}")
    assert "top-level pbt: population-based training's section, read with pbt=rlgames" in capsys.readouterr().err


def test_dexpbts_keys_and_rl_games_rule_names_map_too() -> None:
    s = map_section({"num_policies": 6, "change_min": 1.1, "change_max": 1.5, "replace_rule": "threshold",
                     "start_after": 10_000_000, "dbg_mode": False,
                     "mutation": {"train.params.config.mini_epochs": "mutate_mini_epochs"}})
    assert s.refusals == []
    assert s.values == {"population": 6, "change_range": [1.1, 1.5], "replace_rule": "default",
                        "start_after": 10_000_000, "mutation": {"train.mini_epochs": "mutate_mini_epochs"}}


def test_keys_gmiexp_cannot_honour_are_refused_all_at_once(tmp_path: Path, capsys) -> None:
    section = ISAAC_LAB.replace("  mutation_rate: 0.25\n", "  mutation_rate: 0.25\n  exploit_everything: true\n"
                                ).replace('    agent.params.config.tau: "mutate_discount"\n',
                                          '    agent.params.config.tau: "mutate_discount"\n'
                                          '    agent.params.config.reward_shaper.scale_value: "mutate_float"\n'
                                          '    env.rewards.success.weight: "mutate_float"\n')
    path = file_with(section, tmp_path)
    with pytest.raises(ConfigError) as e:
        compose_config("train=rlgames", f"train.file={path}", "pbt=rlgames")
    err = str(e.value)
    assert "gmiexp cannot honour 3 key(s) of its pbt: section (nothing was launched)" in err
    for key in ("pbt.exploit_everything=True", "pbt.mutation.agent.params.config.reward_shaper.scale_value=",
                "pbt.mutation.env.rewards.success.weight="):
        assert key in err, err
        # one reason a key, each naming the file: a sweep names each once with the members that hold it
        assert [r for r in e.value.reasons if r.startswith(f"invalid pbt=rlgames with train.file={path}: {key}")]
    assert len(e.value.reasons) == 3, e.value.reasons


def test_pbt_rlgames_needs_a_file_with_a_section() -> None:
    path = locate("rl_games:configs/mujoco/ant_envpool.yaml")
    with pytest.raises(ConfigError, match="the file has no pbt: section"):
        compose_config("train=rlgames", f"train.file={path}", "pbt=rlgames")
    with pytest.raises(ConfigError, match="invalid pbt=rlgames without train.file"):
        compose_config("pbt=rlgames")
