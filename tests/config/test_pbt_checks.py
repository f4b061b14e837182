"""The pbt group: off by default, the anchors' defaults, every bad pbt.* value refused at once (exit 2)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.config.checks import declared, undeclared
from gmiexp.config.schema import PbtConfig


def test_pbt_is_off_by_default() -> None:
    assert compose_config().pbt is None


def test_pbt_default_is_rl_games_masters_pbt_cfg() -> None:
    p = compose_config("pbt=default").pbt
    # rl-games master rl_games/common/pbt/pbt_cfg.py: num_policies 8, interval_steps 100_000, threshold_std 0.10,
    # threshold_abs 0.05, mutation_rate 0.25, change_range (1.1, 2.0)
    assert (p.population, p.interval_steps, p.threshold_std, p.threshold_abs, p.mutation_rate, p.change_range) == (
        8, 100_000, 0.10, 0.05, 0.25, [1.1, 2.0])
    assert (p.replace_rule, p.exploit, p.objective, p.start_after, p.initial_delay) == (
        "default", "inplace", "reward/mean", 0, 0)
    assert p.mutation["train.gamma"] == "mutate_discount" and len(p.mutation) == 8  # Isaac Lab's example


def test_pbt_dexpbt_is_dexpbts_pbt_default_yaml() -> None:
    p = compose_config("pbt=dexpbt").pbt
    assert (p.replace_rule, p.interval_steps, p.start_after, p.initial_delay, p.replace_fraction_worst,
            p.replace_fraction_best, p.replace_threshold_frac_std, p.replace_threshold_frac_absolute,
            p.mutation_rate, p.change_range) == ("dexpbt", 10**7, 10**7, 2 * 10**7, 0.125, 0.3, 0.5, 0.05, 0.15,
                                                 [1.1, 1.5])
    assert p.mutation == {"train.learning_rate": "mutate_float", "train.grad_norm": "mutate_float",
                          "train.entropy_coef": "mutate_float", "train.critic_coef": "mutate_float",
                          "train.bounds_loss_coef": "mutate_float", "train.e_clip": "mutate_eps_clip",
                          "train.mini_epochs": "mutate_mini_epochs", "train.gamma": "mutate_discount"}


def test_a_mutation_key_with_dots_is_added_from_the_command_line() -> None:
    """Hydra's ``+`` merges a dict into the group's (a plain ``key={...}`` cannot add a key to a struct node)."""
    p = compose_config("pbt=default", "pbt.population=4", "+pbt.mutation={train.e_clip:mutate_eps_clip}",
                       "+pbt.init={train.learning_rate:[1e-5,1e-2]}").pbt
    assert p.population == 4 and p.mutation["train.e_clip"] == "mutate_eps_clip"
    assert p.mutation["train.gamma"] == "mutate_discount" and p.init == {"train.learning_rate": [1e-5, 1e-2]}


def test_every_pbt_field_declares_its_range() -> None:
    assert undeclared(PbtConfig) == []


BASE = compose_config("pbt=default", "mode=plan")
BAD = [(name, bad) for name, check in declared(PbtConfig).items() for bad in check.bad_examples()]


@pytest.mark.parametrize(("name", "bad"), BAD, ids=[f"{n}={b!r}" for n, b in BAD])
def test_every_bad_pbt_value_exits_2_naming_it_and_the_valid_ones(name, bad, tmp_path: Path, capsys) -> None:
    cfg = copy.deepcopy(BASE)
    setattr(cfg.pbt, name, bad)
    assert run(cfg, tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert f"invalid pbt.{name}: {bad!r}; valid: " in err
    assert not (tmp_path / "run").exists()


def refusal(tmp_path: Path, capsys, **values: object) -> str:
    cfg = copy.deepcopy(BASE)
    for k, v in values.items():
        setattr(cfg.pbt, k, v)
    assert run(cfg, tmp_path / "run") == 2
    return capsys.readouterr().err


def test_every_reason_is_given_at_once(tmp_path: Path, capsys) -> None:
    err = refusal(tmp_path, capsys, population=1, mutation_rate=1.5, exploit="later",
                  mutation={"train.mini_epochs": "mutate_float", "train.learning_rate": "mutate_discount"})
    assert "5 invalid pbt settings (nothing was launched):" in err
    for line in ("invalid pbt.population: 1; valid: >= 2 (members)",
                 "invalid pbt.mutation_rate: 1.5; valid: 0..1",
                 "invalid pbt.exploit: 'later'; valid: inplace, restart",
                 "invalid pbt.mutation.train.mini_epochs: 'mutate_float'; valid: a mutation of integer values",
                 "invalid pbt.mutation.train.learning_rate: 'mutate_discount'; valid: a mutation for values in "):
        assert line in err, err
    assert err.count("invalid pbt.") == 5  # and nothing else


def test_an_in_place_exploit_refuses_a_key_that_changes_the_rollouts_shape(tmp_path: Path, capsys) -> None:
    spec = {"train.horizon_length": "mutate_mini_epochs"}
    err = refusal(tmp_path, capsys, mutation=spec)
    assert ("invalid pbt.mutation key with pbt.exploit=inplace: 'train.horizon_length'; valid: "
            "train.learning_rate, ") in err
    cfg = copy.deepcopy(BASE)
    cfg.pbt.mutation, cfg.pbt.exploit = spec, "restart"
    assert run(cfg, tmp_path / "run2") == 0  # mode=plan: the restart exploit may change it


def test_dexpbt_needs_three_members_and_a_mutation_at_least_one_key(tmp_path: Path, capsys) -> None:
    err = refusal(tmp_path, capsys, replace_rule="dexpbt", population=2, mutation={})
    assert "invalid pbt.population with pbt.replace_rule=dexpbt: 2; valid: >= 3" in err
    assert "invalid pbt.mutation: {}; valid: at least one key" in err


def test_a_pbt_run_that_cannot_be_placed_exits_2_before_its_run_dir_is_made(tmp_path: Path, capsys) -> None:
    cfg = copy.deepcopy(BASE)
    cfg.mode, cfg.launch.nnodes = "train", 5  # 8 members, 2 a node: node 4 would run none
    named = ("invalid launch.nnodes=5 for pbt.population=8: 1 node(s) would run no member (2 per node); valid: "
             "launch.nnodes <= 4, or a larger pbt.population")
    assert cfg.pbt.exploit == "inplace"  # the group's default, built (tests/pbt/test_controller_inplace.py)
    assert run(cfg, tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert named in err
    assert "pbt.exploit" not in err
    assert not (tmp_path / "run").exists()


def test_mode_plan_shows_the_members_with_their_starting_values(tmp_path: Path, capsys) -> None:
    cfg = copy.deepcopy(BASE)
    cfg.pbt.population, cfg.pbt.init = 3, {"train.learning_rate": [1e-5, 1e-2]}
    assert run(cfg, tmp_path / "run") == 0
    err = capsys.readouterr().err
    assert "pbt: 3 members, rule default, every 100000 env steps" in err
    rates = [float(line.split("train.learning_rate=")[1].split(",")[0]) for line in err.splitlines()
             if "  member " in line]
    assert len(rates) == 3 and all(1e-5 <= r <= 1e-2 for r in rates) and len(set(rates)) == 3
