"""The pieces of an rsl_rl resume that need no simulator: the carried observations, the segment, the record's fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gmitest import compose_config
from tensordict import TensorDict

from gmiexp.launch.requeue import start_segment
from gmiexp.planner.build import build_plan
from gmiexp.rl.rslrl.runstate import RUN_KEY, CarriedObservations, resume, run_segment


class Counting:
    """An rsl_rl VecEnv stand-in that counts how often it computes observations."""

    num_envs, num_actions, max_episode_length, device, cfg = 3, 1, 10, "cpu", {}

    def __init__(self) -> None:
        self.episode_length_buf = torch.zeros(3, dtype=torch.long)
        self.computed = 0

    def get_observations(self) -> TensorDict:
        self.computed += 1
        return TensorDict({"policy": torch.full((3, 2), float(self.computed))}, batch_size=[3])

    def step(self, actions: torch.Tensor) -> tuple:
        raise NotImplementedError


def test_the_first_observations_after_a_resume_are_the_carried_ones_and_nothing_is_computed() -> None:
    env = Counting()
    vec = CarriedObservations(env)
    carried = TensorDict({"policy": torch.full((3, 2), -1.0)}, batch_size=[3])
    vec.carry(carried)
    assert vec.get_observations() is carried and env.computed == 0  # rsl_rl's learn starts from these
    assert float(vec.get_observations()["policy"][0, 0]) == 1.0 and env.computed == 1  # then the env's own
    vec.episode_length_buf = torch.ones(3, dtype=torch.long)  # rsl_rl's init_at_random_ep_len sets it
    assert env.episode_length_buf.sum() == 3 and vec.unwrapped is env and vec.max_episode_length == 10


def test_a_start_from_an_rslrl_checkpoint_is_the_next_segment_of_its_run(tmp_path: Path) -> None:
    """The segment sits in rsl_rl's ``infos`` (an rsl_rl or mjlab checkpoint without it: the first segment's)."""
    assert run_segment(None) == 1 and run_segment({"env_state": {}}) == 1
    assert run_segment({RUN_KEY: {"segment": 2}}) == 3
    ck = tmp_path / "model_3.pt"
    torch.save({"iter": 3, "infos": {RUN_KEY: {"segment": 2}, "env_state": {"common_step_counter": 96}}}, ck)
    plan, _ = build_plan(compose_config("train=rslrl", "task=Cartpole", "hardware=cpu", "gmis_per_gpu=2",
                                        "batch.total_envs=16", "seed=7", f"checkpoint={ck}"), tmp_path / "run")
    assert start_segment(plan) == 3 and [g.env_seed for g in plan.gmis] == [7 + 3 * 16, 7 + 3 * 16 + 8]


class Runner:
    """What :func:`resume` reads of a runner whose checkpoint has no record of this partition."""

    def __init__(self) -> None:
        from gmiexp.rl.rslrl.runner import EPISODE_PARTS

        self.logger = type("L", (), {"windows": {k: [] for k in EPISODE_PARTS}})()


@pytest.mark.parametrize(("run", "cut"), [
    (None, None),  # rsl_rl's own checkpoint: nothing to restore, nothing counted
    ({"segment": 0, "world_size": 1, "gmis": [{"in_progress": 5, "frames_in_progress": 40}]}, 5),  # a re-shape 1 -> 2
])
def test_a_start_on_another_partition_restores_nothing_and_counts_the_cut_episodes(run: dict | None,
                                                                                   cut: int | None) -> None:
    report = resume(Runner(), run, rank=1, world_size=2)
    assert report["restored"] is False and report["simulator"] is False and report["episodes_cut"] == cut
    assert report["frames_cut"] == (None if run is None else 40)


def test_the_info_keys_last_value_goes_on_where_an_iteration_reports_none() -> None:
    """A resume on the same partition gives each GMI its meter's last value (an iteration without a report says it)."""
    from collections import deque
    from types import SimpleNamespace

    from gmiexp.rl.infos import InfoMeter
    from gmiexp.rl.rslrl.runner import EPISODE_PARTS
    from gmiexp.rl.rslrl.runstate import logger_state
    from gmiexp.rl.state import generator_states

    def runner(rank: int) -> SimpleNamespace:
        logger = SimpleNamespace(sums={}, windows={k: deque(maxlen=100) for k in EPISODE_PARTS},
                                 info=InfoMeter("log.Episode/level", rank))
        return SimpleNamespace(logger=logger, alg=SimpleNamespace(storage=None), device="cpu",
                               env=SimpleNamespace(env=None))

    saving = runner(1)
    saving.logger.info.step({"log": {"Episode/level": 2.5}})
    saving.logger.info.epoch_value(4)
    mine = {"env": None, "obs": None, "generators": generator_states("cpu"), "permutation": None,
            "logger": logger_state(saving.logger)}
    fresh = runner(1)
    resume(fresh, {"segment": 0, "world_size": 2, "gmis": [mine, mine]}, rank=1, world_size=2)
    assert fresh.logger.info.epoch_value(5) == 2.5  # was None: the value was not in the checkpoint
