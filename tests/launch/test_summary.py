"""The one-line summary says whether the run learned: the return at its start and at its end."""

from __future__ import annotations

from gmiexp.launch.summary import one_line


def summary(rewards: list[float | None]) -> dict:
    history = [{"iteration": i + 1, "reward/mean": r} for i, r in enumerate(rewards)]
    return {"status": "ok", "wall_s": 12.5, "run_dir": "/runs/a",
            "config": {"task": "CartPoleEnvpool", "layout": "tcg_ex", "backend": "direct", "reduction": "allreduce",
                       "gmis": 2, "num_envs": 256, "nnodes": 1},
            "metrics": {"perf/env_steps_per_s": 2000.0, "perf/gmi/0/env_steps_per_s": 1000.0,
                        "perf/gmi/1/env_steps_per_s": 1000.0, "reward/mean": rewards[-1] if rewards else None},
            "history": history}


def test_the_last_line_shows_the_return_at_the_start_and_now() -> None:
    line = one_line(summary([None, 14.25, 120.0, 499.96]))  # no episode had ended after the first epoch
    assert line == ("gmiexp ok: task=CartPoleEnvpool layout=tcg_ex backend=direct reduction=allreduce gmis=2 "
                    "num_envs=256 | env_steps/s=2,000 (gmi0 1,000, gmi1 1,000) | return 14.2 -> 500.0 | "
                    "wall=12.5s | /runs/a")


def test_a_run_without_episodes_says_so() -> None:
    assert "| return n/a |" in one_line(summary([None, None]))
