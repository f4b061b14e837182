"""gmiexp's agent closes the TensorBoard writer rl-games opened, however its training loop ends, and writes its axis.

rl-games never closes it; its tensorboardX logger thread, left reading its queue, printed
``Exception in thread ... OSError: handle is closed`` when a GMI's interpreter exited.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from tensorboardX import SummaryWriter

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


def test_a_gmi_other_than_0_leaves_no_writer_to_its_central_value_net(tmp_path: Path) -> None:
    """rl-games builds the central value net with the agent's writer before gmiexp closes it on GMI r > 0.

    A closed tensorboardX writer reopens at its next ``add_scalar``: GMI 1 of an mjlab Go1 run (a central value)
    wrote its ``losses/cval_loss`` into a new event file in GMI 0's summaries dir and printed ``handle is closed``
    at its exit.
    """
    agent = Loop(None)
    agent.writer = SummaryWriter(str(tmp_path / "summaries"))
    agent.summaries_dir = str(tmp_path / "summaries")
    agent.central_value_net = SimpleNamespace(writter=agent.writer)
    agent.gmi_ctx = SimpleNamespace(mgr=SimpleNamespace(rank=1, world_size=2, distributed=False))
    agent._take_over_distributed()
    assert agent.writer is None and agent.central_value_net.writter is None
    assert not (tmp_path / "summaries").exists()


# test_tensorboard_steps_are_the_frames_before_each_epoch_as_rl_games_writes_them is in test_sync.py, sharing its
# two-GMI run with the normaliser counts there (one launch instead of two)
