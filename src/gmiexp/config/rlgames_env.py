"""Which gmiexp simulator runs the environment an rl-games file names (``params.config.env_name``).

rl-games picks an environment by ``env_name``: a family with its own ``env_config`` (``envpool``,
``openai_gym``, ``brax``, ``smac``, ...), a bare id from its ``env_configurations`` table (``CartPole-v1``,
``BipedalWalker-v3``), or ``rlgpu`` (IsaacGymEnvs and Isaac Lab fill it in at launch). This module maps
each onto a gmiexp simulator, or says why none runs it and what would. It stays light for
``mode=plan``: Gymnasium's registry is read without building an environment; envpool is imported only
for an envpool file (its spec gives the episode length and action space).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmiexp.config.igym import ISAAC_DIMS

#: env_name values that name a simulator gmiexp does not have -> why, and what runs the file
NOT_SIMULATORS = {
    "brax": "Brax/JAX is not a gmiexp simulator (rl-games runs it through brax and jax)",
    "maniskill": "ManiSkill (SAPIEN, GPU) is not a gmiexp simulator",
    "smac": "SMAC (StarCraft II, multi-agent) is not a gmiexp simulator: gmiexp trains single-agent tasks",
    "smac_v2": "SMACv2 (StarCraft II, multi-agent) is not a gmiexp simulator: gmiexp trains single-agent tasks",
    "smac_cnn": "SMAC (StarCraft II, multi-agent) is not a gmiexp simulator: gmiexp trains single-agent tasks",
    "cule": "CuLE (CUDA Atari) is not a gmiexp simulator; envpool runs the same games "
            "(env_name: envpool, env_config.env_name: <Game>-v5, as atari/ppo_pong_envpool.yaml)",
    "myo_gym": "MyoSuite is not a gmiexp simulator",
    "multiwalker_env": "PettingZoo's multiwalker (multi-agent) is not a gmiexp simulator",
    "connect4_env": "PettingZoo's connect four (multi-agent self-play) is not a gmiexp simulator",
    "slime_gym": "slimevolleygym (multi-agent self-play) is not a gmiexp simulator",
    "minigrid_env": "rl-games' MiniGrid wrapper (gym-minigrid, RGB image observations) is not a gmiexp simulator",
    "atari_gym": "rl-games' Gym Atari wrappers (make_atari_deepmind over ale-py) are not a gmiexp simulator; "
                 "envpool runs the same games with the same DeepMind preprocessing (env_name: envpool, "
                 "env_config.env_name: <Game>-v5, as atari/ppo_pong_envpool.yaml)",
    "test_env": "rl-games' own test environment (rl_games.envs.test) is not a gmiexp simulator",
    "dm_control": "rl-games' dm2gym wrapper is not a gmiexp simulator; envpool runs dm_control "
                  "(env_name: envpool, env_config.env_name: e.g. WalkerWalk-v1, as dm_control/walker_walk.yaml)",
    "openai_robot_gym": "rl-games' goal-conditioned Gym robotics wrapper is not a gmiexp simulator",
}
#: bare ids of rl-games' env_configurations table whose creator wraps the environment itself -> why refused
WRAPPED_IDS = {
    **{f"{g}NoFrameskip-v4": NOT_SIMULATORS["atari_gym"] for g in ("Pong", "Breakout", "MsPacman")},
    **{f"{g}-v5": NOT_SIMULATORS["atari_gym"] for g in ("Pong", "Breakout", "MsPacman")},
    "CarRacing-v0": "rl-games wraps it (make_car_racing: frame skip 4, frame stack), which gmiexp's gymnasium "
                    "simulator does not; gymnasium's CarRacing-v3 without those wrappers is another task",
    "CartPoleMaskedVelocity-v1": "rl-games' MaskVelocityWrapper over CartPole is not a gmiexp simulator",
    "BipedalWalkerCnn-v3": "rl-games' frame-stacked BipedalWalker wrapper is not a gmiexp simulator",
    "BipedalWalkerHardcoreCnn-v3": "rl-games' frame-stacked BipedalWalker wrapper is not a gmiexp simulator",
    "ReacherPyBulletEnv-v0": "PyBullet (roboschool) is not a gmiexp simulator",
    "QuadruppedWalk-v1": "rl-games' dm_control quadruped wrapper is not a gmiexp simulator",
}
#: old Gym ids -> the Gymnasium 1.x id gmiexp runs instead, and why (printed as a note, never silent)
GYM_RENAMES = {
    "Pendulum-v0": ("Pendulum-v1", "Gymnasium registers Pendulum-v1 only (same dynamics)"),
    "LunarLander-v2": ("LunarLander-v3", "Gymnasium 1.0 removed LunarLander-v2; v3 fixes its determinism bugs"),
    "LunarLanderContinuous-v2": ("LunarLanderContinuous-v3", "Gymnasium 1.0 removed the v2 lander; v3 fixes "
                                 "its determinism bugs"),
    "BipedalWalkerHardcore-v2": ("BipedalWalkerHardcore-v3", "Gymnasium registers BipedalWalkerHardcore-v3 only"),
}
MUJOCO = ("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
          "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d")
for _task in MUJOCO:  # -v2/-v3 need mujoco-py (no wheel for this Python); -v4 is the same model on `mujoco`
    for _v in ("v2", "v3"):
        GYM_RENAMES[f"{_task}-{_v}"] = (f"{_task}-v4", f"Gymnasium's {_task}-{_v} needs mujoco-py, which does not "
                                        f"install here; {_task}-v4 is the same model on the mujoco bindings")
ISAAC_LAB = ("Isaac Lab agent file (env_name: rlgpu): its task runs in Isaac Lab, not a gmiexp simulator; run it "
             "with Isaac Lab's scripts/reinforcement_learning/rl_games/train.py --task Isaac-<Task>-v0")
#: env_config keys that belong to rl-games' runner, not the environment
RUNNER_KEYS = ("seed",)


@dataclass
class EnvMapping:
    """What the file's environment becomes in gmiexp: values, notes, and why not (``refusal``)."""

    values: dict[str, Any] = field(default_factory=dict)  # task.simulator, task.env_id, task.env_config, ...
    notes: list[str] = field(default_factory=list)
    refusal: tuple[str, Any, str] | None = None  # (params key, value, reason)
    action_space: str | None = None  # Box | Discrete | MultiDiscrete when the simulator's spec was read
    consumed: tuple[str, ...] = ()  # env_config keys the mapping used (not passed on as task.env_config)


