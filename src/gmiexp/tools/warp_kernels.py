"""Compile mjlab's Warp kernels into the kernel cache before a run: ``python -m gmiexp.tools.warp_kernels TASK...``.

MuJoCo Warp compiles its kernels on first use: ~30 s for Cartpole on a 2-core host, 10-15 s more per robot, in
every process that meets a cold cache at once. Two GMIs of one run, the jobs of a Slurm array or two test workers
each compile the same modules and only the last rename wins. Compiling once ahead (on a login node into the cache
the jobs share, or in ``make venv`` for the test suite's cache beside the venv) makes every later process load them.

Each task's environment is built on ``--device`` with two environments and an episode of two steps, reset and
stepped until both time out and reset, then saved and restored: the kernels a training epoch runs (reset, step,
partial reset) and those of a checkpoint's environment state (:mod:`gmiexp.envs.mjlab_state`). The cache is
``WARP_CACHE_PATH`` when set, else gmiexp's own (:func:`gmiexp.envs.warp_cache.default_warp_cache`). Unknown ids exit
2 naming mjlab's registered ones.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from gmiexp.config import mjlab_tasks
from gmiexp.envs import INSTALL_HINT
from gmiexp.envs.mjlab_env import MjlabVecEnv, stdout_to_stderr
from gmiexp.envs.mjlab_state import env_state, set_env_state
from gmiexp.envs.warp_cache import configure_warp_cache

STEPS = 3  # an episode of 2 steps: the third step follows both environments' time-out and reset


def compile_kernels(task_id: str, device: str = "cpu") -> float:
    """Build ``task_id``'s environment on ``device``, reset it and step it through a time-out; returns the seconds."""
    start = time.perf_counter()
    env = MjlabVecEnv(task_id, num_envs=2, seed=0, device=device, max_episode_length=2, states=True)
    try:
        env.reset()
        zeros = torch.zeros(2, env.action_space.shape[-1])
        for _ in range(STEPS):
            env.step(zeros)
        with stdout_to_stderr():  # Warp reports each module it loads on stdout, which carries this tool's lines
            set_env_state(env.env, env_state(env.env))  # a checkpoint's save and a resume's restore
    finally:
        env.close()
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gmiexp.tools.warp_kernels", description=__doc__.splitlines()[0])
    p.add_argument("tasks", nargs="+", metavar="TASK", help="mjlab task ids, e.g. Mjlab-Cartpole-Balance")
    p.add_argument("--device", default="cpu", help="where the kernels run: cpu (default) or cuda:N")
    a = p.parse_args(argv)
    if not mjlab_tasks.available():
        print(f"gmiexp.tools.warp_kernels: {INSTALL_HINT}", file=sys.stderr)
        return 2
    valid = sorted(mjlab_tasks.registered())
    bad = [t for t in a.tasks if t not in valid]
    if bad:
        print(f"gmiexp.tools.warp_kernels: invalid task: {', '.join(map(repr, bad))}; valid: {', '.join(valid)}",
              file=sys.stderr)
        return 2
    cache = configure_warp_cache()
    for task in a.tasks:
        print(f"gmiexp.tools.warp_kernels: {task} on {a.device}: {compile_kernels(task, a.device):.1f} s "
              f"(cache: {cache})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
