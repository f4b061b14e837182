"""A step-info number (``train.info_key``): read by a dotted key, averaged over the GMIs that saw one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from reduction_helpers import run_gmis

from gmiexp.errors import ConfigError
from gmiexp.rl.infos import InfoMeter, info_value, mean_of_known


def test_a_dotted_key_reads_a_nested_tensor_array_or_number_as_isaac_labs_pbt_observer_does() -> None:
    infos = {"time_outs": torch.tensor([True, False, False, False]),
             "episode": {"Curriculum/difficulty_level": torch.tensor(2.5), "Episode_Reward/x": np.array([1.0, 3.0])},
             "level": 4}
    assert info_value(infos, "episode.Curriculum/difficulty_level") == 2.5
    assert info_value(infos, "episode.Episode_Reward/x") == 2.0
    assert info_value(infos, "time_outs") == 0.25
    assert info_value(infos, "level") == 4.0


def test_a_first_part_the_infos_lack_is_refused_naming_the_keys_there() -> None:
    """The infos' own keys do not change from step to step: a misspelt objective is refused at once."""
    with pytest.raises(ConfigError, match=r"infos have no 'log'; valid there: \['episode', 'time_outs'\]"):
        info_value({"time_outs": torch.zeros(2), "episode": {}}, "log.x")


@pytest.mark.parametrize(("values", "mean"), [((1.0, 3.0), 2.0), ((None, 3.0), 3.0), ((None, None), None)])
def test_the_run_wide_value_is_the_mean_over_the_gmis_that_saw_one(values: tuple, mean: float | None) -> None:
    def gmi(i: int, all_reduce: Callable[[torch.Tensor], None]) -> float | None:
        return mean_of_known(values[i], all_reduce)

    assert run_gmis(2, gmi) == [mean, mean]



def test_an_epoch_is_the_mean_of_its_reporting_steps_and_the_last_one_stands_after_an_epoch_without(
        capsys: pytest.CaptureFixture[str]) -> None:
    """mjlab fills its episode logs only at the steps some environment resets (the others hold its per-step
    metrics): an epoch without a report keeps the last one's value; while none was ever seen, it says why."""
    meter = InfoMeter("episode.Curriculum/terrain_levels", 3)
    meter.step({"time_outs": torch.zeros(2), "episode": {"Metrics/air_time_mean": 0.1}})
    assert meter.epoch_value(1) is None
    assert ("GMI 3: train.info_key=episode.Curriculum/terrain_levels not reported in epoch 1: episode had no "
            "'Curriculum/terrain_levels' (it had ['Metrics/air_time_mean'])") in capsys.readouterr().err
    for level in (3.0, None, 5.0):
        meter.step({"time_outs": torch.zeros(2), "episode": {} if level is None else {"Curriculum/terrain_levels":
                                                                                        torch.tensor(level)}})
    assert meter.epoch_value(2) == 4.0  # the steps that reported it, not the one that did not
    meter.step({"time_outs": torch.zeros(2), "episode": {}})
    assert meter.epoch_value(3) == 4.0
    assert "not reported" not in capsys.readouterr().err
