"""Env steps/s of mjlab (MuJoCo Warp), envpool (C++ MuJoCo) and the torch-native Cartpole, 1 and 2 GMIs.

Every (simulator, GMIs) point keeps its worker processes for the whole run (mjlab's import and kernel
loading happen once, untimed); the main process then interleaves the points repeat by repeat, starting
a point's workers together and summing their env steps over the same wall-clock window.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gmiexp.rundir import write_csv

CONF = Path(__file__).resolve().parents[2] / "conf" / "task"


def task_of(name: str) -> dict[str, Any]:
    """The task config users select with ``task=<name>`` (conf/task/<name>.yaml)."""
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"), resolve=True)
    cfg.pop("defaults", None)
    return cfg


def worker(task: dict[str, Any], num_envs: int, seed: int, device: str, threads: int, warmup: int,
           conn: Connection) -> None:
    """Build the GMI's simulator, warm it up, then step on every ("go", seconds) until ("stop",)."""
    import torch

    from gmiexp.config import TaskConfig
    from gmiexp.envs import make_vec_env

    torch.set_num_threads(threads)
    env = make_vec_env(TaskConfig(**task), num_envs, seed=seed, sim_threads=threads, device=device)
    env.reset()
    info = env.get_env_info()["action_space"]
    dev = getattr(env, "device", torch.device(device))

    def actions() -> torch.Tensor:
        if task["continuous"]:
            return torch.rand(num_envs, info.shape[0], device=dev) * 2 - 1
        return torch.randint(0, int(info.n), (num_envs,), device=dev)

    for _ in range(warmup):
        env.step(actions())
    conn.send("ready")
    while (msg := conn.recv())[0] == "go":
        steps, t0 = 0, time.perf_counter()
        deadline = t0 + msg[1]
        while time.perf_counter() < deadline:
            env.step(actions())
            steps += num_envs
        if str(dev).startswith("cuda"):
            torch.cuda.synchronize(dev)
        conn.send((steps, time.perf_counter() - t0))
    close = getattr(env, "close", None)
    if callable(close):
        close()


class Point:
    """One (simulator, GMIs) configuration and its live worker processes."""

    def __init__(self, ctx: Any, sim: str, gmis: int, cfg: DictConfig) -> None:
        self.sim, self.gmis = sim, gmis
        threads = cfg.threads or max(1, (os.cpu_count() or 1) // gmis)
        self.conns, self.procs = [], []
        for g in range(gmis):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker, args=(task_of(sim), cfg.num_envs, 1000 * g, cfg.device, threads,
                                                 cfg.warmup_steps, child), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        for c in self.conns:
            if c.recv() != "ready":
                raise RuntimeError(f"{sim} worker failed to start")

    def measure(self, seconds: float) -> float:
        for c in self.conns:
            c.send(("go", seconds))
        results = [c.recv() for c in self.conns]
        return sum(s for s, _ in results) / max(w for _, w in results)

    def close(self) -> None:
        for c in self.conns:
            c.send(("stop",))
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def run(cfg: DictConfig) -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")
    points: list[Point] = []
    try:
        for sim in cfg.simulators:
            for g in cfg.gmis:
                print(f"starting {sim} x {g} GMI(s)", file=sys.stderr, flush=True)
                points.append(Point(ctx, sim, g, cfg))
        rates: dict[tuple[str, int], list[float]] = {(p.sim, p.gmis): [] for p in points}
        for rep in range(cfg.repeats):
            for p in points:  # interleaved: every point once per repeat
                rates[(p.sim, p.gmis)].append(p.measure(cfg.seconds))
            print(f"repeat {rep + 1}/{cfg.repeats} done", file=sys.stderr, flush=True)
    finally:
        for p in points:
            p.close()
    return [{"simulator": sim, "backend": task_of(sim)["simulator"], "gmis": g, "num_envs_per_gmi": cfg.num_envs,
             "device": cfg.device, "env_steps_per_s": round(statistics.median(v), 1),
             "min": round(min(v), 1), "max": round(max(v), 1), "repeats": len(v)} for (sim, g), v in rates.items()]


def table(rows: list[dict[str, Any]], device: str) -> str:
    by = {(r["simulator"], r["gmis"]): r["env_steps_per_s"] for r in rows}
    sims = list(dict.fromkeys(r["simulator"] for r in rows))
    gmis = sorted({r["gmis"] for r in rows})
    head = f"{'simulator':14s} {'backend':8s} " + " ".join(f"{f'{g} GMI(s)':>12s}" for g in gmis)
    if len(gmis) > 1:
        head += f" {f'{gmis[-1]}/{gmis[0]} GMIs':>11s}"
    lines = [f"env steps/s on {device} (median of repeats; total over the GMIs)", head]
    for s in sims:
        backend = next(r["backend"] for r in rows if r["simulator"] == s)
        line = f"{s:14s} {backend:8s} " + " ".join(f"{by.get((s, g), 0):>12,.0f}" for g in gmis)
        if len(gmis) > 1 and by.get((s, gmis[0])):
            line += f" {by[(s, gmis[-1])] / by[(s, gmis[0])]:>11.2f}"
        lines.append(line)
    mj = [s for s in sims if s.startswith("Mjlab") or s in ("Go1", "G1")]
    native = [s for s in sims if s in ("Ant", "Humanoid")]
    if mj and native:
        g = gmis[0]
        for m in mj:
            for n in native:
                lines.append(f"{m} / {n} ({g} GMI): {by[(m, g)] / by[(n, g)]:.3f}")
    if device == "cpu":
        lines.append("On a CPU, MuJoCo Warp (mjlab) is much slower than native C++ MuJoCo (envpool): Warp's kernels "
                     "are built for GPUs. mjlab's point is the GPU, where Isaac Gym cannot run on Hopper.")
    return "\n".join(lines)


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    out = Path(cfg.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = run(cfg)
    write_csv(rows, out / "simulators.csv")
    print(table(rows, cfg.device))
    print(f"wrote {out / 'simulators.csv'}")


if __name__ == "__main__":
    main()
