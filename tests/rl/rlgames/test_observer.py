"""The rl-games observer's info key (``train.info_key``): the latest value stands between the steps that report it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gmiexp.rl.rlgames.observer import EpochReport, GMIObserver
from gmiexp.status import StatusWriter


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
