"""The training-time estimate: measured, scaled to the run, and without side effects."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from headwise.intent.training.losses import SmoothedClassification
from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.batching import pad_collate
from headwise.train.estimate import TrainingEstimate, estimate_training


def _setup():
    torch.manual_seed(0)
    model = EncoderClassifier(ModelConfig(vocab_size=50, d_model=16, num_layers=1,
                                          num_heads=2, d_ff=32, num_labels=3, dropout=0.1))
    rows = [{"input_ids": list(range(1, 2 + i % 7)), "labels": i % 3} for i in range(50)]
    return SmoothedClassification(model, 0.1, None, None, 0.0), rows


def test_estimate_scales_to_the_run_and_leaves_the_model_alone():
    wrapper, rows = _setup()
    before = {k: v.clone() for k, v in wrapper.state_dict().items()}
    wrapper.eval()
    rng = torch.get_rng_state()
    est = estimate_training(wrapper, rows, partial(pad_collate, pad_id=0), batch_size=8,
                            epochs=3, valid_rows=20, measure=2)
    assert est.steps == 3 * 7 and est.eval_batches == 3 * 3 and est.measured_batches == 2
    assert est.step_seconds > 0 and est.eval_batch_seconds > 0
    assert est.total_seconds == pytest.approx(21 * est.step_seconds + 9 * est.eval_batch_seconds)
    for k, v in wrapper.state_dict().items():
        assert torch.equal(v, before[k]), k  # lr-0 AdamW moved nothing
    assert all(p.grad is None for p in wrapper.parameters())
    assert not wrapper.training and torch.equal(torch.get_rng_state(), rng)
    assert "3 epochs x 7 steps" in est.describe(3)


def test_describe_uses_minutes_for_long_runs():
    est = TrainingEstimate(step_seconds=1.5, eval_batch_seconds=0.5, steps=400,
                           eval_batches=40, measured_batches=3)
    assert est.describe(4).startswith("about 10 min (4 epochs x 100 steps, 1.50 s a step")


def test_bad_arguments():
    wrapper, rows = _setup()
    with pytest.raises(ValueError, match="no training rows"):
        estimate_training(wrapper, [], pad_collate, batch_size=8, epochs=1)
    with pytest.raises(ValueError, match="measure"):
        estimate_training(wrapper, rows, pad_collate, batch_size=8, epochs=1, measure=0)
