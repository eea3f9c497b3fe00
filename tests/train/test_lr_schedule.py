"""Warmup + linear / cosine / constant schedules against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from headwise.train import LRSchedule, TrainConfig, lr_factor


def hand_linear(s: int, w: int, t: int) -> float:
    return (s + 1) / w if s < w else (t - s) / (t - w)


def hand_cosine(s: int, w: int, t: int) -> float:
    return (s + 1) / w if s < w else (1 + math.cos(math.pi * (s - w) / (t - w))) / 2


@pytest.mark.parametrize(("w", "t"), [(4, 20), (0, 10), (1, 3), (7, 8)])
def test_factors_match_hand_formulas(w, t):
    for s in range(t):
        assert lr_factor(s, kind="linear", warmup_steps=w, total_steps=t) == pytest.approx(
            hand_linear(s, w, t), abs=1e-12)
        assert lr_factor(s, kind="cosine", warmup_steps=w, total_steps=t) == pytest.approx(
            hand_cosine(s, w, t), abs=1e-12)
        assert lr_factor(s, kind="constant", warmup_steps=w, total_steps=t) == pytest.approx(
            (s + 1) / w if s < w else 1.0)


def test_some_values_written_out():
    kw = dict(warmup_steps=4, total_steps=20)
    assert [lr_factor(s, kind="linear", **kw) for s in (0, 1, 3, 4, 12, 19)] == \
        pytest.approx([0.25, 0.5, 1.0, 1.0, 0.5, 1 / 16])
    assert [lr_factor(s, kind="cosine", **kw) for s in (4, 8, 12, 16)] == \
        pytest.approx([1.0, 0.8535533905932737, 0.5, 0.14644660940672624])
    # the last update of a run still moves, nothing goes negative past the end
    assert lr_factor(19, kind="cosine", **kw) > 0
    assert lr_factor(25, kind="linear", **kw) == 0.0


def test_schedule_drives_every_group_and_saves_its_state():
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.01}])
    sched = LRSchedule(opt, "linear", warmup_steps=2, total_steps=10)
    assert sched.apply(0) == pytest.approx(0.05)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.05, 0.005])
    sched.apply(4)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.075, 0.0075])  # (10-4)/8
    state = sched.state_dict()
    other = LRSchedule(torch.optim.AdamW([{"params": [a], "lr": 9.0},
                                          {"params": [b], "lr": 9.0}]),
                       "linear", warmup_steps=2, total_steps=10)
    other.load_state_dict(state)
    assert other.base_lrs == [0.1, 0.01] and other.last_step == 4


def test_warmup_ratio_and_errors():
    assert TrainConfig(warmup_ratio=0.1).warmup_for(100) == 10
    assert TrainConfig(warmup_steps=5, warmup_ratio=0.5).warmup_for(100) == 5
    with pytest.raises(ValueError, match="schedule"):
        lr_factor(0, kind="step", warmup_steps=0, total_steps=1)
