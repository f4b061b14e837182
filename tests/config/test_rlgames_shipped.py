"""Every YAML shipped with rl-games maps onto gmiexp or is refused naming all its blockers (no launch)."""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

import pytest

from gmiexp.config.rlgames_yaml import inspect_file, load_doc
from gmiexp.config.schema import RLGAMES_CONFIG_KEYS
from gmiexp.errors import ConfigError

ROOT = Path(str(importlib.resources.files("rl_games"))) / "configs"
FILES = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.yaml"))
# The families the issue says must map (and, with their simulators, run): dm_control, envpool Atari with
# actor_critic (CNN, RNN), classic control, Box2D, Gymnasium and envpool MuJoCo
MUST_MAP = re.compile(r"dm_control/.*|atari/ppo_\w+_envpool(_rnn)?\.yaml|mujoco/(?!sac_)\w+\.yaml|ppo_cartpole\.yaml|"
                      r"ppo_pendulum(_torch)?\.yaml|ppo_lunar\w*\.yaml|ppo_walker(_hardcore|_rnn)?\.yaml|"
                      r"ppo_continuous\.yaml|test/test_ppo_walker_truncated_time\.yaml")
# file pattern -> a reason its refusal must give: the simulators and algorithms gmiexp lacks
BLOCKED = {
    r"brax/ppo_.*": "Brax/JAX is not a gmiexp simulator",
    r"(brax|mujoco)/sac_.*": "SAC is not run by gmiexp",
    r"smac/.*|ppo_smac\.yaml": "(StarCraft II, multi-agent) is not a gmiexp simulator",
    r"maniskill/.*": "ManiSkill",
    r"atari/\w+_cule\.yaml": "CuLE",
    r"ppo_myo\.yaml": "MyoSuite",
    r"ppo_multiwalker\.yaml|ma/ppo_connect4.*": "PettingZoo",
    r"minigrid/.*": "MiniGrid",
    r"procgen/.*": "procgen",
    r"atari/\w+_resnet\.yaml": "resnet_actor_critic",
}


def blocked_as(name: str) -> str | None:
    return next((why for pattern, why in BLOCKED.items() if re.fullmatch(pattern, name)), None)


@pytest.mark.parametrize("name", FILES)
def test_every_shipped_file_maps_or_is_refused_with_a_reason_for_each_key(name):
    try:
        load_doc(ROOT / name)
    except ConfigError as e:  # SMACv2's env_configs/*.yaml: environment settings other files point at
        assert name.startswith("smac/v2/env_configs/") and "not an rl-games params file" in str(e)
        return
    imp = inspect_file(ROOT / name)
    if MUST_MAP.fullmatch(name):
        assert not imp.refusals, [r.line() for r in imp.refusals]
        assert imp.values["task.simulator"] in ("envpool", "gymnasium")
        assert set(imp.values["train.rlgames_config"]) <= set(RLGAMES_CONFIG_KEYS)
        return
    assert imp.refusals, f"{name} maps; add it to MUST_MAP or say why it is refused"
    msg = str(imp.error(ROOT / name))
    for r in imp.refusals:
        assert r.reason and f"params.{r.key}=" in msg  # every key named, each with its reason, in one message
    ordered = sorted(imp.refusals, key=lambda r: r.rank)  # blockers first: simulator, algorithm, network, rest
    assert [ln.strip() for ln in msg.splitlines()[1:]] == [r.line() for r in ordered]
    want = blocked_as(name)
    if want is not None:
        assert any(want in r.line() for r in imp.refusals), msg


def test_sac_is_refused_as_sac_not_as_a_network_name():
    imp = inspect_file(ROOT / "mujoco/sac_ant_envpool.yaml")
    first = sorted(imp.refusals, key=lambda r: r.rank)[0]
    assert (first.key, first.reason) == ("algo.name", "SAC is not run by gmiexp (it runs rl-games' PPO agents "
                                                      "a2c_continuous and a2c_discrete)")
    assert all("SAC" in r.reason for r in imp.refusals)  # the SAC-only keys too, never "unknown key"


def test_brax_sac_lists_the_simulator_then_the_algorithm_then_every_sac_key():
    imp = inspect_file(ROOT / "brax/sac_ant.yaml")
    lines = str(imp.error(ROOT / "brax/sac_ant.yaml")).splitlines()[1:]
    assert "Brax/JAX is not a gmiexp simulator" in lines[0] and "SAC is not run by gmiexp" in lines[1]
    assert len(lines) == len(imp.refusals) > 10 and any("config.replay_buffer_size" in ln for ln in lines)


def test_atari_envpool_maps_the_cnn_discrete_actions_reward_clip_and_envpool_options():
    imp = inspect_file(ROOT / "atari/ppo_pong_envpool.yaml")
    v = imp.values
    assert (v["task.simulator"], v["task.env_id"], v["task.continuous"]) == ("envpool", "Pong-v5", False)
    assert v["task.env_config"] == {"has_lives": False}  # rl-games' envpool wrapper option, for the simulator
    assert v["task.cnn"]["type"] == "conv2d" and v["task.cnn"]["permute_input"] is False
    assert v["task.reward_shaper"] == {"min_val": -1, "max_val": 1}
    assert v["task.max_episode_length"] == 27000  # envpool's own Atari limit (108000 frames / skip 4)
    rnn = inspect_file(ROOT / "atari/ppo_pacman_envpool_rnn.yaml").values
    assert rnn["task.rnn"]["name"] in ("lstm", "gru") and rnn["train.seq_length"] > 4


def test_old_gym_ids_run_as_their_gymnasium_successors_and_say_so():
    imp = inspect_file(ROOT / "ppo_lunar_discrete.yaml")
    assert (imp.values["task.simulator"], imp.values["task.env_id"]) == ("gymnasium", "LunarLander-v3")
    assert any("'LunarLander-v2' runs as Gymnasium's 'LunarLander-v3'" in n for n in imp.notes)
    assert inspect_file(ROOT / "ppo_pendulum.yaml").values["task.env_id"] == "Pendulum-v1"
    walker = inspect_file(ROOT / "test/test_ppo_walker_truncated_time.yaml").values
    assert walker["task.max_episode_length"] == 1000 and walker["task.env_config"] == {}  # steps_limit: the limit


def test_dm_control_humanoid_max_frames_becomes_epochs_with_a_note():
    imp = inspect_file(ROOT / "dm_control/humanoid_run.yaml")
    note = next(n for n in imp.notes if n.startswith("params.config.max_frames="))
    assert f"max_iterations={imp.values['max_iterations']}" in note
