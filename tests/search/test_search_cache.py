"""Profile cache: a second search on the same key runs no profile and returns the same answer."""

import re
import subprocess

import gmiexp
from gmiexp.search import ProfileResult, algorithm2, grid
from gmiexp.search.cache import ProfileCache, cached, code_version


def counting(log):
    def profile(g, n):
        log.append((g, n))
        return ProfileResult(True, top=10.0 * min(n, 256 * g), mem_mb=50 + n, wall_s=0.5)

    return profile


def test_cache_hit_runs_no_profile(tmp_path):
    key = {"task": "Cartpole", "hardware": "cpu", "version": code_version()}
    first, second = [], []
    envs = [64, 128, 256, 512, 1024]
    a = algorithm2(cached(counting(first), ProfileCache(key, tmp_path)), 2, envs, 1, 0.05)
    b = algorithm2(cached(counting(second), ProfileCache(key, tmp_path)), 2, envs, 1, 0.05)
    assert first and not second
    assert (a.num_envs, a.gmis_per_gpu) == (b.num_envs, b.gmis_per_gpu)
    assert all(s.result.cached for s in b.steps)
    assert b.profile_s == a.profile_s  # cached points keep what they cost


def test_grid_after_search_only_profiles_the_missing_points(tmp_path):
    key = {"task": "Cartpole"}
    envs = [64, 128, 256, 512, 1024]
    searched, gridded = [], []
    algorithm2(cached(counting(searched), ProfileCache(key, tmp_path)), 2, envs, 1, 0.05)
    grid(cached(counting(gridded), ProfileCache(key, tmp_path)), 2, envs, 1)
    assert len(searched) + len(gridded) == 2 * len(envs)
    assert not set(searched) & set(gridded)


def test_key_separates_hardware_and_version(tmp_path):
    a = ProfileCache({"task": "Cartpole", "hardware": "cpu", "version": "0.1.0"}, tmp_path)
    b = ProfileCache({"task": "Cartpole", "hardware": "1x H100", "version": "0.1.0"}, tmp_path)
    a.put(1, 64, ProfileResult(True, top=1.0, mem_mb=1.0))
    assert a.get(1, 64) is not None and b.get(1, 64) is None


def test_timeouts_are_not_cached(tmp_path):
    cache = ProfileCache({"task": "x"}, tmp_path)
    cached(lambda g, n: ProfileResult(False, error="timeout after 5s"), cache)(1, 64)
    cached(lambda g, n: ProfileResult(False, error="exit code 1"), cache)(1, 128)
    assert cache.get(1, 64) is None and cache.get(1, 128) is not None


def test_code_version_names_the_commit_and_uncommitted_edits(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    clean = code_version(tmp_path)
    assert re.fullmatch(r".+\+g[0-9a-f]{7,}", clean)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path) == clean + ".dirty"
    assert code_version(tmp_path / "not-a-checkout") == gmiexp.__version__
