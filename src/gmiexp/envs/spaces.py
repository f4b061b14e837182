"""A task's observation and action spaces, as gmiexp plans, sizes and builds policies from them.

:class:`TaskSpaces` is plain data (no gymnasium, no torch), so ``mode=plan`` can size a task from a table;
:meth:`TaskSpaces.of` reads it from gymnasium spaces (a simulator's, or its spec's) when one is at hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: action kinds, as rl-games' ``network.space`` names them
ACTION_KINDS = ("continuous", "discrete", "multi_discrete")
#: observation dtypes a simulator hands the model (uint8 frames reach the model as bytes; rl-games divides by 255)
OBS_DTYPES = ("float32", "uint8")


@dataclass(frozen=True)
class TaskSpaces:
    """Observation shape and dtype; action kind and sizes.

    ``action_dims``: continuous ``(n,)`` (action vector length), discrete ``(n,)`` (number of actions),
    multi_discrete ``(n1, n2, ...)`` (actions of each discrete branch).
    """

    obs_shape: tuple[int, ...]
    obs_dtype: str
    action: str
    action_dims: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.obs_dtype not in OBS_DTYPES:
            raise ValueError(f"obs_dtype {self.obs_dtype!r} not one of {OBS_DTYPES}")
        if self.action not in ACTION_KINDS:
            raise ValueError(f"action {self.action!r} not one of {ACTION_KINDS}")
        if not self.action_dims or (self.action != "multi_discrete" and len(self.action_dims) != 1):
            raise ValueError(f"action_dims {self.action_dims} do not fit a {self.action} action")

    @property
    def obs_size(self) -> int:
        """Numbers in one observation (the model's input width once flattened)."""
        return math.prod(self.obs_shape)

    @property
    def obs_bytes(self) -> int:
        return self.obs_size * (1 if self.obs_dtype == "uint8" else 4)

    @property
    def continuous(self) -> bool:
        return self.action == "continuous"

    @property
    def actions_num(self) -> int:
        """Outputs of the policy head: means (continuous) or logits (discrete: n, multi-discrete: the sum)."""
        return sum(self.action_dims)

    @property
    def action_width(self) -> int:
        """Numbers in one action as the simulator steps it (an index per discrete branch)."""
        return self.action_dims[0] if self.continuous else len(self.action_dims)

    def dims(self) -> tuple[int, int]:
        """(observation size, policy head outputs): the sizes the cost model and the footprint read."""
        return self.obs_size, self.actions_num

    @classmethod
    def of(cls, observation_space: Any, action_space: Any) -> TaskSpaces:
        """From gymnasium spaces.

        Observations: a Box (float or uint8) or a Dict of Boxes (flattened); actions: a Box vector, Discrete,
        MultiDiscrete or a Tuple of Discretes.
        """
        import gymnasium as gym
        import numpy as np

        obs = observation_space
        if isinstance(obs, gym.spaces.Dict):
            shape: tuple[int, ...] = (sum(math.prod(s.shape) for s in obs.spaces.values()),)
            dtype = "float32"
        elif isinstance(obs, gym.spaces.Box):
            shape, dtype = tuple(int(d) for d in obs.shape), "uint8" if obs.dtype == np.uint8 else "float32"
        else:
            raise ValueError(f"observation space {obs} is not a Box or a Dict of Boxes")
        act = action_space
        if isinstance(act, gym.spaces.Discrete):
            return cls(shape, dtype, "discrete", (int(act.n),))
        if isinstance(act, gym.spaces.MultiDiscrete) and act.nvec.ndim == 1:
            return cls(shape, dtype, "multi_discrete", tuple(int(n) for n in act.nvec))
        if isinstance(act, gym.spaces.Tuple) and all(isinstance(a, gym.spaces.Discrete) for a in act.spaces):
            return cls(shape, dtype, "multi_discrete", tuple(int(a.n) for a in act.spaces))
        if isinstance(act, gym.spaces.Box) and len(act.shape) == 1:
            return cls(shape, dtype, "continuous", (int(act.shape[0]),))
        raise ValueError(f"action space {act} is not a Box vector, Discrete, MultiDiscrete or Tuple of Discretes")
