"""Film one episode of the policy as an mp4, where the task's simulator can render.

mjlab's tasks render themselves: one environment of the task, built with mjlab's offscreen renderer
(:class:`MjlabFilmer`). envpool does not render. Its tasks that Gymnasium also registers under the same id (the
MuJoCo tasks, classic control's CartPole-v1 and Pendulum-v1: same model, observation and reward) are filmed on that
Gymnasium twin; Gymnasium tasks render themselves (``render_mode="rgb_array"``). MuJoCo renders offscreen through
its own GL back-ends (``MUJOCO_GL=egl`` or ``osmesa``), classic control through pygame. envpool's Atari,
dm_control and Box2D tasks have no twin installed here (ale-py, dm_control, box2d) and are refused with that
reason, as are the other simulators. Frames go to an mp4 through imageio's ffmpeg (the ``imageio-ffmpeg`` wheel
ships the binary).
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError

GL_BACKENDS = ("egl", "osmesa", "glfw")
RENDERS = ("gymnasium tasks", "mjlab tasks", "envpool tasks Gymnasium registers under the same id (MuJoCo: Ant-v4, "
           "Humanoid-v4, ...; classic control: CartPole-v1, Pendulum-v1)")
GL_HINT = "install libegl1 + libgl1-mesa-dri (egl) or libosmesa6 (MUJOCO_GL=osmesa)"


def _refuse(task: TaskConfig, why: str) -> ConfigError:
    return ConfigError(f"invalid eval.video=true for task {task.name} ({task.simulator} {task.env_id}): "
                       f"{why}; video is available for {', '.join(RENDERS[:-1])} and {RENDERS[-1]}; "
                       "or drop eval.video")


def _constructor_takes(env_id: str) -> set[str]:
    """Keyword arguments of the Gymnasium environment's constructor (``width``/``height`` for MuJoCo's)."""
    import gymnasium as gym

    entry = gym.registry[env_id].entry_point
    ctor = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    return set(inspect.signature(ctor).parameters)


def twin(task: TaskConfig) -> tuple[str, dict[str, Any], bool]:
    """(Gymnasium id, its keyword arguments, whether MuJoCo renders it) of the environment that films ``task``."""
    import gymnasium as gym

    if task.simulator not in ("gymnasium", "envpool"):
        raise _refuse(task, f"the {task.simulator} simulator cannot render offscreen here")
    if task.env_id not in gym.registry:
        family = "this envpool family (Atari, dm_control, Box2D)"
        raise _refuse(task, f"{family} cannot render: Gymnasium has no {task.env_id} here to film it on")
    if task.simulator == "envpool" and task.env_config:
        raise _refuse(task, f"envpool's options {dict(task.env_config)} have no Gymnasium equivalent")
    kwargs = dict(task.env_config) if task.simulator == "gymnasium" else {}
    entry = gym.registry[task.env_id].entry_point
    mujoco = "mujoco" in (entry if isinstance(entry, str) else getattr(entry, "__module__", ""))
    return task.env_id, kwargs, mujoco


def mujoco_gl(task: TaskConfig) -> None:
    """Choose MuJoCo's offscreen back-end before its renderer is first imported (EGL without a display)."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    gl = os.environ.get("MUJOCO_GL", "glfw")
    if gl not in GL_BACKENDS:
        raise _refuse(task, f"MUJOCO_GL={gl!r} is not one of {', '.join(GL_BACKENDS)}")
    logging.getLogger("OpenGL").setLevel(logging.WARNING)  # PyOpenGL logs INFO at import; Hydra's to stdout


def open_filmer(task: TaskConfig, obs_shape: tuple[int, ...], width: int, height: int,
                max_steps: int) -> TwinFilmer | MjlabFilmer:
    """The filmer of ``task``, opened and probed before any episode runs (ConfigError where it cannot film)."""
    if task.simulator == "mjlab" and not task.vec_env:
        return MjlabFilmer(task, obs_shape, width, height, max_steps)
    return TwinFilmer(task, obs_shape, width, height, max_steps)


