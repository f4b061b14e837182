"""The fused-Adam swap (``gmiexp.rl.rlgames.lazy.unfused_adam``): one home for every rl-games agent gmiexp builds."""

from __future__ import annotations

import torch
from torch import nn

from gmiexp.device import init_lazy
from gmiexp.rl.rlgames.lazy import unfused_adam


def test_a_device_with_fused_adam_keeps_rl_games_optimiser() -> None:
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    assert unfused_adam(model, opt, 1e-3, 0.0) is opt


def test_lazy_gets_the_same_adam_unfused_and_it_steps() -> None:
    init_lazy()
    model = nn.Linear(3, 2).to("lazy")
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=0.01)  # (fused=True raises on lazy)
    got = unfused_adam(model, opt, 3e-4, 0.01)
    assert got is not opt and not got.defaults["fused"]
    assert got.defaults["lr"] == 3e-4 and got.defaults["weight_decay"] == 0.01 and got.defaults["eps"] == 1e-8
    before = model.weight.detach().cpu().clone()
    model(torch.ones(4, 3, device="lazy")).sum().backward()
    got.step()  # fused Adam raises at construction on lazy: "`fused=True` requires ... supported devices"
    assert not torch.equal(model.weight.detach().cpu(), before)
