"""The built-in role: rl-games PPO in every holistic training GMI (TCG_EX)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rl_games.common import env_configurations, vecenv
from rl_games.torch_runner import Runner

from gmiexp.config import TaskConfig
from gmiexp.envs import make_vec_env
from gmiexp.rl.rlgames import checkpoint
from gmiexp.rl.rlgames.agent import GMIContinuousAgent, GMIDiscreteAgent, GMISyncMixin
from gmiexp.rl.rlgames.observer import GMIObserver
from gmiexp.rl.rlgames.params import ENV_NAME, build_params
from gmiexp.rl.rlgames.record import write_record
from gmiexp.role import Role


def register_env(task: TaskConfig, sim_threads: int, device: str, holder: dict[str, Any]) -> None:
    """Register gmiexp's simulator with rl-games' env and vec-env registries."""

    def create(config_name: str, num_actors: int, **kwargs: Any) -> Any:
        env = make_vec_env(task, num_actors, seed=int(kwargs.get("seed", 0)), sim_threads=sim_threads,
                           device=device, states=bool(task.central_value))
        holder["env"] = env
        return env

    vecenv.register("GMIEXP", create)
    env_configurations.register(ENV_NAME, {"vecenv_type": "GMIEXP", "env_creator": lambda **kw: None})


class PPORole(Role):
    """Holistic training GMI: simulator + agent + trainer, gradients reduced across GMIs."""

    stops_gracefully = True  # GMI 0's agent ends rl-games' loop after the epoch (and rl-games checkpoints)

    def run(self) -> dict[str, Any]:
        plan, gmi = self.plan, self.ctx.gmi
        device = str(self.device)
        holder: dict[str, Any] = {}
        register_env(plan.task, gmi.sim_threads, device, holder)
        # W&B is written by the launcher (gmiexp.launch.wandb_sink)
        observer = GMIObserver(self.ctx.status, gmi.id, plan.train.info_key)
        runner = Runner(algo_observer=observer)
        ctx = self.ctx
        # a start from a checkpoint is the next segment of its run (gmiexp.planner.seeds): read it once, here,
        # and hand it to the agent, which restores from it and lets it go
        saved = {"state": checkpoint.load(plan.checkpoint)} if plan.checkpoint else {}
        segment = checkpoint.run_segment(saved.get("state"))

        def builder(cls: type[GMISyncMixin]) -> Callable[..., GMISyncMixin]:
            def build(**kw: Any) -> GMISyncMixin:
                agent = holder["agent"] = cls(kw["base_name"], kw["params"], ctx)
                if saved:
                    agent.starts_from(str(plan.checkpoint), saved.pop("state"), segment)
                return agent
            return build

        runner.algo_factory.register_builder("a2c_continuous", builder(GMIContinuousAgent))
        runner.algo_factory.register_builder("a2c_discrete", builder(GMIDiscreteAgent))
        params = build_params(plan, gmi, device=device)  # gmi.env_seed: the segment's (launch.requeue.resume)
        if gmi.id == 0:  # mode=eval reads the task and network beside the checkpoints
            write_record(params, plan.task, plan.plan_id)
        runner.load({"params": params})
        t0 = time.perf_counter()
        runner.run({"train": True, "play": False, "checkpoint": plan.checkpoint or None})
        wall = time.perf_counter() - t0
        agent = holder["agent"]
        env = holder.get("env")
        return {
            "wall_s": wall,
            "frames_local": int(env.steps) if env is not None else 0,
            "epochs": observer.epochs,
            "reward/mean": observer.last_reward,
            **{f"time/{k}": v for k, v in agent.timings.items()},
            "checkpoint_dir": str(agent.nn_dir) if gmi.id == 0 else "",
            **({"resume": {**agent.resume_report, "env_seed": gmi.env_seed}} if agent.resume_report else {}),
        }

