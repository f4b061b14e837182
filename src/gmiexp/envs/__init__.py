"""Simulators: envpool (CPU default), gymnasium, torch-native Cartpole, mjlab (MuJoCo Warp, GPU), isaacgym (opt-in).

Each is a :class:`Simulator` registered in :data:`SIMULATORS` by name (``task.simulator``). A simulator
checks a task and describes its spaces (:class:`~gmiexp.envs.spaces.TaskSpaces`) without importing its adapter
(rl-games, torch), and the tasks gmiexp ships are sized from a table (:mod:`gmiexp.envs.known`), so ``mode=plan``
stays light; only :meth:`Simulator.make` imports the adapter. A new simulator is one
registered class (in any module imported before the run) plus its adapter and its ``conf/task`` YAML.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from gmiexp.config import mjlab_tasks
from gmiexp.config.igym import ISAAC_DIMS
from gmiexp.envs.known import KNOWN_SPACES
from gmiexp.envs.spaces import TaskSpaces
from gmiexp.errors import ConfigError, invalid
from gmiexp.registry import Registry

if TYPE_CHECKING:  # the adapters import rl-games and torch; mode=plan and mode=doctor must not
    from gmiexp.config import TaskConfig
    from gmiexp.envs.vecenv import GMIVecEnv

TORCH_TASKS = ("Cartpole",)


# mjlab task id -> (actor obs, actions, critic obs), so planning builds no task (a rough terrain takes ~40 s):
# every task mjlab 1.6.0 registers that runs here (tests hold it equal to mjlab's own); the camera groups of the
# Yam vision tasks are not in it. A registered id it lacks is sized by building it (:func:`mjlab_dims`)
MJLAB_DIMS = {
    "Mjlab-Cartpole-Balance": (5, 1, 5),
    "Mjlab-Cartpole-Swingup": (5, 1, 5),
    "Mjlab-Lift-Cube-Yam": (29, 7, 29),
    "Mjlab-Lift-Cube-Yam-Depth": (26, 7, 29),
    "Mjlab-Lift-Cube-Yam-Rgb": (26, 7, 29),
    "Mjlab-Multi-Cube-Seg-Yam": (26, 7, 26),
    "Mjlab-Velocity-Flat-Unitree-G1": (99, 29, 111),
    "Mjlab-Velocity-Flat-Unitree-Go1": (48, 12, 72),
    "Mjlab-Velocity-Rough-Unitree-G1": (286, 29, 298),
    "Mjlab-Velocity-Rough-Unitree-Go1": (235, 12, 259),
}


def mjlab_dims(env_id: str) -> tuple[int, int, int]:
    """:data:`MJLAB_DIMS` of a task, or, for a registered id the table lacks, mjlab's own (builds it on the CPU)."""
    if env_id in MJLAB_DIMS:
        return MJLAB_DIMS[env_id]
    from gmiexp.envs.mjlab_env import observation_dims

    return observation_dims(env_id)


INSTALL_HINT = "mjlab is not installed: `pip install -e '.[mjlab]' -c <file pinning your installed torch>` " \
               "(or `make venv`, which does that)"




class Simulator(ABC):
    """How gmiexp checks, sizes and builds one simulator's tasks."""

    #: modules a warm start's server imports ahead of this simulator's GMIs (:mod:`gmiexp.launch.warm`); only
    #: those whose import touches no device and starts no thread
    warm: tuple[str, ...] = ()
    #: False: the simulator must be imported before torch, so its GMIs start in a fresh interpreter (cold)
    fork_safe: bool = True

    @abstractmethod
    def check(self, task: TaskConfig) -> None:
        """ConfigError (exit 2) for a task this simulator cannot run here (its id, its ``env_config``)."""

    def spaces(self, task: TaskConfig) -> TaskSpaces:
        """The task's spaces, from :data:`KNOWN_SPACES` when its ``env_config`` is empty, else the simulator's."""
        known = KNOWN_SPACES.get((task.simulator, task.env_id))
        if known is not None and not self.spaces_config(task):
            return known
        return self.query_spaces(task)

    def spaces_config(self, task: TaskConfig) -> dict:
        """What of ``task.env_config`` may change the spaces (all of it unless a simulator knows better)."""
        return dict(task.env_config)

    def query_spaces(self, task: TaskConfig) -> TaskSpaces:
        """Ask the simulator (may import it); simulators whose every task is in the table need not."""
        raise invalid(f"{task.simulator} env_id", task.env_id,
                      [k for s, k in KNOWN_SPACES if s == task.simulator])

    def state_dim(self, env_id: str) -> int | None:
        """Size of the privileged observations (``states``) it returns for a central value net; None: none."""
        return None

    def saved_state_bytes(self, task: TaskConfig, num_envs: int) -> int:
        """Bytes of the simulator's state a checkpoint holds for one GMI's ``num_envs`` environments.

        Its vec env's ``get_env_state``; 0: it saves none, or its size is not known before the simulator is built.
        """
        return 0

    @abstractmethod
    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        """The vectorised environment of one GMI (imports the adapter)."""


