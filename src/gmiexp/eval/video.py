"""Film one episode of the policy as an mp4, where the task's simulator can render.

envpool does not render. Its MuJoCo tasks are gymnasium's MuJoCo environments of the same id
(same model, observation and reward), which render offscreen through MuJoCo's own GL back-ends
(``MUJOCO_GL=egl`` or ``osmesa``); frames go to an mp4 through imageio's ffmpeg (the
``imageio-ffmpeg`` wheel ships the binary). Other simulators are refused with the reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError

GL_BACKENDS = ("egl", "osmesa", "glfw")


def _refuse(task: TaskConfig, why: str) -> ConfigError:
    return ConfigError(f"invalid eval.video=true for task {task.name} ({task.simulator} {task.env_id}): "
                       f"{why}; video is available for envpool MuJoCo tasks (Ant, Humanoid, ...), rendered by "
                       "gymnasium's MuJoCo environment offscreen (MUJOCO_GL=egl or osmesa); or drop eval.video")


class Filmer:
    """gymnasium's MuJoCo twin of an envpool task, opened and probed before any episode runs."""

    def __init__(self, task: TaskConfig, obs_shape: tuple[int, ...], width: int, height: int,
                 max_steps: int) -> None:
        if task.simulator != "envpool":
            raise _refuse(task, f"the {task.simulator} simulator cannot render offscreen here")
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("MUJOCO_GL", "egl")  # read when MuJoCo's renderer is first imported
        gl = os.environ.get("MUJOCO_GL", "glfw")
        if gl not in GL_BACKENDS:
            raise _refuse(task, f"MUJOCO_GL={gl!r} is not one of {', '.join(GL_BACKENDS)}")
        logging.getLogger("OpenGL").setLevel(logging.WARNING)  # PyOpenGL logs INFO at import; Hydra's to stdout
        try:
            import gymnasium as gym
            import imageio_ffmpeg  # noqa: F401 - the encoder must be there before anything is filmed
            import mujoco  # noqa: F401

            self.env = gym.make(task.env_id, render_mode="rgb_array", width=width, height=height,
                                max_episode_steps=max_steps)
        except ImportError as e:
            raise _refuse(task, f"{e.name} is not installed (pip install mujoco imageio imageio-ffmpeg)") from e
        except Exception as e:  # noqa: BLE001 - gymnasium has no env of this id
            raise _refuse(task, f"gymnasium has no renderable {task.env_id} ({e})") from e
        try:
            self.env.reset(seed=0)
            frame = self.env.render()
        except Exception as e:  # noqa: BLE001 - no GL library for this back-end
            self.close()
            raise _refuse(task, f"MuJoCo cannot render with MUJOCO_GL={gl} ({type(e).__name__}: {e}); install "
                                "libegl1 + libgl1-mesa-dri (egl) or libosmesa6 (MUJOCO_GL=osmesa)") from e
        shape = self.env.observation_space.shape
        if tuple(shape) != tuple(obs_shape):
            self.close()
            raise _refuse(task, f"gymnasium's {task.env_id} observes {shape}, envpool's {obs_shape}")
        self.fps = int(self.env.metadata.get("render_fps", 30))
        self.frame_shape = np.asarray(frame).shape

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
                obs, _r, term, trunc, _ = self.env.step(action.reshape(-1).cpu().numpy().astype(np.float64))
                writer.append_data(self.env.render())
                frames += 1
                done = bool(term or trunc)
        return frames

    def close(self) -> None:
        self.env.close()
