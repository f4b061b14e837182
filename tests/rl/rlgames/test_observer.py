"""The rl-games observer's info key (``train.info_key``): every step's infos feed its meter; the row has the value."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from gmiexp.rl.rlgames.observer import EpochReport, GMIObserver
from gmiexp.status import StatusWriter


def test_the_observer_reads_every_steps_infos_and_writes_the_agents_run_wide_value(tmp_path: Path) -> None:
    observer = GMIObserver(StatusWriter(tmp_path, 0), 0, "x_velocity")
    for v in (1.0, 3.0):
        observer.process_infos({"time_outs": torch.zeros(2), "x_velocity": torch.tensor([v, v])}, None)
    assert observer.info is not None and observer.info.epoch_value(1) == 2.0  # the agent closes the epoch
    observer.epoch_done(EpochReport(epoch=1, frame=0, curr_frames=2, world_size=2, timings={"frames": 2}, info=2.5))
    (row,) = [json.loads(x) for x in (tmp_path / "gmis" / "0" / "history.jsonl").read_text().splitlines()]
    assert row["info/x_velocity"] == 2.5  # the agent's figure over the GMIs, not this GMI's own