#: a torch CPU generator's state (``torch.Generator.get_state``, 5,056 bytes) as ``torch.save`` writes it
TORCH_GENERATOR_BYTES = 6633

#: Every simulator by name (``task.simulator``); the built-ins below register themselves.
SIMULATORS: Registry[type[Simulator]] = Registry("task.simulator")


#: keys of rl-games' envpool vec-env (``rl_games/envs/envpool.py``), not envpool's. ``flatten_obs``: gmiexp always
#: flattens dict observations; ``has_lives``: only rl-games' ``scores`` statistic reads it (gmiexp reports episode
#: returns); ``env_type``: the API flavour (gmiexp uses gymnasium's; same environments).
WRAPPER_KEYS = ("has_lives", "flatten_obs", "env_type", "use_dict_obs_space")


def envpool_kwargs(env_config: dict[str, Any]) -> dict[str, Any]:
    """What of a task's ``env_config`` goes to ``envpool.make`` / ``make_spec``."""
    return {k: v for k, v in env_config.items() if k not in WRAPPER_KEYS}


@SIMULATORS.register("envpool")
class Envpool(Simulator):
    """envpool's families as envpool ships them: MuJoCo, Atari, dm_control, classic control, Box2D."""

    warm = ("envpool", "gmiexp.envs.envpool_env")

    def check(self, task: TaskConfig) -> None:
        if (task.simulator, task.env_id) in KNOWN_SPACES and not task.env_config:
            return
        import envpool

        known = envpool.list_all_envs()
        if task.env_id not in known:
            stem = task.env_id.split("-")[0].lower()
            close = [e for e in known if e.lower().startswith(stem[:4])]
            raise invalid("envpool env_id", task.env_id, close or known[:20])
        options = set(envpool.make_spec(task.env_id).config._fields) - OWNED_KEYS
        for key in envpool_kwargs(dict(task.env_config)):
            if key not in options:
                raise invalid(f"task.env_config key for envpool {task.env_id}", key,
                              sorted(options | set(WRAPPER_KEYS)))
        if task.env_config.get("use_dict_obs_space"):
            raise invalid("task.env_config.use_dict_obs_space", True, (False,),
                          "gmiexp's policies take one observation tensor")

    def spaces_config(self, task: TaskConfig) -> dict:
        return envpool_kwargs(dict(task.env_config))

    def query_spaces(self, task: TaskConfig) -> TaskSpaces:
        import envpool

        spec = envpool.make_spec(task.env_id, **self.spaces_config(task))
        return TaskSpaces.of(spec.observation_space, spec.action_space)

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.envpool_env import EnvpoolVecEnv

        return EnvpoolVecEnv(task.env_id, num_envs, seed=seed, num_threads=sim_threads,
                             max_episode_length=task.max_episode_length, device=device,
                             env_config=dict(task.env_config))


@SIMULATORS.register("gymnasium")
class Gymnasium(Simulator):
    """Any registered Gymnasium id, vectorised by Gymnasium (rl-games' ``openai_gym`` files)."""

    warm = ("gymnasium", "gmiexp.envs.gymnasium_env")

    def check(self, task: TaskConfig) -> None:
        import gymnasium

        if task.env_id not in gymnasium.registry:
            stem = task.env_id.split("-")[0]
            close = sorted(k for k in gymnasium.registry if k.split("-")[0] == stem)
            raise invalid("gymnasium env_id", task.env_id, close or sorted(gymnasium.registry)[:20])
        if task.env_config:  # the constructor's keyword arguments (imports the environment's module)
            import inspect

            entry = gymnasium.registry[task.env_id].entry_point
            ctor = gymnasium.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
            params = inspect.signature(ctor).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
                for key in task.env_config:
                    if key not in params:
                        raise invalid(f"task.env_config key for gymnasium {task.env_id}", key,
                                      sorted(k for k in params if k != "self"))

    def query_spaces(self, task: TaskConfig) -> TaskSpaces:
        import gymnasium

        env = gymnasium.make(task.env_id, **dict(task.env_config))
        try:
            return TaskSpaces.of(env.observation_space, env.action_space)
        finally:
            env.close()

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.gymnasium_env import GymnasiumVecEnv

        return GymnasiumVecEnv(task.env_id, num_envs, seed=seed, max_episode_length=task.max_episode_length,
                               device=device, env_config=dict(task.env_config))


