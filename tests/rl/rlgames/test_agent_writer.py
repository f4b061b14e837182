"""gmiexp's agent closes the TensorBoard writer rl-games opened, however its training loop ends, and writes its axis.

rl-games never closes it; its tensorboardX logger thread, left reading its queue, printed
``Exception in thread ... OSError: handle is closed`` when a GMI's interpreter exited.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import FAST, run_cli

from gmiexp.rl.rlgames.agent import GMISyncMixin


class Writer:
    closed = 0

    def close(self) -> None:
        Writer.closed += 1


class Loop(GMISyncMixin):
    def __init__(self, outcome: Exception | None) -> None:  # no rl-games agent: only the loop's ending matters
        self.writer = Writer()
        self.outcome = outcome

    def _train_loop(self) -> tuple[float, int]:
        if self.outcome is not None:
            raise self.outcome
        return 1.0, 3


@pytest.mark.parametrize("outcome", [None, KeyboardInterrupt(), RuntimeError("a GMI died")])
def test_train_closes_the_writer_however_the_loop_ends(outcome: Exception | None) -> None:
    Writer.closed = 0
    agent = Loop(outcome)
    if outcome is None:
        assert agent.train() == (1.0, 3)
    else:
        with pytest.raises(type(outcome)):
            agent.train()
    assert Writer.closed == 1 and agent.writer is None


def test_tensorboard_steps_are_the_frames_before_each_epoch_as_rl_games_writes_them(tmp_path: Path,
                                                                                   no_orphans: None) -> None:
    """rl-games writes an epoch's figures at the frames trained before it (0 for the first epoch); 2 GMIs count
    both GMIs' frames. The axis was read after the epoch's frames were added, one epoch late."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    r = run_cli(*FAST, "gmis_per_gpu=2", "max_iterations=3", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    (events,) = {p.parent for p in (tmp_path / "rl_games").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(events))
    acc.Reload()
    per_epoch = 2 * 32 * 16  # 2 GMIs x num_envs x horizon_length
    for tag in ("losses/a_loss", "info/kl", "performance/step_fps"):
        assert [e.step for e in acc.Scalars(tag)] == [0, per_epoch, 2 * per_epoch], tag
