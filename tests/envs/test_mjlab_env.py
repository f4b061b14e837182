"""mjlab adapter: torch tensors on the simulator's device (never numpy), rl-games' mapping, sizes, kernel cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

from gmiexp.config import TaskConfig  # noqa: E402
from gmiexp.envs import make_vec_env, task_dims  # noqa: E402
from gmiexp.envs.mjlab_env import MJLAB_DIMS, MjlabVecEnv, sim_device  # noqa: E402
from gmiexp.envs.warp_cache import configure_warp_cache, default_warp_cache  # noqa: E402

CARTPOLE = TaskConfig(name="MjlabCartpole", simulator="mjlab", env_id="Mjlab-Cartpole-Balance", max_episode_length=5,
                continuous=True, central_value=True)


@pytest.fixture(scope="module")
def env() -> MjlabVecEnv:
    """One Cartpole for the module (the first build in a fresh cache compiles Warp's kernels, ~30 s)."""
    e = make_vec_env(CARTPOLE, 8, seed=0, states=True)
    e.reset()
    yield e
    e.close()


def no_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("the mjlab adapter converted a tensor to numpy")

    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    monkeypatch.setattr(torch.Tensor, "__array__", refuse)


def test_observations_and_signals_stay_torch_on_the_env_device(env: MjlabVecEnv,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    no_numpy(monkeypatch)
    obs = env.reset()
    assert set(obs) == {"obs", "states"}
    for _ in range(3):
        act = torch.rand(8, 1, device=env.device) * 2 - 1
        obs, rew, done, info = env.step(act)
        for t in (obs["obs"], obs["states"], rew, done, info["time_outs"]):
            assert torch.is_tensor(t) and t.device == env.device
    assert obs["obs"].shape == (8, 5) and obs["states"].shape == (8, 5) and rew.shape == (8,)
    assert done.dtype == torch.bool and info["time_outs"].dtype == torch.bool


def test_numpy_guard_catches_a_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard above is live: an adapter that went through numpy (as envpool's does) would fail."""
    no_numpy(monkeypatch)
    with pytest.raises(AssertionError, match="numpy"):
        torch.zeros(2).cpu().numpy()


def test_timeouts_are_truncations_and_end_the_episode(env: MjlabVecEnv) -> None:
    env.reset()
    zero = torch.zeros(8, 1, device=env.device)
    for step in range(1, 6):  # Cartpole-Balance only ends by time-out: max_episode_length=5 here
        _, rew, done, info = env.step(zero)
        assert bool(done.all()) == (step == 5)
        assert torch.equal(done, info["time_outs"])
        assert bool(torch.isfinite(rew).all())


def test_env_info_offers_the_critic_group_as_states(env: MjlabVecEnv) -> None:
    info = env.get_env_info()
    assert info["use_global_observations"] and info["state_space"].shape == (5,)
    assert info["observation_space"].shape == (5,) and info["action_space"].shape == (1,)
    assert float(info["action_space"].low[0]) == -1.0 and float(info["action_space"].high[0]) == 1.0


def test_without_states_only_the_actor_group() -> None:
    e = make_vec_env(CARTPOLE, 2, seed=1)
    try:
        assert torch.is_tensor(e.reset()) and "state_space" not in e.get_env_info()
    finally:
        e.close()


@pytest.mark.parametrize("env_id", [
    "Mjlab-Cartpole-Balance",
    pytest.param("Mjlab-Velocity-Flat-Unitree-Go1", marks=pytest.mark.slow),
    pytest.param("Mjlab-Velocity-Flat-Unitree-G1", marks=pytest.mark.slow),
])
def test_size_table_matches_mjlab(env_id: str) -> None:
    """mode=plan/search read sizes from MJLAB_DIMS without importing mjlab: it must match the real task."""
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    cfg = load_env_cfg(env_id)
    cfg.scene.num_envs = 1
    real = ManagerBasedRlEnv(cfg, device="cpu")  # building compiles nothing; the first reset would
    dims = real.observation_manager.group_obs_dim
    assert MJLAB_DIMS[env_id] == (dims["actor"][-1], real.single_action_space.shape[-1], dims["critic"][-1])
    assert task_dims(TaskConfig(simulator="mjlab", env_id=env_id)) == MJLAB_DIMS[env_id][:2]


def test_simulator_runs_on_the_gmis_gpu_else_on_cpu() -> None:
    assert sim_device("cuda:0") == "cuda:0"
    assert sim_device("cpu") == "cpu" and sim_device("lazy") == "cpu"


def test_warp_cache_is_one_known_place(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("WARP_CACHE_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert configure_warp_cache() == tmp_path / "gmiexp" / "warp" == default_warp_cache()
    assert os.environ["WARP_CACHE_PATH"] == str(tmp_path / "gmiexp" / "warp")
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "mine"))  # the user's choice wins
    assert configure_warp_cache() == tmp_path / "mine" and (tmp_path / "mine").is_dir()


SECOND_RUN = """
import torch
from gmiexp.config import TaskConfig
from gmiexp.envs import make_vec_env
task = TaskConfig(simulator="mjlab", env_id="Mjlab-Cartpole-Balance", max_episode_length=5, continuous=True)
env = make_vec_env(task, 4, seed=3, states=True)
env.reset()
for _ in range(3):
    env.step(torch.zeros(4, 1))
"""


#: Warp compiles a module in ``<module>_<hash>_p<pid>_t<thread>`` and renames it into place when done
COMPILING = re.compile(r"_p\d+_t\d+$")


def cache_listing(root: Path) -> dict[str, float]:
    """Every cached file and its mtime, but for another process's compile in progress (pytest-xdist)."""
    out = {}
    for p in root.rglob("*"):
        try:
            if p.is_file() and not COMPILING.search(p.relative_to(root).parts[0]):
                out[str(p.relative_to(root))] = p.stat().st_mtime
        except FileNotFoundError:
            pass
    return out


def test_a_second_run_does_not_recompile(env: MjlabVecEnv) -> None:
    """The module fixture built Cartpole in this process; a new process must load every kernel from the cache."""
    import warp

    root = Path(warp.config.kernel_cache_dir)
    assert root.is_relative_to(Path(os.environ["WARP_CACHE_PATH"]).resolve())
    before = cache_listing(root)
    assert before, "the first run left no kernels in the cache"
    r = subprocess.run([sys.executable, "-c", SECOND_RUN], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == ""  # mjlab's and Warp's prints go to stderr
    assert "(cached)" in r.stderr and "(compiled)" not in r.stderr  # Warp's own report per module
    # nothing it found was written again; tests running beside this one (pytest-xdist) may add other kernels to
    # the shared cache meanwhile (a fresh machine's first `make test`), so only what was there is compared
    after = cache_listing(root)
    assert {k: after.get(k) for k in before} == before