@SIMULATORS.register("torch")
class TorchNative(Simulator):
    warm = ("gmiexp.envs.cartpole",)
    def check(self, task: TaskConfig) -> None:
        if task.env_id not in TORCH_TASKS:
            raise invalid("torch task", task.env_id, TORCH_TASKS)
        no_env_config(task)

    def saved_state_bytes(self, task: TaskConfig, num_envs: int) -> int:
        """``TorchCartpole.get_state``: its state (float32) and step counts (int64) a row, and its generator."""
        obs, _ = self.spaces(task).dims()
        return num_envs * (4 * obs + 8) + TORCH_GENERATOR_BYTES

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.cartpole import CartpoleVecEnv

        return CartpoleVecEnv(num_envs, seed=seed, max_episode_length=task.max_episode_length, device=device)


@SIMULATORS.register("mjlab")
class Mjlab(Simulator):
    # registering mjlab's tasks imports MuJoCo Warp and every task config (about 11 s on a 2-core host): once in the
    # server, not in every GMI. Importing them initialises no Warp runtime, no CUDA and starts no thread (Warp
    # reads WARP_CACHE_PATH when it initialises, in the GMI: gmiexp.envs.warp_cache)
    warm = ("mjlab.tasks", "gmiexp.envs.mjlab_env")

    def check(self, task: TaskConfig) -> None:
        if task.env_id not in MJLAB_DIMS:  # a registered id the table lacks: one that cannot run here is refused
            if task.env_id not in mjlab_tasks.registered():
                raise invalid("mjlab env_id", task.env_id, sorted({*MJLAB_DIMS, *mjlab_tasks.registered()}),
                              "" if mjlab_tasks.available() else INSTALL_HINT)
            mjlab_tasks.check_host(task.env_id)
        no_env_config(task)
        if not mjlab_tasks.available():
            raise ConfigError(INSTALL_HINT)

    def spaces(self, task: TaskConfig) -> TaskSpaces:
        obs, act, _critic = mjlab_dims(task.env_id)
        return TaskSpaces((obs,), "float32", "continuous", (act,))

    def state_dim(self, env_id: str) -> int | None:
        return mjlab_dims(env_id)[2]

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.mjlab_env import MjlabVecEnv

        return MjlabVecEnv(task.env_id, num_envs, seed=seed, device=device,
                           max_episode_length=task.max_episode_length, states=states)


@SIMULATORS.register("isaacgym")
class IsaacGym(Simulator):
    fork_safe = False  # isaacgym refuses to load after torch
    def check(self, task: TaskConfig) -> None:
        from gmiexp.envs.isaacgym_env import check

        check(task.env_id)
        no_env_config(task)

    def spaces(self, task: TaskConfig) -> TaskSpaces:
        obs, act = ISAAC_DIMS[task.env_id]
        return TaskSpaces((obs,), "float32", "continuous", (act,))

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        from gmiexp.envs.isaacgym_env import IsaacGymVecEnv

        return IsaacGymVecEnv(task.env_id, num_envs, seed=seed, device=device)


#: ``env_config`` keys gmiexp sets itself, from other fields: never passed through
OWNED_KEYS = frozenset({"env_name", "seed", "num_envs", "batch_size", "num_threads", "max_episode_steps"})


def no_env_config(task: TaskConfig) -> None:
    if task.env_config:
        raise invalid("task.env_config", dict(task.env_config), "{} (the " + task.simulator +
                      " simulator takes no extra arguments; envpool and gymnasium do)")


def simulator(task: TaskConfig) -> Simulator:
    """The task's simulator (ConfigError, exit 2, naming the registered ones otherwise)."""
    return SIMULATORS.get(task.simulator)()


def check_task(task: TaskConfig) -> None:
    """Validate the task before anything launches (exit 2 on a bad one)."""
    sim = simulator(task)
    sim.check(task)
    kind = task_spaces(task).action
    if task.continuous != (kind == "continuous"):
        raise ConfigError(f"task.continuous={task.continuous} does not match task {task.env_id!r} "
                          f"({task.simulator}), whose actions are {kind}")


def task_spaces(task: TaskConfig) -> TaskSpaces:
    """The task's observation and action spaces without building the simulator (a table, or its spec)."""
    return simulator(task).spaces(task)


def task_dims(task: TaskConfig) -> tuple[int, int]:
    """(observation size, policy head outputs: action size or number of discrete actions) of :func:`task_spaces`.

    The one source of a task's sizes: the footprint check, the cost model and the policy size all read it.
    """
    return task_spaces(task).dims()


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


__all__ = ["KNOWN_SPACES", "SIMULATORS", "Simulator", "TaskSpaces", "check_task", "make_vec_env", "task_dims",
           "task_spaces", "task_state_dim"]
