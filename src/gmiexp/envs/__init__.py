"""Simulators: envpool (CPU default), torch-native Cartpole, mjlab (MuJoCo Warp, GPU), isaacgym (opt-in)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmiexp.errors import ConfigError, invalid

if TYPE_CHECKING:  # the adapters import rl-games and torch; mode=plan and mode=doctor must not
    from gmiexp.config import TaskConfig
    from gmiexp.envs.base import GMIVecEnv

SIMULATORS = ("envpool", "torch", "mjlab", "isaacgym")
TORCH_TASKS = ("Cartpole",)
# Observation and action sizes of envpool's MuJoCo tasks, so planning never imports envpool (whose import pulls
# in matplotlib). tests/envs/test_envpool_env.py holds them equal to envpool.make_spec; other ids ask envpool.
ENVPOOL_DIMS = {"Ant-v4": (27, 8), "Humanoid-v4": (376, 17), "HalfCheetah-v4": (17, 6), "Hopper-v4": (11, 3),
                "Walker2d-v4": (17, 6), "Swimmer-v4": (8, 2), "Reacher-v4": (11, 2), "Pusher-v4": (23, 7),
                "InvertedPendulum-v4": (4, 1), "InvertedDoublePendulum-v4": (11, 1),
                "HumanoidStandup-v4": (376, 17)}


def check_task(task: TaskConfig) -> None:
    """Validate the task before anything launches (exit 2 on a bad one)."""
    sim, env_id = task.simulator, task.env_id
    if sim not in SIMULATORS:
        raise invalid("task.simulator", sim, SIMULATORS)
    if sim == "torch" and env_id not in TORCH_TASKS:
        raise invalid("torch task", env_id, TORCH_TASKS)
    if sim == "envpool" and env_id not in ENVPOOL_DIMS:
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
    if task.continuous != (env_id != "Cartpole"):
        raise ConfigError(f"task.continuous={task.continuous} does not match task {env_id!r}")


def _check_mjlab(env_id: str) -> None:
    import importlib.util

    if env_id not in MJLAB_DIMS:
        raise invalid("mjlab env_id", env_id, MJLAB_DIMS)
    if importlib.util.find_spec("mjlab") is None:
        raise ConfigError(INSTALL_HINT)


# mjlab task id -> (actor obs, actions, critic obs), so planning never imports mjlab (tests hold it equal to mjlab)
MJLAB_DIMS = {
    "Mjlab-Cartpole-Balance": (5, 1, 5),
    "Mjlab-Cartpole-Swingup": (5, 1, 5),
    "Mjlab-Velocity-Flat-Unitree-Go1": (48, 12, 72),
    "Mjlab-Velocity-Flat-Unitree-G1": (99, 29, 111),
}
INSTALL_HINT = "mjlab is not installed: `pip install -e '.[mjlab]' -c <file pinning your installed torch>` " \
               "(or `make venv`, which does that)"


# Observation and action sizes of the IsaacGymEnvs tasks (paper Table 6).
ISAAC_DIMS = {"Ant": (60, 8), "Anymal": (48, 12), "BallBalance": (24, 3), "FrankaCabinet": (23, 9),
              "Humanoid": (108, 21), "ShadowHand": (211, 20)}


def task_dims(task: TaskConfig) -> tuple[int, int]:
    """(observation size, action size or number of discrete actions) without building the simulator."""
    sim, env_id = task.simulator, task.env_id
    if sim == "torch":
        return 4, 2
    if sim == "isaacgym":
        return ISAAC_DIMS[env_id]
    if sim == "mjlab":
        return MJLAB_DIMS[env_id][:2]
    if env_id in ENVPOOL_DIMS:
        return ENVPOOL_DIMS[env_id]
    import envpool

    spec = envpool.make_spec(env_id)
    return int(spec.observation_space.shape[0]), int(spec.action_space.shape[0])


def make_vec_env(task: TaskConfig, num_envs: int, seed: int, sim_threads: int = 1,
                 device: str = "cpu", states: bool = False) -> GMIVecEnv:
    """Build the simulator of ``task`` for one GMI.

    ``states``: also return the simulator's privileged observations for a central value network
    (``{"obs", "states"}``, mjlab's critic group); simulators without them ignore it.
    """
    sim = task.simulator
    if sim == "torch":
        from gmiexp.envs.cartpole import CartpoleVecEnv

        return CartpoleVecEnv(num_envs, seed=seed, max_episode_length=task.max_episode_length, device=device)
    if sim == "envpool":
        from gmiexp.envs.envpool_env import EnvpoolVecEnv

        return EnvpoolVecEnv(task.env_id, num_envs, seed=seed, num_threads=sim_threads,
                             max_episode_length=task.max_episode_length, device=device)
    if sim == "mjlab":
        from gmiexp.envs.mjlab_env import MjlabVecEnv

        return MjlabVecEnv(task.env_id, num_envs, seed=seed, device=device,
                           max_episode_length=task.max_episode_length, states=states)
    if sim == "isaacgym":
        from gmiexp.envs.isaacgym_env import IsaacGymVecEnv

        return IsaacGymVecEnv(task.env_id, num_envs, seed=seed, device=device)
    raise invalid("task.simulator", sim, SIMULATORS)


__all__ = ["ENVPOOL_DIMS", "SIMULATORS", "check_task", "make_vec_env", "task_dims"]
