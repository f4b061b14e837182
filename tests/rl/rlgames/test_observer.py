"""The rl-games observer's info key (``train.info_key``): one number from the step infos, averaged over the GMIs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from reduction_helpers import run_gmis

from gmiexp.errors import ConfigError
from gmiexp.rl.rlgames.observer import EpochReport, GMIObserver, info_value
from gmiexp.rl.rlgames.sync import mean_of_known
from gmiexp.status import StatusWriter


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


def test_a_nested_key_a_step_lacks_keeps_the_latest_value_and_says_why_at_the_epochs_end(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """mjlab fills its episode logs only at the steps some environment resets (the others hold its per-step
    metrics): the curriculum's level then stands, and an epoch that saw none says what the infos had."""
    key = "episode.Curriculum/terrain_levels"
    observer = GMIObserver(StatusWriter(tmp_path, 0), 0, key)
    observer.process_infos({"time_outs": torch.zeros(2), "episode": {"Metrics/air_time_mean": 0.1}}, None)
    observer.epoch_done(EpochReport(epoch=1, frame=0, curr_frames=2, world_size=1, timings={"frames": 2}))
    err = capsys.readouterr().err
    assert ("train.info_key=episode.Curriculum/terrain_levels not reported in epoch 1: episode had no "
            "'Curriculum/terrain_levels' (it had ['Metrics/air_time_mean'])") in err
    observer.process_infos({"time_outs": torch.zeros(2), "episode": {"Curriculum/terrain_levels": 3.0}}, None)
    observer.process_infos({"time_outs": torch.zeros(2), "episode": {}}, None)
    assert observer.info == 3.0
    observer.epoch_done(EpochReport(epoch=2, frame=2, curr_frames=2, world_size=1, timings={"frames": 2}))
    assert "not reported" not in capsys.readouterr().err


@pytest.mark.parametrize(("values", "mean"), [((1.0, 3.0), 2.0), ((None, 3.0), 3.0), ((None, None), None)])
def test_the_run_wide_value_is_the_mean_over_the_gmis_that_saw_one(values: tuple, mean: float | None) -> None:
    def gmi(i: int, all_reduce: Callable[[torch.Tensor], None]) -> float | None:
        return mean_of_known(values[i], all_reduce)

    assert run_gmis(2, gmi) == [mean, mean]
