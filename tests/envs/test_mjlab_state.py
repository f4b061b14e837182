"""An mjlab environment's state put into a fresh one steps on exactly as the original (gmiexp.envs.mjlab_state).

An environment steps (episode lengths randomised, so episodes end and reset events draw), its state is saved, and it
steps on under fixed actions; a fresh environment of another seed, never stepped, takes the state and steps under the
same actions: every observation, reward and done is the same, bit for bit. Cartpole (a reset event, an action
term, a reward and a time-out), and Go1 on flat ground (commands, observation noise, pushes, contact sensors,
curricula, terminations on falls).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

from gmiexp.envs.mjlab_state import StateMismatch, env_state, set_env_state  # noqa: E402
from gmiexp.rl.rslrl.envs import mjlab_vec_env  # noqa: E402


def steps(env: object, n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        obs, rew, done, _ = env.step(torch.randn(env.num_envs, env.num_actions, generator=gen))  # type: ignore[attr-defined]
        out.append((obs["actor"].clone(), rew.clone(), done.clone()))
    return out


@pytest.mark.slow  # each builds two environments and compiles MuJoCo Warp's state kernels the first time
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("task", "n"), [("Mjlab-Cartpole-Balance", 60), ("Mjlab-Velocity-Flat-Unitree-Go1", 60)])
def test_a_fresh_environment_given_the_state_steps_on_as_the_original(task: str, n: int) -> None:
    a = mjlab_vec_env(task, num_envs=4, device="cpu", seed=3)
    a.episode_length_buf = torch.randint_like(a.episode_length_buf, high=int(a.max_episode_length))
    steps(a, 20, seed=1)
    state, streams = env_state(a.unwrapped), torch.get_rng_state()
    want = steps(a, n, seed=2)
    b = mjlab_vec_env(task, num_envs=4, device="cpu", seed=99)
    set_env_state(b.unwrapped, state)
    torch.set_rng_state(streams)  # the process's generators are the runner's to keep (gmiexp.rl.rslrl.runstate)
    got = steps(b, n, seed=2)
    differ = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not all(torch.equal(x, y) for x, y in zip(g, w, strict=True))]
    assert not differ, f"{len(differ)} of {n} steps differ, the first at step {differ[0]}"
    if task.startswith("Mjlab-Cartpole"):
        other = mjlab_vec_env(task, num_envs=2, device="cpu", seed=5)
        with pytest.raises(StateMismatch, match="worlds"):
            set_env_state(other.unwrapped, state)
