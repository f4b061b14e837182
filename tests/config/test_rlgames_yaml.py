"""train=rlgames: rl-games' own MuJoCo configs map onto gmiexp and round-trip into the same rl-games params."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from gmitest import cli_env, compose_config, run_cli

from gmiexp.app import run
from gmiexp.config.rlgames_keys import FIELDS, FIXED, VERBATIM
from gmiexp.config.rlgames_yaml import DERIVED_DST, NOTES, VERBATIM_SRC, leaves, locate, schema_default
from gmiexp.errors import ConfigError
from gmiexp.planner.build import build_plan
from gmiexp.rl.rlgames.params import ENV_NAME, build_params

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["rl_games:configs/mujoco/ant_envpool.yaml", "rl_games:configs/mujoco/humanoid_envpool.yaml"]
ANT = SHIPPED[0]


def imported(spec: str, *overrides: str):
    return compose_config("train=rlgames", f"train.file={spec}", *overrides)


def at(d: dict, dotted: str):
    for k in dotted.split("."):
        d = d[k]
    return d


@pytest.mark.parametrize("spec", SHIPPED)
def test_every_key_of_the_shipped_file_round_trips_into_the_params_gmiexp_gives_rl_games(spec, tmp_path):
    cfg = imported(spec, "gmis_per_gpu=1")
    plan, _ = build_plan(cfg, tmp_path)
    params = build_params(plan, plan.gmis[0])
    # keys gmiexp translates rather than copies: where each one lands instead
    translated = {"config.env_name": ENV_NAME, "config.env_config": None}
    player = {"config.player.render": cfg.eval.video, "config.player.deterministic": cfg.eval.deterministic,
              "config.player.games_num": cfg.eval.episodes}
    file_leaves = dict(leaves(yaml.safe_load(locate(spec).read_text())["params"]))
    assert len(file_leaves) > 40
    env_config = dict(file_leaves["config.env_config"])
    assert env_config.pop("env_name") == plan.task.env_id and plan.task.env_config == {}  # the seed: below
    for key, value in file_leaves.items():
        if key in translated:
            continue
        got = player[key] if key in player else at(params, key)
        want = float(value) if key == "config.learning_rate" else value  # PyYAML reads 3e-4 as a string
        assert got == want and type(got) in (type(want), float), (key, got, want)
    assert params["config"]["env_config"]["seed"] == params["seed"] == env_config.get("seed", 5) == 5


def test_humanoid_keys_the_ant_file_lacks_take_rl_games_defaults():
    ant, humanoid = imported(ANT), imported(SHIPPED[1])
    assert ant.train.score_to_win is None and humanoid.train.score_to_win == 20000.0
    assert (ant.task.reward_scale, humanoid.task.reward_scale) == (1.0, 0.1)
    assert (ant.eval.video, humanoid.eval.video) == (False, True)  # player.render
    assert humanoid.seed == 5  # no env_config.seed: rl-games' runner seeds the env with params.seed


def test_command_line_overrides_win_over_the_file():
    cfg = imported(ANT, "train.gamma=0.5", "seed=7", "num_envs=8", "task.mlp_units=[16,16]", "eval.video=true")
    assert (cfg.train.gamma, cfg.seed, cfg.num_envs, cfg.task.mlp_units, cfg.eval.video) == (0.5, 7, 8, [16, 16], True)
    assert cfg.train.horizon_length == 64  # the rest still from the file


def test_the_train_option_interpolates_exactly_the_keys_the_importer_maps():
    text = (ROOT / "conf" / "train" / "rlgames.yaml").read_text()
    interpolated = set(re.findall(r"\$\{rlgames:([\w.]+)\}", text))
    assert interpolated == {f.dst for f in FIELDS} | set(DERIVED_DST)


def write_variant(tmp_path: Path, edit) -> Path:
    doc = yaml.safe_load(locate(ANT).read_text())
    edit(doc["params"])
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda p: p["config"].update(my_knob=True), "params.config.my_knob=True: not a key gmiexp maps"),
    (lambda p: p["network"].update(rnn={"units": 8, "bogus": 1}),
     "params.network.rnn.bogus=1: rl-games' actor_critic reads only"),
    (lambda p: p["network"].update(name="resnet_actor_critic"), "params.network.name='resnet_actor_critic'"),
    (lambda p: p["config"].update(env_name="brax"), "params.config.env_name='brax': Brax/JAX is not a gmiexp"),
    (lambda p: p["config"].update(lr_schedule="cosine"), "params.config.lr_schedule='cosine'"),
    (lambda p: p["config"].pop("gamma"), "params.config.gamma='<missing>': rl-games requires it"),
    (lambda p: p["algo"].update(name="sac"), "params.algo.name='sac': SAC is not run by gmiexp"),
    (lambda p: p["config"].update(ppo=False), "params.config.ppo=False: gmiexp runs rl-games' clipped PPO"),
    (lambda p: p["network"]["space"].update(discrete={}), "params.network.space="),
    (lambda p: p["config"].update(features={"soft_augmentation": None}), "params.config.features="),
])
def test_keys_gmiexp_cannot_honour_are_refused_by_name(tmp_path, edit, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)):
        imported(str(write_variant(tmp_path, edit)))


def test_a_files_refusals_are_its_errors_reasons_one_a_key_so_a_sweep_names_each_once(tmp_path):
    bad = write_variant(tmp_path, lambda p: (p["config"].update(my_knob=True), p["algo"].update(name="sac")))
    with pytest.raises(ConfigError) as e:
        imported(str(bad))
    assert "cannot honour 2 key(s)" in str(e.value)
    heads = [r.split(": ")[:2] for r in e.value.reasons]  # blockers first, as in the message
    assert heads == [[f"invalid train.file={bad}", "params.algo.name='sac'"],
                     [f"invalid train.file={bad}", "params.config.my_knob=True"]], e.value.reasons


def test_unknown_key_exits_2_naming_it_and_cfg_job_shows_the_imported_values(tmp_path):
    bad = write_variant(tmp_path, lambda p: p["config"].update(my_new_knob=3))
    r = run_cli("mode=plan", "train=rlgames", f"train.file={bad}", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "params.config.my_new_knob=3" in r.stderr and r.stdout == ""
    r = run_cli("--cfg", "job", "--resolve", "train=rlgames", f"train.file={ANT}", "train.tau=0.9")
    assert r.returncode == 0, r.stderr[-2000:]
    shown = yaml.safe_load(r.stdout)
    assert (shown["train"]["horizon_length"], shown["train"]["tau"], shown["task"]["env_id"]) == (64, 0.9, "Ant-v4")


def test_train_file_without_train_rlgames_is_refused(tmp_path):
    r = run_cli("mode=plan", f"train.file={ANT}", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 2 and "only with train=rlgames" in r.stderr


@pytest.mark.timeout(900)  # two short training runs; slow on a loaded 2-core host
def test_gmiexp_1_gmi_and_vanilla_rl_games_on_the_ant_file_give_identical_rewards_and_weights(tmp_path):
    """Same file, seed (the file's) and env count: rl-games' own runner and envpool vec-env vs gmiexp."""
    size = {"envs": 16, "epochs": 2, "minibatch": 1024}  # 16 x 64 steps per epoch; the file's 2048 is too big
    vanilla = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "baseline_rlgames" / "run_file.py"), f"file={ANT}",
         f"num_actors={size['envs']}", f"max_epochs={size['epochs']}", f"minibatch_size={size['minibatch']}",
         f"hydra.run.dir={tmp_path / 'vanilla'}"],
        capture_output=True, text=True, timeout=600, env=cli_env())
    assert vanilla.returncode == 0, vanilla.stderr[-2000:]
    ours = run_cli("train=rlgames", f"train.file={ANT}", f"num_envs={size['envs']}",
                   f"max_iterations={size['epochs']}", f"train.minibatch_size={size['minibatch']}",
                   "gmis_per_gpu=1", "launch.progress=false", f"hydra.run.dir={tmp_path / 'gmiexp'}", timeout=600)
    assert ours.returncode == 0, ours.stderr[-2000:]
    a = json.loads((tmp_path / "vanilla" / "summary.json").read_text())
    b = json.loads((tmp_path / "gmiexp" / "summary.json").read_text())
    rewards_a = [r["reward/mean"] for r in a["history"]]
    rewards_b = [r["reward/mean"] for r in b["history"]]
    assert any(r is not None for r in rewards_a)  # episodes ended: the comparison compares something
    assert rewards_a == rewards_b
    final_a = torch.load(next(Path(a["checkpoint_dir"]).glob("last_*.pth")), weights_only=False)["model"]
    final_b = torch.load(next((tmp_path / "gmiexp" / "rl_games" / "run" / "nn").glob("last_*.pth")),
                         weights_only=False)["model"]
    assert final_a.keys() == final_b.keys()
    assert all(torch.equal(final_a[k], final_b[k]) for k in final_a)


def test_experience_layouts_take_the_file_and_refuse_only_what_their_learner_would_not_apply(tmp_path):
    """The Ant file (regularisation bounds loss, smooth clamp, mixed precision) plans in every experience layout;
    keys only rl-games' agent applies are refused where the learner trains (decoupled_async), all at once, and
    taken where rl-games' own agent is the trainer (tdg_ex with one trainer and no replay)."""
    for layout in ("tdg_ex", "decoupled_async"):
        build_plan(imported(ANT, f"layout={layout}"), tmp_path / layout)

    def edit(p):
        p["config"].update(zero_rnn_on_done=False, schedule_entropy=True)
    variant = str(write_variant(tmp_path, edit))
    with pytest.raises(ConfigError) as e:
        build_plan(imported(variant, "layout=decoupled_async"), tmp_path / "async")
    assert "train.rlgames_config.zero_rnn_on_done" in str(e.value)
    assert "train.rlgames_config.schedule_entropy" in str(e.value)
    build_plan(imported(variant, "layout=tdg_ex"), tmp_path / "tdg_ex_variant")


def test_file_keys_for_rl_games_own_agent_reach_its_params_verbatim(tmp_path):
    def edit(p):
        p["torch_threads"] = 1
        p["config"].update(save_best_after=7, schedule_type="standard", weight_decay=0.001)
        p["config"]["reward_shaper"].update(min_val=-1, max_val=1)
    cfg = imported(str(write_variant(tmp_path, edit)), "gmis_per_gpu=1", "num_envs=16")
    plan, _ = build_plan(cfg, tmp_path)
    params = build_params(plan, plan.gmis[0])
    c = params["config"]
    assert (c["save_best_after"], c["schedule_type"], c["weight_decay"]) == (7, "standard", 0.001)
    assert c["reward_shaper"] == {"scale_value": 1.0, "min_val": -1, "max_val": 1}
    assert plan.gmis[0].torch_threads == params["torch_threads"] == 1  # the file's cap within the core budget


def test_the_key_table_names_schema_fields_and_each_rl_games_key_once():
    """Import and export read one table: each gmiexp key it names is a schema field, each rl-games key is in it once."""
    srcs = [f.src for f in FIELDS] + list(FIXED) + list(VERBATIM_SRC) + list(NOTES)
    assert len(srcs) == len(set(srcs))
    for dst in {f.dst for f in FIELDS} | set(VERBATIM):
        schema_default(dst)  # KeyError: not a field of gmiexp's schema


def test_a_minibatch_that_does_not_fit_a_gmis_batch_is_said_with_the_valid_sizes(tmp_path, caplog):
    cfg = imported(ANT, "gmis_per_gpu=1", "num_envs=8", "train.horizon_length=16")  # the file's 2048 > 128
    with caplog.at_level("WARNING", logger="gmiexp"):
        plan, _ = build_plan(cfg, tmp_path)
    assert "train.minibatch_size=2048 does not divide every GMI's batch: GMIs [0] (batch 128 = horizon_length " \
           "16 x 8 envs) use 128; valid there: 1, 2, 4, 8, 16, 32, 64, 128" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="gmiexp"):
        build_plan(imported(ANT, "gmis_per_gpu=1", "num_envs=8", "train.horizon_length=16",
                            "train.minibatch_size=64"), tmp_path)
    assert "minibatch_size" not in caplog.text


def test_load_checkpoint_becomes_gmiexps_checkpoint_and_a_missing_one_is_refused(tmp_path, capsys):
    """The refusal is the job's, run in this process (a launch costs 3-4 s of CPU); the CLI's exit 2 on a file's
    refusal is test_unknown_key_exits_2_naming_it_and_cfg_job_shows_the_imported_values's."""
    pth = tmp_path / "ant.pth"
    pth.write_bytes(b"")
    path = write_variant(tmp_path, lambda p: p.update(load_checkpoint=True, load_path=str(pth)))
    assert imported(str(path)).checkpoint == str(pth)
    off = write_variant(tmp_path, lambda p: p.update(load_checkpoint=False, load_path="nn/old.pth"))
    assert imported(str(off)).checkpoint == ""  # rl-games loads nothing either
    gone = write_variant(tmp_path, lambda p: p.update(load_checkpoint=True, load_path=str(tmp_path / "gone.pth")))
    capsys.readouterr()
    code = run(compose_config("mode=plan", "train=rlgames", f"train.file={gone}"), tmp_path / "run")
    err = capsys.readouterr().err
    assert code == 2 and "gone.pth" in err and "checkpoint" in err, err[-2000:]
