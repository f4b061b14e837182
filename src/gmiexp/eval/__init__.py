"""``mode=eval checkpoint=<.pth | model_<it>.pt>``: play a trained policy on the task it was trained on.

An rl-games checkpoint plays through rl-games' player (:mod:`gmiexp.eval.policy`), an rsl_rl one (``model_<it>.pt``
of a ``train=rslrl`` run, mjlab or Isaac Lab) through rsl_rl's runner (:mod:`gmiexp.eval.rslrl`). Everything is
checked before an episode runs (exit 2 on a bad checkpoint, a task that does not match, a video that cannot be
made); the policy runs in this process, on the recorded task's simulator, ``eval.episodes`` episodes side by side.
Writes ``summary.json`` (``eval/return_mean``, ``eval/return_std``, ``eval/length_mean``) and prints a one-line
summary. ``eval.video=true`` (or IsaacGymEnvs' ``capture_video=True``) films one episode into ``eval.mp4``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

from gmiexp.config import Config, EvalConfig, TaskConfig
from gmiexp.envs import check_task, make_vec_env, task_spaces
from gmiexp.envs.video import open_filmer
from gmiexp.errors import invalid
from gmiexp.eval.episodes import Episodes, play
from gmiexp.eval.policy import check_fits, load_checkpoint, make_player, restore, start_episodes
from gmiexp.eval.rslrl import play_rslrl
from gmiexp.eval.task import TASK_IDENTITY, check_task_matches, requested_task
from gmiexp.planner.build import build_plan
from gmiexp.rl.rlgames.fit import check_checkpoint_fits
from gmiexp.rl.rlgames.params import build_params
from gmiexp.rl.rlgames.record import RECORD, read_record
from gmiexp.rl.rslrl.checkpoint import read_state

__all__ = ["TASK_IDENTITY", "check_eval", "check_task_matches", "one_line", "requested_task", "run_eval"]


def check_eval(e: EvalConfig) -> None:
    if e.episodes < 1:
        raise invalid("eval.episodes", e.episodes, "an integer >= 1")
    if e.video_steps < 1:
        raise invalid("eval.video_steps", e.video_steps, "an integer >= 1")
    if min(e.video_width, e.video_height) < 16:
        raise invalid("eval.video_width x eval.video_height", (e.video_width, e.video_height), "sizes >= 16")


def policy_from_config(cfg: Config, run_dir: Path) -> tuple[TaskConfig, dict[str, Any]]:
    """Task and rl-games params of the composed config, as a 1-GMI training run would build them."""
    one = dataclasses.replace(cfg, mode="train", num_gpus=1, gmis_per_gpu=1, checkpoint="",
                              layout=dataclasses.replace(cfg.layout, name="tcg_ex"))
    plan, _ = build_plan(one, run_dir)
    return plan.task, build_params(plan, plan.gmis[0])


def run_eval(cfg: Config, run_dir: Path, asked: dict[str, Any] | None = None) -> dict[str, Any]:
    e = cfg.eval
    check_eval(e)
    if not cfg.checkpoint:
        raise invalid("checkpoint", "", "an rl-games .pth or an rsl_rl model_<it>.pt (mode=eval checkpoint=...)")
    ckpt = Path(cfg.checkpoint).expanduser().resolve()
    if not ckpt.is_file():
        raise invalid("checkpoint", cfg.checkpoint, "an existing rl-games .pth or rsl_rl model_<it>.pt file")
    asked = asked if asked is not None else requested_task(cfg)
    video = bool(e.video or cfg.capture_video)
    rslrl = read_state(ckpt)
    if rslrl is not None:  # rsl_rl's model_<it>.pt
        with contextlib.redirect_stdout(sys.stderr):  # rsl_rl and mjlab print while they build
            task, episodes, path, frames = play_rslrl(cfg, ckpt, rslrl, asked, run_dir, video)
        return summarise(run_dir, ckpt, task, e, episodes, path, frames)
    if (ckpt.parent / RECORD).is_file() or asked is None:
        record = read_record(ckpt)
        task, params = TaskConfig(**record["task"]), record["params"]
        if asked is not None:  # another task's sizes: one line naming both, before the task names are compared
            check_checkpoint_fits(ckpt, TaskConfig(**asked))
        check_task_matches(record["task"], asked, ckpt)
    else:  # a checkpoint from elsewhere (vanilla rl-games): the command line's config says what it is
        task, params = policy_from_config(cfg, run_dir)
    check_task(task)
    check_checkpoint_fits(ckpt, task)  # sizes, in one line, before a simulator is built
    filmer = None
    if video:  # opened (and its renderer probed) before anything else runs
        filmer = open_filmer(task, task_spaces(task).obs_shape, e.video_width, e.video_height,
                             min(e.video_steps, int(task.max_episode_length)))
    try:
        episodes, path, frames = _play(cfg, ckpt, task, params, filmer, run_dir)
    finally:
        if filmer is not None:
            filmer.close()
    return summarise(run_dir, ckpt, task, e, episodes, path, frames)


def summarise(run_dir: Path, ckpt: Path, task: TaskConfig, e: EvalConfig, episodes: Episodes, video: Path | None,
              frames: int) -> dict[str, Any]:
    """Write ``summary.json`` and print the one-line summary (every library's checkpoints alike)."""
    summary = {
        "status": "ok", "mode": "eval", "run_dir": str(run_dir),
        "checkpoint": str(ckpt), "task": task.name, "episodes": e.episodes, "deterministic": e.deterministic,
        "metrics": episodes.metrics(),
        "returns": episodes.returns, "lengths": episodes.lengths,
        "video": str(video) if video else None, "video_frames": frames,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(one_line(summary), flush=True)
    return summary


def _play(cfg: Config, ckpt: Path, task: TaskConfig, params: dict[str, Any], filmer: Any,
          run_dir: Path) -> tuple[Episodes, Path | None, int]:
    """Rebuild the policy, check the checkpoint fits it, play the episodes (and film one)."""
    e = cfg.eval
    state = load_checkpoint(ckpt)
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(cfg.seed)
    env = make_vec_env(task, e.episodes, seed=cfg.seed, sim_threads=1, device=device)
    player = make_player(params, env, device, e.deterministic)
    check_fits(state, player.model, ckpt, str(task.name))
    restore(player, state)

    def act(obs: torch.Tensor) -> torch.Tensor:
        return player.get_action(obs.to(device), e.deterministic)

    with contextlib.redirect_stdout(sys.stderr):  # rl-games prints while it plays
        start_episodes(player, e.episodes)
        episodes = play(env, act, max_steps=int(task.max_episode_length) + 1)
        if filmer is None:
            return episodes, None, 0
        start_episodes(player, 1)  # the filmed episode: one environment
        video = run_dir / "eval.mp4"
        return episodes, video, filmer.film(act, video, seed=cfg.seed)


def one_line(s: dict[str, Any]) -> str:
    m = s["metrics"]
    video = f" | video={s['video']} ({s['video_frames']} frames)" if s["video"] else ""
    return (f"gmiexp eval ok: task={s['task']} episodes={s['episodes']} deterministic={s['deterministic']} | "
            f"return={m['eval/return_mean']:.2f} +- {m['eval/return_std']:.2f} | "
            f"length={m['eval/length_mean']:.1f}{video} | {s['run_dir']}")