class TwinFilmer:
    """The task's renderable Gymnasium environment (the task's own, or its twin), opened and probed."""

    def __init__(self, task: TaskConfig, obs_shape: tuple[int, ...], width: int, height: int,
                 max_steps: int) -> None:
        env_id, kwargs, mujoco = twin(task)
        if mujoco:
            mujoco_gl(task)
        try:
            import gymnasium as gym
            import imageio_ffmpeg  # noqa: F401 - the encoder must be there before anything is filmed

            takes = _constructor_takes(env_id)  # MuJoCo environments take the frame size (some through **kwargs)
            size = {k: v for k, v in (("width", width), ("height", height)) if mujoco or k in takes}
            self.env = gym.make(env_id, render_mode="rgb_array", max_episode_steps=max_steps, **size, **kwargs)
        except ImportError as e:
            raise _refuse(task, f"{e.name} is not installed (pip install mujoco imageio imageio-ffmpeg)") from e
        except Exception as e:  # noqa: BLE001 - gymnasium cannot build it here
            raise _refuse(task, f"gymnasium has no renderable {env_id} ({e})") from e
        try:
            self.env.reset(seed=0)
            frame = self.env.render()
        except Exception as e:  # noqa: BLE001 - no GL library for this back-end
            self.close()
            hint = (f"MuJoCo cannot render with MUJOCO_GL={os.environ.get('MUJOCO_GL')} ({type(e).__name__}: {e}); "
                    f"{GL_HINT}") if mujoco \
                else f"{env_id} cannot render ({type(e).__name__}: {e})"
            raise _refuse(task, hint) from e
        shape = self.env.observation_space.shape
        if tuple(shape) != tuple(obs_shape):
            self.close()
            raise _refuse(task, f"gymnasium's {env_id} observes {shape}, {task.simulator}'s {obs_shape}")
        self.fps = int(self.env.metadata.get("render_fps", 30))
        self.frame_shape = np.asarray(frame).shape

    def _action(self, action: torch.Tensor) -> Any:
        import gymnasium as gym

        a = action.reshape(-1).cpu().numpy()
        if isinstance(self.env.action_space, gym.spaces.Discrete):
            return int(a[0])
        return a.astype(np.float64)

    def film(self, act: Callable[[torch.Tensor], torch.Tensor], path: Path, seed: int) -> int:
        """Write one episode (first frame after reset, one per step) to ``path``; return the frame count."""
        import imageio.v2 as imageio

        obs, _ = self.env.reset(seed=seed)
        frames = 0
        with imageio.get_writer(path, fps=self.fps, codec="libx264", macro_block_size=16) as writer:
            writer.append_data(self.env.render())
            frames += 1
            done = False
            while not done:
                action = act(torch.as_tensor(np.asarray(obs, dtype=np.float32)).unsqueeze(0))
                obs, _r, term, trunc, _ = self.env.step(self._action(action))
                writer.append_data(self.env.render())
                frames += 1
                done = bool(term or trunc)
        return frames

    def close(self) -> None:
        self.env.close()


class MjlabFilmer:
    """One environment of an mjlab task with mjlab's offscreen renderer: a policy trained on mjlab films on its own.

    mjlab resets an environment in the step that ends its episode, so the filmed episode's last frame is the one
    before that step.
    """

    def __init__(self, task: TaskConfig, obs_shape: tuple[int, ...], width: int, height: int,
                 max_steps: int) -> None:
        mujoco_gl(task)
        from gmiexp.envs.mjlab_env import MjlabVecEnv

        try:
            import imageio_ffmpeg  # noqa: F401 - the encoder must be there before anything is filmed

            self.env = MjlabVecEnv(str(task.env_id), 1, seed=0, device="cpu", max_episode_length=max_steps,
                                   render=(width, height))
        except ImportError as e:
            raise _refuse(task, f"{e.name} is not installed (pip install gmiexp[mjlab] imageio-ffmpeg)") from e
        except Exception as e:  # noqa: BLE001 - the renderer's GL context cannot be made on this host
            raise _refuse(task, f"mjlab's offscreen renderer cannot run with MUJOCO_GL="
                                f"{os.environ.get('MUJOCO_GL')} ({type(e).__name__}: {e}); {GL_HINT}") from e
        shape = tuple(self.env.observation_space.shape)
        if shape != tuple(obs_shape):
            self.close()
            raise _refuse(task, f"mjlab's {task.env_id} observes {shape}, the policy {tuple(obs_shape)}")
        self.fps = round(float(self.env.env.metadata.get("render_fps", 30)))

    def film(self, act: Callable[[torch.Tensor], torch.Tensor], path: Path, seed: int) -> int:
        """Write one episode (first frame after reset, one per step) to ``path``; return the frame count."""
        import imageio.v2 as imageio

        obs = self.env.reset(seed=seed)
        frames = 0
        with imageio.get_writer(path, fps=self.fps, codec="libx264", macro_block_size=16) as writer:
            writer.append_data(self.env.render())
            frames += 1
            while True:
                obs, _r, done, _ = self.env.step(act(torch.as_tensor(obs)))
                if bool(done.reshape(-1)[0]):
                    return frames
                writer.append_data(self.env.render())
                frames += 1

    def close(self) -> None:
        self.env.close()
