"""Spaces of the tasks gmiexp ships configs for, so ``mode=plan`` sizes them without importing a simulator.

envpool's import pulls in matplotlib, and Gymnasium's MuJoCo tasks import MuJoCo; planning must stay light
(tests/test_app.py). Any other id, or one with an ``env_config`` that may change its spaces, is asked of the
simulator itself (:meth:`gmiexp.envs.Simulator.spaces`). ``tests/envs/test_known_spaces.py`` holds every entry
equal to what the simulator reports.
"""

from __future__ import annotations

from gmiexp.envs.spaces import TaskSpaces


def _vec(obs: int, act: int) -> TaskSpaces:
    return TaskSpaces((obs,), "float32", "continuous", (act,))


def _disc(obs: int, n: int) -> TaskSpaces:
    return TaskSpaces((obs,), "float32", "discrete", (n,))


#: (simulator, env id) -> spaces with an empty ``env_config``
KNOWN_SPACES: dict[tuple[str, str], TaskSpaces] = {
    # envpool MuJoCo
    **{("envpool", k): _vec(o, a) for k, (o, a) in {
        "Ant-v4": (27, 8), "Humanoid-v4": (376, 17), "HalfCheetah-v4": (17, 6), "Hopper-v4": (11, 3),
        "Walker2d-v4": (17, 6), "Swimmer-v4": (8, 2), "Reacher-v4": (11, 2), "Pusher-v4": (23, 7),
        "InvertedPendulum-v4": (4, 1), "InvertedDoublePendulum-v4": (11, 1), "HumanoidStandup-v4": (376, 17),
    }.items()},
    # envpool Atari (frames stacked by envpool: stack_num 4, 84 x 84 grey)
    ("envpool", "Pong-v5"): TaskSpaces((4, 84, 84), "uint8", "discrete", (6,)),
    ("envpool", "Breakout-v5"): TaskSpaces((4, 84, 84), "uint8", "discrete", (4,)),
    # envpool dm_control (dict observations, flattened)
    ("envpool", "WalkerWalk-v1"): _vec(24, 6),
    ("envpool", "CheetahRun-v1"): _vec(17, 6),
    # envpool classic control and Box2D
    ("envpool", "CartPole-v1"): _disc(4, 2),
    ("envpool", "Pendulum-v1"): _vec(3, 1),
    ("envpool", "BipedalWalker-v3"): _vec(24, 4),
    ("envpool", "LunarLander-v2"): _disc(8, 4),
    ("envpool", "LunarLanderContinuous-v2"): _vec(8, 2),
    # Gymnasium
    ("gymnasium", "CartPole-v1"): _disc(4, 2),
    ("gymnasium", "Pendulum-v1"): _vec(3, 1),
    ("gymnasium", "Ant-v5"): _vec(105, 8),
    ("gymnasium", "HalfCheetah-v5"): _vec(17, 6),
    # torch-native
    ("torch", "Cartpole"): _disc(4, 2),
}
