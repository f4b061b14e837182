"""``train=rslrl``: rsl_rl's OnPolicyRunner and PPO in every GMI of tcg_ex, one group over the Plan's reduction.

Each GMI builds its own rsl_rl VecEnv (its share of ``batch.total_envs``, its device), the runner config
(mjlab's registered recipe for an mjlab task, then ``train.file``, then ``train.rslrl``), and the task's runner
class under :class:`gmiexp.rl.rslrl.runner.GMIRunnerMixin`. Group rank 0 keeps rsl_rl's checkpoints
(``<run_dir>/rsl_rl/model_<it>.pt``, rsl_rl's format), the policy record beside them
(:mod:`gmiexp.rl.rslrl.checkpoint`) and rsl_rl's TensorBoard log.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rsl_rl.runners import OnPolicyRunner

from gmiexp.rl.rlgames.runstate import resume_line
from gmiexp.rl.rslrl.checkpoint import check_state_fits, write_record
from gmiexp.rl.rslrl.config import CHECKPOINT_DIR, device_note, fit_batch, runner_config, trained_on
from gmiexp.rl.rslrl.envs import MJLAB_FACTORY, load_factory, mjlab_recipe
from gmiexp.rl.rslrl.hooks import require as require_hooks
from gmiexp.rl.rslrl.runner import StopTraining, gmi_runner
from gmiexp.rl.rslrl.runstate import CarriedObservations, run_segment
from gmiexp.rl.rslrl.sync import GroupSync
from gmiexp.role import Role


class RslRlRole(Role):
    """Holistic training GMI running rsl_rl: simulator + rsl_rl's rollout + rsl_rl's PPO update."""

    stops_gracefully = True  # the logger ends rsl_rl's loop after the iteration; group rank 0 checkpoints

    def run(self) -> dict[str, Any]:
        require_hooks()  # an rsl_rl release that changed an internal gmiexp overrides would train otherwise, silently
        plan, gmi = self.plan, self.ctx.gmi
        task, device = plan.task, str(self.device)
        group_ids = list(plan.trainer_group)
        rank, world = group_ids.index(gmi.id), len(group_ids)
        recipe, runner_base = mjlab_recipe(task.env_id) if task.simulator == "mjlab" else ({}, OnPolicyRunner)
        cfg = runner_config(recipe, plan.train.file, plan.train.rslrl)
        warning = fit_batch(cfg, gmi.num_envs, world)
        if warning and rank == 0:
            print(f"gmiexp: warning: {warning}", file=sys.stderr, flush=True)
        note = device_note(trained_on(recipe, plan.train.file), device, world)
        if note and rank == 0:  # Isaac Lab's agent.yaml names the device it trained on: say once where we train
            print(f"gmiexp: {note}", file=sys.stderr, flush=True)
        cfg["seed"] = gmi.seed  # gmiexp.planner.seeds: mjlab's and rsl_rl's habit, seed + rank
        cfg["logger"] = "tensorboard"  # W&B is written by the launcher from the history rows
        factory = load_factory(task.vec_env or MJLAB_FACTORY)
        env = factory(task.env_id, num_envs=gmi.num_envs, device=device, seed=gmi.env_seed, **dict(task.env_config))
        group = GroupSync(self.ctx.mgr, self.ctx.reduction, rank, world, seed=int(plan.seed)) if world > 1 else None
        log_dir = self.ctx.run_dir / CHECKPOINT_DIR if rank == 0 else None
        if log_dir is not None:  # mode=eval reads the task and runner config beside the checkpoints
            write_record(log_dir, cfg, task, plan.plan_id)
        runner = gmi_runner(runner_base)(CarriedObservations(env), cfg, str(log_dir) if log_dir else None,
                                         device, status=self.ctx.status, group=group,  # type: ignore[call-arg]
                                         check_sync=plan.train.check_sync, run_dir=self.ctx.run_dir,
                                         save_every=int(plan.train.save_frequency),
                                         info_key=plan.train.info_key)
        report = None
        if plan.checkpoint:
            check_state_fits(Path(plan.checkpoint), runner.alg.get_policy(), str(task.name))
            infos = runner.load(plan.checkpoint, map_location="cpu")  # load_state_dict copies onto the device
            # the checkpoint's ``iter`` is the last iteration it holds: go on after it, so frames count once
            # (rsl_rl's own resume repeats that iteration)
            runner.current_learning_iteration += 1
            # the next segment of its run (gmiexp.planner.seeds: gmi.env_seed is already this segment's)
            segment = runner.segment = run_segment(infos)
            report = {"segment": segment, **runner.resume_run(infos)}
            if rank == 0:
                print(resume_line(report, int(runner.current_learning_iteration), segment), file=sys.stderr,
                      flush=True)
        start = int(runner.current_learning_iteration)
        todo = max(0, int(plan.max_iterations) - start)
        # the run's frames as rsl_rl counts them (its num_steps_per_env, not train.horizon_length): the progress total
        total = int(plan.max_iterations) * int(cfg["num_steps_per_env"]) * plan.total_envs()
        self.ctx.status.beat(force=True, stage="training", total_frames=total)
        t0 = time.perf_counter()
        stopped = False
        try:
            # rsl_rl randomises episode lengths at a fresh start; environments a resume restored go on as they were
            runner.learn(todo, init_at_random_ep_len=not (report and report["simulator"]))
        except StopTraining:
            stopped = True
            if log_dir is not None:  # keep what was trained, in rsl_rl's format
                runner.save(str(log_dir / f"model_{runner.current_learning_iteration}.pt"))
        finally:
            runner.close_writer()
            if callable(getattr(env, "close", None)):  # rsl_rl's VecEnv does not require one
                env.close()
        log, done = runner.logger, int(runner.current_learning_iteration) + 1 - start
        return {
            "wall_s": time.perf_counter() - t0,
            "frames_local": done * int(cfg["num_steps_per_env"]) * gmi.num_envs,  # this GMI, this attempt
            "epochs": done,
            "reward/mean": (sum(log.finished) / len(log.finished)) if log.finished else None,
            "interrupted": stopped,
            "checkpoint_dir": str(log_dir) if log_dir else "",
            **({"resume": {**report, "env_seed": gmi.env_seed}} if report else {}),
        }

