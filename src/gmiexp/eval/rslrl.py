"""``mode=eval`` of an rsl_rl checkpoint (``model_<it>.pt``): rsl_rl's own runner rebuilt, its actor played.

The policy is built the way mjlab's play script builds it: the task's runner class (mjlab's for an mjlab task,
else rsl_rl's OnPolicyRunner) over the task's environment with the runner config the run trained with, the
checkpoint's actor loaded (``load_cfg={"actor": True}``, strict; mjlab's runner migrates pre-4.0 checkpoints) and
``get_inference_policy``. Deterministic episodes take the actor's mean (rsl_rl's default), else it samples.

What the checkpoint is a policy of: the record a ``train=rslrl`` run writes beside its checkpoints; for one trained
elsewhere (mjlab, Isaac Lab), the task the command line names (an mjlab task id, or ``task.vec_env=...``) and the
runner config beside it (``params/agent.yaml``, as mjlab and Isaac Lab save it), else that task's mjlab recipe with
``train.file`` and ``train.rslrl``. The actor's sizes are checked against the task's before anything is built
where the task table knows them (mjlab's own environments), else against the built actor before it is loaded.
Video: mjlab's offscreen renderer films environment 0's episode.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner

from gmiexp.config import Config, TaskConfig
from gmiexp.envs import check_task
from gmiexp.envs.video import GL_HINT, mujoco_gl
from gmiexp.errors import ConfigError
from gmiexp.eval.episodes import Episodes, play
from gmiexp.eval.task import check_task_matches
from gmiexp.rl.rlgames.record import RECORD, read_record
from gmiexp.rl.rslrl.checkpoint import AGENT_YAML, LIBRARY, actor_state, check_fits, sizes, task_sizes, tensor_diff
from gmiexp.rl.rslrl.config import runner_config
from gmiexp.rl.rslrl.envs import MJLAB_FACTORY, load_factory, mjlab_recipe

#: what makes two tasks the same for an rsl_rl policy: the simulator, its id, and the VecEnv factory
IDENTITY = ("simulator", "env_id", "vec_env")
RENDER_FPS = 50.0  # where the environment states no render rate (mjlab's is 1 / step_dt)


@dataclass(frozen=True)
class Source:
    """What an rsl_rl checkpoint is a policy of: its task, the runner config, the task its record names."""

    task: TaskConfig
    cfg: dict[str, Any]
    trained: str | None


def resolve(cfg: Config, ckpt: Path, state: dict[str, Any], asked: dict[str, Any] | None) -> Source:
    """The task and runner config of ``ckpt``, every check that needs no simulator made (exit 2 on each)."""
    if (ckpt.parent / RECORD).is_file():
        doc = read_record(ckpt)
        if doc.get("library") != LIBRARY:
            raise ConfigError(f"invalid checkpoint={ckpt}: an rsl_rl checkpoint beside another library's "
                              f"{RECORD}; valid: the {RECORD} its train=rslrl run wrote")
        src = Source(TaskConfig(**doc["task"]), dict(doc["params"]), str(doc["task"].get("name")))
        if asked is not None:  # another task's sizes: one line naming both, before the task names are compared
            fits_before_building(ckpt, state, TaskConfig(**asked), src.trained)
        check_task_matches(doc["task"], asked, ckpt, IDENTITY)
    elif asked is None:
        raise ConfigError(f"invalid checkpoint={ckpt}: an rsl_rl checkpoint with no {RECORD} beside it (gmiexp "
                          "writes one next to the checkpoints of every train=rslrl run); for a checkpoint from "
                          "elsewhere name its task: task=<mjlab task id>, or task.vec_env=<module>:<function> for "
                          f"another rsl_rl VecEnv (its runner config: {AGENT_YAML} beside it, or train.file=...)")
    else:
        task = TaskConfig(**asked)
        src = Source(task, elsewhere_config(cfg, ckpt, task), None)
    if not src.task.vec_env and src.task.simulator != "mjlab":
        raise ConfigError(f"invalid task={src.task.name} for an rsl_rl checkpoint ({src.task.simulator} "
                          f"{src.task.env_id}): rsl_rl steps an rsl_rl VecEnv; valid: an mjlab task "
                          "(task=Mjlab-...) or task.vec_env=<module>:<function>")
    check_task(src.task)
    fits_before_building(ckpt, state, src.task, src.trained)
    return src


def elsewhere_config(cfg: Config, ckpt: Path, task: TaskConfig) -> dict[str, Any]:
    """A checkpoint from elsewhere: its ``params/agent.yaml`` (or ``train.file``) on the task's recipe, as trained."""
    saved = ckpt.parent / AGENT_YAML
    file = cfg.train.file or (str(saved) if saved.is_file() else "")
    recipe, _ = runner_class(task)
    return runner_config(recipe, file, dict(cfg.train.rslrl))


def runner_class(task: TaskConfig) -> tuple[dict[str, Any], type]:
    """The task's mjlab recipe and runner class (mjlab's), or none and rsl_rl's OnPolicyRunner: as the GMIs train."""
    return mjlab_recipe(task.env_id) if task.simulator == "mjlab" else ({}, OnPolicyRunner)


def fits_before_building(ckpt: Path, state: dict[str, Any], task: TaskConfig, trained: str | None) -> None:
    want = task_sizes(task)
    if want is not None:
        check_fits(ckpt, sizes(actor_state(state)), want, str(task.name), trained)


