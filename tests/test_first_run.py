"""A newcomer's first ten minutes: ``make run`` (``python -m gmiexp``, no overrides) learns visibly and prints no
traceback and no warning; one job of every layout prints none either.

A traceback in the middle of the progress lines (rl-games' TensorBoard writer thread dying as a GMI exits) or a
stray ``UserWarning`` makes a working run look broken, so any such line on stdout or stderr fails the test.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from gmitest import fresh_caches, popen_cli, run_cli

from gmiexp.launch.progress import return_text

#: a Python traceback, a thread's dying words, a warning of Python's ``warnings`` or of a logger
NOISE = re.compile(r"Traceback \(most recent call last\)|Exception in thread|warning", re.IGNORECASE)
RETURN = re.compile(r"\| return (-?[\d.]+) -> (-?[\d.]+) \|")
#: CartPole-v1 is solved at a mean return of 475 over 100 consecutive episodes (Gymnasium's reward_threshold;
#: rl-games' episode window is the last 100 episodes), 500 being the most an episode can score
SOLVED = 475.0
LAYOUTS = ("tcg", "tdg", "tcg_ex", "tdg_ex", "decoupled_async")
TINY = ["num_envs=16", "train.minibatch_size=256", "max_iterations=3"]


def noise(*texts: str) -> list[str]:
    """The lines of ``texts`` a user would read as something going wrong."""
    return [ln for text in texts for ln in text.splitlines() if NOISE.search(ln)]


def test_noise_is_what_a_broken_looking_run_prints() -> None:
    """The lines seen in the wild (issue 35) are caught; a normal run's lines are not."""
    seen = ["Exception in thread Thread-2:", "Traceback (most recent call last):",
            "/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:279: UserWarning: Failed to "
            "initialize NumPy: No module named 'numpy'",
            "[2026-11-27 15:20:30,428][gmiexp][WARNING] - train.minibatch_size=1024 does not divide every GMI's batch"]
    normal = ["gmiexp progress: 204,800/204,800 frames (100%) | iteration 100 | 1,000 env steps/s | "
              f"{return_text(14.2, 500.0)} | 21s", "[2026-11-27 15:26:35,832][HYDRA] Launching 5 jobs locally"]
    assert noise("\n".join(seen + normal)) == seen


@pytest.mark.timeout(600)  # ~20 s on a quiet 2-core host, a minute on a loaded one
def test_the_default_job_learns_and_prints_no_traceback_or_warning(tmp_path: Path) -> None:
    r = run_cli(f"hydra.run.dir={tmp_path / 'run'}", env=fresh_caches(tmp_path / "caches"), timeout=550)
    assert r.returncode == 0, r.stderr[-3000:]
    assert noise(r.stdout, r.stderr) == [], r.stderr[-3000:]
    (line,) = r.stdout.splitlines()
    assert line.startswith("gmiexp ok: task=CartPoleEnvpool layout=tcg_ex"), line
    start, now = (float(x) for x in RETURN.search(line).groups())
    assert start < 100 and now >= SOLVED, line  # a policy that learned, and shows it
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("gmiexp progress: ") and " -> " in ln]
    assert progress and progress[-1].endswith(f"{return_text(start, now)} | {progress[-1].rsplit(' | ', 1)[1]}")


@pytest.mark.timeout(600)
def test_one_job_of_every_layout_prints_no_traceback_or_warning(tmp_path: Path) -> None:
    """One sweep, so the jobs share the launcher and its warm-start server (a few seconds each after the first)."""
    r = run_cli("-m", f"layout={','.join(LAYOUTS)}", *TINY, f"hydra.sweep.dir={tmp_path}", timeout=550)
    assert r.returncode == 0, r.stderr[-3000:]
    assert noise(r.stdout, r.stderr) == [], r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert [ln.split(" layout=")[1].split()[0] for ln in lines] == list(LAYOUTS), r.stdout
    assert all(ln.startswith("gmiexp ok:") and RETURN.search(ln) for ln in lines), r.stdout


@pytest.mark.timeout(300)
def test_a_ctrl_c_of_a_one_gmi_run_ends_in_its_summary_line_and_nothing_else(tmp_path: Path,
                                                                            no_orphans: None) -> None:
    """Ctrl-C (SIGINT to the launcher) mid-training: exit 130, one clean ``gmiexp interrupted`` line."""
    p = popen_cli("gmis_per_gpu=1", "num_envs=16", "train.minibatch_size=256", "max_iterations=100000",
                  f"hydra.run.dir={tmp_path}")
    history = tmp_path / "gmis" / "0" / "history.jsonl"
    try:
        end = time.time() + 180
        while time.time() < end and (not history.is_file() or not history.read_text().strip()):
            time.sleep(0.2)
        p.send_signal(signal.SIGINT)  # what the terminal's Ctrl-C sends to the launcher
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-3000:]
    assert noise(out, err) == [], err[-3000:]
    (line,) = out.splitlines()
    assert line.startswith("gmiexp interrupted: task=CartPoleEnvpool layout=tcg_ex") and RETURN.search(line), line
