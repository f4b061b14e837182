"""Simulators: envpool (CPU default), torch-native Cartpole, mjlab (MuJoCo Warp, GPU), isaacgym (opt-in)."""

from __future__ import annotations

from typing import Any

from gmiexp.envs.base import GMIVecEnv
from gmiexp.errors import ConfigError, invalid

SIMULATORS = ("envpool", "torch", "mjlab", "isaacgym")
TORCH_TASKS = ("Cartpole",)


def check_task(task: dict[str, Any]) -> None:
    """Validate the task before anything launches (exit 2 on a bad one)."""
    sim, env_id = task["simulator"], task["env_id"]
    if sim not in SIMULATORS:
        raise invalid("task.simulator", sim, SIMULATORS)
    if sim == "torch" and env_id not in TORCH_TASKS:
        raise invalid("torch task", env_id, TORCH_TASKS)
    if sim == "envpool":
        import envpool

        known = envpool.list_all_envs()
        if env_id not in known:
            close = [e for e in known if e.split("-")[0] in ("Ant", "Humanoid", "HalfCheetah", "Hopper")]
            raise invalid("envpool env_id", env_id, close or known[:20])
    if sim == "isaacgym":
        from gmiexp.envs.isaacgym_env import check

        check(env_id)
    if sim == "mjlab":
        _check_mjlab(env_id)
    if task["continuous"] != (env_id != "Cartpole"):
        raise ConfigError(f"task.continuous={task['continuous']} does not match task {env_id!r}")


def _check_mjlab(env_id: str) -> None:
    import importlib.util

    from gmiexp.envs.mjlab_env import INSTALL_HINT, MJLAB_DIMS

    if env_id not in MJLAB_DIMS:
        raise invalid("mjlab env_id", env_id, MJLAB_DIMS)
    if importlib.util.find_spec("mjlab") is None:
        raise ConfigError(INSTALL_HINT)


# Observation and action sizes of the IsaacGymEnvs tasks (paper Table 6).
ISAAC_DIMS = {"Ant": (60, 8), "Anymal": (48, 12), "BallBalance": (24, 3), "FrankaCabinet": (23, 9),
              "Humanoid": (108, 21), "ShadowHand": (211, 20)}


def task_dims(task: dict[str, Any]) -> tuple[int, int]:
    """(observation size, action size or number of discrete actions) without building the simulator."""
    sim, env_id = task["simulator"], task["env_id"]
    if sim == "torch":
        return 4, 2
    if sim == "isaacgym":
        return ISAAC_DIMS[env_id]
    if sim == "mjlab":
        from gmiexp.envs.mjlab_env import MJLAB_DIMS

        return MJLAB_DIMS[env_id][:2]
    import envpool

    spec = envpool.make_spec(env_id)
    return int(spec.observation_space.shape[0]), int(spec.action_space.shape[0])


def make_vec_env(task: dict[str, Any], num_envs: int, seed: int, sim_threads: int = 1,
                 device: str = "cpu", states: bool = False) -> GMIVecEnv:
    """Build the simulator of ``task`` for one GMI.

    ``states``: also return the simulator's privileged observations for a central value network
    (``{"obs", "states"}``, mjlab's critic group); simulators without them ignore it.
    """
    sim = task["simulator"]
    if sim == "torch":
        from gmiexp.envs.cartpole import CartpoleVecEnv

        return CartpoleVecEnv(num_envs, seed=seed, max_episode_length=task["max_episode_length"], device=device)
    if sim == "envpool":
        from gmiexp.envs.envpool_env import EnvpoolVecEnv

        return EnvpoolVecEnv(task["env_id"], num_envs, seed=seed, num_threads=sim_threads,
                             max_episode_length=task["max_episode_length"], device=device)
    if sim == "mjlab":
        from gmiexp.envs.mjlab_env import MjlabVecEnv

        return MjlabVecEnv(task["env_id"], num_envs, seed=seed, device=device,
                           max_episode_length=task["max_episode_length"], states=states)
    if sim == "isaacgym":
        from gmiexp.envs.isaacgym_env import IsaacGymVecEnv

        return IsaacGymVecEnv(task["env_id"], num_envs, seed=seed, device=device)
    raise invalid("task.simulator", sim, SIMULATORS)


__all__ = ["SIMULATORS", "GMIVecEnv", "check_task", "make_vec_env", "task_dims"]
