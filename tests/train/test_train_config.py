"""TrainConfig: JSON round trip and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwise.train import TrainConfig


def test_json_round_trip(tmp_path: Path):
    cfg = TrainConfig(lr=3e-4, betas=(0.8, 0.9), max_steps=100, eval_every=50,
                      early_stopping_metric="macro_f1", early_stopping_mode="max",
                      patience=3, precision="bf16", schedule="cosine", max_grad_norm=None)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    cfg.to_json(tmp_path / "train.json")
    back = TrainConfig.from_json(tmp_path / "train.json")
    assert back == cfg and back.betas == (0.8, 0.9)


def test_unknown_field_is_refused():
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 0.1})


@pytest.mark.parametrize("bad", [
    {"lr": 0}, {"batch_size": 0}, {"schedule": "step"}, {"precision": "fp8"},
    {"eval_every": 0}, {"eval_every": "sometimes"}, {"early_stopping_mode": "best"},
    {"patience": 0}, {"warmup_ratio": 1.0}, {"betas": (0.9, 1.0)}, {"max_grad_norm": 0.0},
    {"grad_accum_steps": 0}, {"keep_checkpoints": 0},
])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError):
        TrainConfig(**bad)
