"""Steps/s of cart-pole implementations against the number of environments (seed 002, Figs. 4 and 8).

gym_loop: gymnasium CartPole-v1 stepped env by env (SyncVectorEnv, a Python loop);
envpool: C++ batched CartPole-v1; torch_env: gmiexp's TorchCartpole.step (what training uses);
torch_eager: the fused-step function run eagerly, one step per call; torch_compile_k1 / _k:
the same function under torch.compile with 1 or K steps per call (K steps fused into one graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import hydra
import numpy as np
import torch
from omegaconf import DictConfig

from gmiexp.envs.torch_cartpole import TorchCartpole, failed, physics_step
from gmiexp.rundir import write_csv

HERE = Path(__file__).resolve().parent


def k_steps(state: torch.Tensor, actions: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
    """K physics steps with same-step reset of failed envs (branch-free, so it compiles to one graph)."""
    for k in range(actions.shape[0]):
        state = physics_step(state, actions[k])
        state = torch.where(failed(state)[:, None], reset, state)
    return state


def timed(step: Callable[[], None], steps_per_call: int, n: int, min_time_s: float) -> float:
    step()  # warm-up (allocations, compilation)
    calls, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < min_time_s or calls < 3:
        step()
        calls += 1
    return n * steps_per_call * calls / elapsed


def gym_loop(n: int, cfg: DictConfig) -> Callable[[], None]:
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)],
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    env.reset(seed=0)
    acts = np.random.default_rng(0).integers(0, 2, n)
    return lambda: env.step(acts)


def envpool_env(n: int, cfg: DictConfig) -> Callable[[], None]:
    import envpool

    env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=n, num_threads=cfg.threads, seed=0)
    env.reset()
    acts = np.random.default_rng(0).integers(0, 2, n)
    return lambda: env.step(acts)


def torch_env(n: int, cfg: DictConfig) -> Callable[[], None]:
    env = TorchCartpole(n, seed=0, device=cfg.device)
    env.reset()
    acts = torch.randint(0, 2, (n,), device=cfg.device)
    return lambda: env.step(acts)


def fused(fn: Callable, k: int) -> Callable[[int, DictConfig], Callable[[], None]]:
    def make(n: int, cfg: DictConfig) -> Callable[[], None]:
        state = TorchCartpole(n, seed=0, device=cfg.device).reset()
        acts = torch.randint(0, 2, (k, n), device=cfg.device)
        reset = torch.full((n, 4), 0.01, device=cfg.device)

        def step() -> None:
            nonlocal state
            state = fn(state, acts, reset)
            if state.is_cuda:
                torch.cuda.synchronize()

        return step

    return make


def methods(cfg: DictConfig) -> dict[str, tuple[Callable, int]]:
    """name -> (factory(n, cfg) -> step(), env steps per call)."""
    compiled = torch.compile(k_steps, dynamic=True)
    k = cfg.fused_steps
    return {"gym_loop": (gym_loop, 1), "envpool": (envpool_env, 1), "torch_env": (torch_env, 1),
            "torch_eager": (fused(k_steps, 1), 1), "torch_compile_k1": (fused(compiled, 1), 1),
            f"torch_compile_k{k}": (fused(compiled, k), k)}


def run(cfg: DictConfig) -> list[dict]:
    torch.set_num_threads(cfg.threads)
    table = methods(cfg)
    wanted = [m if m != "torch_compile_k" else f"torch_compile_k{cfg.fused_steps}" for m in cfg.methods]
    rows = []
    for name in wanted:
        make, per_call = table[name]
        for n in cfg.num_envs:
            if name == "gym_loop" and n > cfg.max_loop_envs:
                continue
            sps = timed(make(n, cfg), per_call, n, cfg.min_time_s)
            rows.append({"method": name, "num_envs": n, "steps_per_s": round(sps, 1), "device": cfg.device})
            print(f"{name:20s} N={n:>8d} {sps:>14,.0f} steps/s", flush=True)
    return rows


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    out = Path(cfg.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = run(cfg)
    write_csv(rows, out / "vectorization_fusion.csv")
    from plot import plot  # noqa: PLC0415 - sibling script

    print(f"wrote {out / 'vectorization_fusion.csv'} and {plot(out)}")


if __name__ == "__main__":
    main()
