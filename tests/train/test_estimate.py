"""The training-time estimate: measured on the run's own batches in its precision, scaled to
the run, and without side effects."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from headwise.intent.training.losses import SmoothedClassification
from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.batching import pad_collate
from headwise.train import TrainConfig, Trainer
from headwise.train.estimate import TrainingEstimate, estimate_training


def _setup():
    torch.manual_seed(0)
    model = EncoderClassifier(ModelConfig(vocab_size=50, d_model=16, num_layers=1,
                                          num_heads=2, d_ff=32, num_labels=3, dropout=0.1))
    rows = [{"input_ids": list(range(1, 2 + i % 7)), "labels": i % 3} for i in range(50)]
    return SmoothedClassification(model, 0.1, None, None, 0.0), rows


def _config(**kw) -> TrainConfig:
    return TrainConfig(**{"batch_size": 8, "epochs": 3, "progress": False, "device": "cpu",
                          "precision": "fp32", **kw})


def test_estimate_scales_to_the_run_and_leaves_the_model_alone():
    wrapper, rows = _setup()
    before = {k: v.clone() for k, v in wrapper.state_dict().items()}
    wrapper.eval()
    rng = torch.get_rng_state()
    lengths = [len(r["input_ids"]) for r in rows]
    est = estimate_training(wrapper, rows, partial(pad_collate, pad_id=0), _config(),
                            lengths=lengths, valid_rows=20, measure=2)
    assert est.steps == 3 * 7 and est.eval_batches == 3 * 3 and est.measured_batches == 2
    assert est.step_seconds > 0 and est.eval_batch_seconds > 0 and est.precision == "fp32"
    assert est.total_seconds == pytest.approx(21 * est.step_seconds + 9 * est.eval_batch_seconds)
    for k, v in wrapper.state_dict().items():
        assert torch.equal(v, before[k]), k  # lr-0 AdamW moved nothing
    assert all(p.grad is None for p in wrapper.parameters())
    assert not wrapper.training and torch.equal(torch.get_rng_state(), rng)
    assert "in fp32 (3 epochs x 7 steps" in est.describe(3)


def test_accumulation_and_max_steps_scale_the_forecast():
    wrapper, rows = _setup()
    lengths = [len(r["input_ids"]) for r in rows]
    est = estimate_training(wrapper, rows, pad_collate, _config(grad_accum_steps=2),
                            lengths=lengths, measure=1)
    assert est.steps == 3 * 4 and est.eval_batches == 0
    est = estimate_training(wrapper, rows, pad_collate, _config(max_steps=5), lengths=lengths,
                            measure=1)
    assert est.steps == 5


def test_the_trainer_estimates_its_own_run_in_its_precision(tmp_path, monkeypatch):
    from headwise.train import precision as precision_module

    monkeypatch.setattr(precision_module, "auto_cpu_precision",
                        lambda: precision_module.PrecisionChoice("bf16", "injected"))
    wrapper, rows = _setup()
    dtypes = []
    wrapper.model.classifier.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    trainer = Trainer(wrapper, _config(precision="auto"), rows, valid_data=rows[:10],
                      collate_fn=pad_collate, out_dir=tmp_path)
    est = trainer.estimate(measure=2)
    assert est.precision == "bf16" and dtypes and set(dtypes) == {torch.bfloat16}
    assert est.steps == 3 * 7 and est.eval_batches == 3 * 2
    assert "about" in est.describe(3) and "in bf16" in est.describe(3)


def test_the_timed_batches_span_the_epochs_padded_sizes():
    from headwise.text.batching import LengthBucketSampler
    from headwise.train.estimate import _representative

    lengths = [1 + i % 40 for i in range(400)]
    sampler = LengthBucketSampler(lengths, 8, seed=0, bucket_size_multiplier=50)
    sizes = sorted(len(b) * max(lengths[i] for i in b) for b in sampler.global_batches(0))
    chosen = _representative(sampler, lengths, 3)
    got = [len(b) * max(lengths[i] for i in b) for b in chosen]
    assert got == sorted(got) and got[0] < got[-1]
    # their mean is close to the epoch's mean padded size
    assert abs(sum(got) / 3 - sum(sizes) / len(sizes)) <= 0.25 * sum(sizes) / len(sizes)


def test_describe_uses_minutes_for_long_runs():
    est = TrainingEstimate(step_seconds=1.5, eval_batch_seconds=0.5, steps=400,
                           eval_batches=40, measured_batches=3)
    assert est.describe(4).startswith("about 10 min in fp32 (4 epochs x 100 steps, 1.50 s a "
                                      "step")


def test_bad_arguments():
    wrapper, rows = _setup()
    lengths = [len(r["input_ids"]) for r in rows]
    with pytest.raises(ValueError, match="no training rows"):
        estimate_training(wrapper, [], pad_collate, _config(), lengths=[])
    with pytest.raises(ValueError, match="measure"):
        estimate_training(wrapper, rows, pad_collate, _config(), lengths=lengths, measure=0)
    with pytest.raises(ValueError, match="lengths"):
        estimate_training(wrapper, rows, pad_collate, _config(), lengths=lengths[:-1])