def env_kwargs(env_config: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in env_config.items() if k not in (*drop, *RUNNER_KEYS)}


def gymnasium_id(name: str, m: EnvMapping, key: str) -> str | None:
    """The Gymnasium id gmiexp runs for ``name`` (renamed with a note), or None with a refusal."""
    import gymnasium

    if name in GYM_RENAMES:
        new, why = GYM_RENAMES[name]
        m.notes.append(f"params.{key}={name!r} runs as Gymnasium's {new!r}: {why}")
        name = new
    if name not in gymnasium.registry:
        m.refusal = (key, name, "not a registered Gymnasium id (task.simulator=gymnasium runs those) nor an "
                                "environment family gmiexp has a simulator for")
        return None
    return name


def map_env(flat: dict[str, Any], path: Path) -> EnvMapping:
    """The simulator, env id, env_config and episode length for the file's ``env_name``."""
    m = EnvMapping()
    env_name = flat.get("config.env_name")
    env_config = dict(flat.get("config.env_config") or {})
    if env_name == "envpool":
        return _envpool(env_config, m)
    if env_name == "openai_gym":
        name = env_config.get("name")
        if not isinstance(name, str) or ":" in name:  # e.g. procgen:procgen-coinrun-v0 (a gym3 entry point)
            m.refusal = ("config.env_config.name", name, f"loads module {str(name).partition(':')[0]!r} (its "
                         "own Gym environments), which is not a gmiexp simulator; gmiexp runs Gymnasium ids")
            return m
        kwargs = env_kwargs(env_config, ("name",))
        for wrapper, inert in (("frames", 1), ("limit_steps", False), ("procgen", False)):  # rl-games' wrappers
            if kwargs.pop(wrapper, inert) != inert:
                m.refusal = (f"config.env_config.{wrapper}", env_config[wrapper], "an rl-games wrapper option "
                             "(frame stack, step limit, procgen) that gmiexp's gymnasium simulator does not apply")
                return m
        return _gymnasium(name, kwargs, m, "config.env_config.name")
    if env_name == "rlgpu":
        return _rlgpu(flat, path, m)
    if env_name in NOT_SIMULATORS:
        m.refusal = ("config.env_name", env_name, NOT_SIMULATORS[env_name])
        return m
    if env_name in WRAPPED_IDS:
        m.refusal = ("config.env_name", env_name, WRAPPED_IDS[env_name])
        return m
    if isinstance(env_name, str) and re.fullmatch(r"[\w/.-]+-v\d+", env_name):  # a bare Gym id (rl-games' table)
        kwargs = env_kwargs(env_config, ())
        steps = kwargs.pop("steps_limit", None)  # rl-games' create_env: a TimeLimit of this many steps
        m = _gymnasium(env_name, kwargs, m, "config.env_name")
        if steps is not None and m.refusal is None:
            m.values["task.max_episode_length"] = int(steps)
            m.consumed = ("steps_limit",)
        return m
    m.refusal = ("config.env_name", env_name, "an environment gmiexp has no simulator for; gmiexp runs envpool "
                 "(env_name: envpool), Gymnasium (openai_gym or a Gymnasium id) and IsaacGymEnvs (rlgpu) tasks")
    return m


