"""Simulators: envpool (CPU default), torch-native Cartpole, mjlab (MuJoCo Warp, GPU), isaacgym (opt-in).

Each is a :class:`Simulator` registered in :data:`SIMULATORS` by name (``task.simulator``). A simulator
knows its tasks' sizes and checks them without importing its adapter (rl-games, torch, envpool), so
``mode=plan`` stays light; only :meth:`Simulator.make` imports the adapter. A new simulator is one
registered class (in any module imported before the run) plus its adapter and its ``conf/task`` YAML.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from gmiexp.errors import ConfigError, invalid
from gmiexp.registry import Registry

if TYPE_CHECKING:  # the adapters import rl-games and torch; mode=plan and mode=doctor must not
    from gmiexp.config import TaskConfig
    from gmiexp.envs.base import GMIVecEnv

TORCH_TASKS = ("Cartpole",)
# Observation and action sizes of envpool's MuJoCo tasks, so planning never imports envpool (whose import pulls
# in matplotlib). tests/envs/test_envpool_env.py holds them equal to envpool.make_spec; other ids ask envpool.
ENVPOOL_DIMS = {"Ant-v4": (27, 8), "Humanoid-v4": (376, 17), "HalfCheetah-v4": (17, 6), "Hopper-v4": (11, 3),
                "Walker2d-v4": (17, 6), "Swimmer-v4": (8, 2), "Reacher-v4": (11, 2), "Pusher-v4": (23, 7),
                "InvertedPendulum-v4": (4, 1), "InvertedDoublePendulum-v4": (11, 1),
                "HumanoidStandup-v4": (376, 17)}


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


class Simulator(ABC):
    """How gmiexp checks, sizes and builds one simulator's tasks."""

    @abstractmethod
    def check(self, env_id: str) -> None:
        """ConfigError (exit 2) for a task this simulator cannot run here."""

    @abstractmethod
    def dims(self, env_id: str) -> tuple[int, int]:
        """(observation size, action size or number of discrete actions), without building the simulator."""

    def state_dim(self, env_id: str) -> int | None:
        """Size of the privileged observations (``states``) it returns for a central value net; None: none."""
        return None

    @abstractmethod
    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        """The vectorised environment of one GMI (imports the adapter)."""


#: Every simulator by name (``task.simulator``); the built-ins below register themselves.
SIMULATORS: Registry[type[Simulator]] = Registry("task.simulator")


@SIMULATORS.register("envpool")
class Envpool(Simulator):
    def check(self, env_id: str) -> None:
        if env_id in ENVPOOL_DIMS:
            return
        import envpool

        known = envpool.list_all_envs()
        if env_id not in known:
            close = [e for e in known if e.split("-")[0] in ("Ant", "Humanoid", "HalfCheetah", "Hopper")]
            raise invalid("envpool env_id", env_id, close or known[:20])

    def dims(self, env_id: str) -> tuple[int, int]:
        if env_id in ENVPOOL_DIMS:
            return ENVPOOL_DIMS[env_id]
        import envpool

        spec = envpool.make_spec(env_id)
        return int(spec.observation_space.shape[0]), int(spec.action_space.shape[0])

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.envpool_env import EnvpoolVecEnv

        return EnvpoolVecEnv(task.env_id, num_envs, seed=seed, num_threads=sim_threads,
                             max_episode_length=task.max_episode_length, device=device)


@SIMULATORS.register("torch")
class TorchNative(Simulator):
    def check(self, env_id: str) -> None:
        if env_id not in TORCH_TASKS:
            raise invalid("torch task", env_id, TORCH_TASKS)

    def dims(self, env_id: str) -> tuple[int, int]:
        return 4, 2  # Cartpole: 4 observations, 2 discrete actions

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.cartpole import CartpoleVecEnv

        return CartpoleVecEnv(num_envs, seed=seed, max_episode_length=task.max_episode_length, device=device)


@SIMULATORS.register("mjlab")
class Mjlab(Simulator):
    def check(self, env_id: str) -> None:
        import importlib.util

        if env_id not in MJLAB_DIMS:
            raise invalid("mjlab env_id", env_id, MJLAB_DIMS)
        if importlib.util.find_spec("mjlab") is None:
            raise ConfigError(INSTALL_HINT)

    def dims(self, env_id: str) -> tuple[int, int]:
        return MJLAB_DIMS[env_id][:2]

    def state_dim(self, env_id: str) -> int | None:
        return MJLAB_DIMS[env_id][2]

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.mjlab_env import MjlabVecEnv

        return MjlabVecEnv(task.env_id, num_envs, seed=seed, device=device,
                           max_episode_length=task.max_episode_length, states=states)


@SIMULATORS.register("isaacgym")
class IsaacGym(Simulator):
    def check(self, env_id: str) -> None:
        from gmiexp.envs.isaacgym_env import check

        check(env_id)

    def dims(self, env_id: str) -> tuple[int, int]:
        return ISAAC_DIMS[env_id]

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.isaacgym_env import IsaacGymVecEnv

        return IsaacGymVecEnv(task.env_id, num_envs, seed=seed, device=device)


def simulator(task: TaskConfig) -> Simulator:
    """The task's simulator (ConfigError, exit 2, naming the registered ones otherwise)."""
    return SIMULATORS.get(task.simulator)()


def check_task(task: TaskConfig) -> None:
    """Validate the task before anything launches (exit 2 on a bad one)."""
    env_id = task.env_id
    simulator(task).check(env_id)
    if task.continuous != (env_id != "Cartpole"):
        raise ConfigError(f"task.continuous={task['continuous']} does not match task {env_id!r}")


def task_dims(task: TaskConfig) -> tuple[int, int]:
    """(observation size, action size or number of discrete actions) without building the simulator.

    The one source of a task's sizes: the footprint check, the cost model and the policy size all read it.
    """
    return simulator(task).dims(task.env_id)


def task_state_dim(task: TaskConfig) -> int | None:
    """Size of the simulator's privileged observations (a central value net's input); None when it has none."""
    return simulator(task).state_dim(task.env_id)


def make_vec_env(task: TaskConfig, num_envs: int, seed: int, sim_threads: int = 1,
                 device: str = "cpu", states: bool = False) -> GMIVecEnv:
    """Build the simulator of ``task`` for one GMI.

    ``states``: also return the simulator's privileged observations for a central value network
    (``{"obs", "states"}``, mjlab's critic group); simulators without them ignore it.
    """
    return simulator(task).make(task, num_envs, seed, sim_threads, device, states)


__all__ = ["ENVPOOL_DIMS", "SIMULATORS", "Simulator", "check_task", "make_vec_env", "task_dims", "task_state_dim"]