def check_video(task: TaskConfig) -> None:
    """Refuse a video gmiexp cannot make (before anything is built): mjlab's own environments only, a GL back-end."""
    if task.vec_env or task.simulator != "mjlab":
        raise ConfigError(f"invalid eval.video=true for task {task.name} (task.vec_env={task.vec_env or '-'}): "
                          "gmiexp films rsl_rl policies on mjlab's own environments (its offscreen renderer); "
                          "a task.vec_env environment is not filmed; or drop eval.video / capture_video")
    mujoco_gl(task)


def build_env(src: Source, num_envs: int, seed: int, device: str, video: tuple[int, int] | None) -> Any:
    """The task's rsl_rl VecEnv with one environment per episode; ``video`` (width, height): mjlab renders too."""
    factory = load_factory(src.task.vec_env or MJLAB_FACTORY)
    env_config = dict(src.task.env_config)
    if video is None:
        return factory(src.task.env_id, num_envs=num_envs, device=device, seed=seed, **env_config)
    width, height = video
    try:
        return factory(src.task.env_id, num_envs=num_envs, device=device, seed=seed, render_mode="rgb_array",
                       **{**env_config, "viewer.width": width, "viewer.height": height})
    except Exception as e:  # noqa: BLE001 - the renderer's GL context cannot be made on this host
        raise ConfigError(
            f"invalid eval.video=true for task {src.task.name}: mjlab's offscreen renderer cannot run here with "
            f"MUJOCO_GL={os.environ.get('MUJOCO_GL')} ({type(e).__name__}: {e}); {GL_HINT}, or drop eval.video") from e


def eval_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The runner config to act with: RND and symmetry only train (the actor alone is loaded), so they are left out."""
    out = copy.deepcopy(cfg)
    out.setdefault("algorithm", {}).update(rnd_cfg=None, symmetry_cfg=None)
    out.pop("multi_gpu", None)
    return out


def load_policy(src: Source, env: Any, ckpt: Path, state: dict[str, Any], device: str) -> torch.nn.Module:
    """rsl_rl's inference policy of the task's runner, with the checkpoint's actor (exit 2 where it does not fit)."""
    _, runner_cls = runner_class(src.task)
    runner = runner_cls(env, eval_config(src.cfg), None, device)
    have, want = actor_state(state), runner.alg.get_policy().state_dict()
    check_fits(ckpt, sizes(have), sizes(want), str(src.task.name), src.trained, tensor_diff(have, want))
    try:
        runner.load(str(ckpt), load_cfg={"actor": True}, strict=True, map_location=device)
    except KeyError as e:  # rsl_rl's own runner reads actor_state_dict only
        raise ConfigError(f"invalid checkpoint={ckpt}: a pre-4.0 rsl_rl checkpoint (model_state_dict, no {e}) that "
                          f"{runner_cls.__name__} cannot load; mjlab's runner migrates it (an mjlab task)") from e
    return runner.get_inference_policy(device=device)


class FilmEnv0:
    """Frames of environment 0 (mjlab renders ``viewer.env_idx`` 0) until its first episode ends or ``limit`` steps."""

    def __init__(self, env: Any, limit: int) -> None:
        self.env, self.limit = env.unwrapped, limit
        self.frames: list[Any] = [self.env.render()]
        self.open = True

    def step(self, dones: torch.Tensor) -> None:
        if self.open and len(self.frames) <= self.limit:
            self.frames.append(self.env.render())
        self.open = self.open and not bool(dones.reshape(-1)[0])

    def write(self, path: Path) -> int:
        import imageio.v2 as imageio

        fps = float(self.env.metadata.get("render_fps", RENDER_FPS))
        with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=16) as writer:
            for f in self.frames:
                writer.append_data(f)
        return len(self.frames)


class Stepper:
    """An rsl_rl VecEnv as :func:`gmiexp.eval.episodes.play` steps it; a recurrent actor restarts where episodes end."""

    def __init__(self, env: Any, policy: torch.nn.Module, film: FilmEnv0 | None) -> None:
        self.env, self.policy, self.film = env, policy, film
        self.num_envs = int(env.num_envs)

    def reset(self) -> Any:
        return self.env.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        obs, rewards, dones, extras = self.env.step(actions.to(self.env.device))
        self.policy.reset(dones)  # rsl_rl's models: zero state for the ended environments (an MLP's no-op)
        if self.film is not None:
            self.film.step(dones)
        return obs, rewards, dones, extras


def play_rslrl(cfg: Config, ckpt: Path, state: dict[str, Any], asked: dict[str, Any] | None, run_dir: Path,
               video: bool) -> tuple[TaskConfig, Episodes, Path | None, int]:
    """Resolve, check, build and play ``cfg.eval.episodes`` episodes (and film environment 0's where asked)."""
    e = cfg.eval
    src = resolve(cfg, ckpt, state, asked)
    if video:
        check_video(src.task)
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(cfg.seed)
    env = build_env(src, e.episodes, cfg.seed, device, (e.video_width, e.video_height) if video else None)
    try:
        policy = load_policy(src, env, ckpt, state, device)
        film = FilmEnv0(env, e.video_steps) if video else None

        def act(obs: Any) -> torch.Tensor:
            with torch.inference_mode():
                return policy(obs.to(device), stochastic_output=not e.deterministic)

        episodes = play(Stepper(env, policy, film), act, max_steps=int(env.max_episode_length) + 1)
        if film is None:
            return src.task, episodes, None, 0
        path = run_dir / "eval.mp4"
        return src.task, episodes, path, film.write(path)
    finally:
        close: Callable[[], Any] | None = getattr(env, "close", None)
        if callable(close):
            close()