def _gymnasium(name: str, kwargs: dict[str, Any], m: EnvMapping, key: str) -> EnvMapping:
    import gymnasium

    gid = gymnasium_id(name, m, key)
    if gid is None:
        return m
    steps = gymnasium.spec(gid).max_episode_steps
    m.values.update({"task.simulator": "gymnasium", "task.env_id": gid, "task.env_config": kwargs})
    if steps is not None:
        m.values["task.max_episode_length"] = int(steps)
    else:
        m.notes.append(f"Gymnasium's {gid} sets no episode limit: task.max_episode_length keeps gmiexp's default")
    return m


def _envpool(env_config: dict[str, Any], m: EnvMapping) -> EnvMapping:
    env_id = env_config.get("env_name")
    import envpool

    if env_id not in envpool.list_all_envs():
        m.refusal = ("config.env_config.env_name", env_id, "an envpool task id (envpool.list_all_envs()), "
                     "e.g. Ant-v4, Pong-v5, WalkerWalk-v1")
        return m
    spec = envpool.make_spec(env_id)
    m.action_space = type(spec.action_space).__name__
    length = env_config.get("max_episode_steps", spec.config.max_episode_steps)
    m.values.update({"task.simulator": "envpool", "task.env_id": env_id,
                     "task.env_config": env_kwargs(env_config, ("env_name", "max_episode_steps")),
                     "task.max_episode_length": int(length)})
    m.consumed = ("env_name", "max_episode_steps")
    return m


def _rlgpu(flat: dict[str, Any], path: Path, m: EnvMapping) -> EnvMapping:
    """IsaacGymEnvs (its task is ``config.name``) runs on gmiexp's isaacgym simulator; Isaac Lab does not."""
    isaac_lab = (any(k.startswith("env.") for k in flat) or flat.get("config.num_actors") == -1
                 or path.name.startswith("rl_games_"))
    if isaac_lab:
        m.refusal = ("config.env_name", "rlgpu", ISAAC_LAB)
        return m
    task = flat.get("config.name")
    if task not in ISAAC_DIMS:
        m.refusal = ("config.name", task, f"IsaacGymEnvs task {task!r}: gmiexp's isaacgym simulator runs "
                     f"{', '.join(ISAAC_DIMS)}; run it with IsaacGymEnvs' train.py task={task}")
        return m
    m.values.update({"task.simulator": "isaacgym", "task.env_id": task, "task.env_config": {}})
    return m
