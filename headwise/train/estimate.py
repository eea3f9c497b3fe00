"""How long a training run will take, measured on a few of its own steps before it starts.

:func:`estimate_training` (what :meth:`Trainer.estimate <headwise.train.Trainer.estimate>`
runs) times real training steps of the run's actual configuration: the batches its
length-bucketed sampler makes in the first epoch (so their padding is the run's), the
precision it resolved (bf16 autocast or fp32), its AdamW (fused where the Trainer's is),
gradient clipping, and a validation forward pass; then scales them to the run. It is the
one source of a training duration that ``headwise train`` prints. The update is timed with
the run's optimizer at learning rate 0, which leaves every weight exactly as it was
(``p - 0 * u == p`` and ``p * (1 - 0 * wd) == p``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from headwise.text.batching import LengthBucketSampler
from headwise.train.batches import loss_of, to_device
from headwise.train.config import TrainConfig
from headwise.train.optim import build_optimizer
from headwise.train.precision import MixedPrecision

__all__ = ["TrainingEstimate", "estimate_training"]


@dataclass(frozen=True)
class TrainingEstimate:
    """A measured forecast of a training run.

    Attributes:
        step_seconds: mean seconds of one optimizer step (forward, backward, clipping and
            the AdamW update of ``grad_accum_steps`` batches), over batches of the run's
            own padded sizes.
        eval_batch_seconds: mean seconds of one validation batch's forward pass.
        steps: optimizer steps of the run (every epoch).
        eval_batches: validation batches of the run (every epoch).
        measured_batches: how many batches were timed.
        precision: the precision the steps ran in ("fp32", "bf16" or "fp16").
    """

    step_seconds: float
    eval_batch_seconds: float
    steps: int
    eval_batches: int
    measured_batches: int
    precision: str = "fp32"

    @property
    def total_seconds(self) -> float:
        """The forecast: ``steps * step_seconds + eval_batches * eval_batch_seconds``."""
        return self.steps * self.step_seconds + self.eval_batches * self.eval_batch_seconds

    def describe(self, epochs: int) -> str:
        """One line for a user, e.g. ``about 14 min in bf16 (4 epochs x 313 steps, 0.61 s
        a step measured on 3 batches, plus validation)``."""
        total = self.total_seconds
        when = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
        per_epoch = self.steps // max(epochs, 1)
        return (f"about {when} in {self.precision} ({epochs} epochs x {per_epoch} steps, "
                f"{self.step_seconds:.2f} s a step measured on {self.measured_batches} "
                f"batches, plus validation)")


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _representative(sampler: LengthBucketSampler, lengths: Sequence[int],
                    measure: int) -> list[list[int]]:
    """``measure`` batches of the first epoch at evenly spaced quantiles of their padded size
    (examples x longest), smallest first: their mean time is the epoch's mean step time."""
    batches = sampler.global_batches(0)
    batches.sort(key=lambda b: len(b) * max(lengths[i] for i in b))
    return [batches[min(int((k + 0.5) / measure * len(batches)), len(batches) - 1)]
            for k in range(measure)]


def estimate_training(module: nn.Module, train_rows: Sequence[Any],
                      collate_fn: Callable[[list[Any]], Mapping[str, Any]],
                      config: TrainConfig, *, lengths: Sequence[int], valid_rows: int = 0,
                      measure: int = 3, precision: str | None = None) -> TrainingEstimate:
    """Time ``measure`` of the run's own batches and forecast the whole run.

    The module's ``forward(**batch)`` must return ``{"loss": ...}`` (as the Trainer's). Its
    gradients are cleared afterwards, its weights are never changed (the update runs at
    learning rate 0), its train/eval mode and torch's random state are restored. The
    largest of the chosen batches runs once first, untimed (the first call pays for
    allocation).

    Args:
        module: the module the Trainer will train (on its training device).
        train_rows: the training examples, as the Trainer gets them.
        collate_fn: the Trainer's collate function.
        config: the run's configuration (batch size, accumulation, epochs, clipping, the
            optimizer's settings, the sampler's seed and buckets).
        lengths: every training example's length, as the Trainer buckets them.
        valid_rows: validation examples scored after every epoch.
        measure: batches to time (their mean is used).
        precision: the resolved precision (default: ``config.precision`` resolved).

    Raises:
        ValueError: no training rows, ``measure`` below 1, or lengths that do not match.
    """
    if not train_rows:
        raise ValueError("cannot estimate a run with no training rows")
    if measure < 1:
        raise ValueError(f"measure must be >= 1, got {measure}")
    if len(lengths) != len(train_rows):
        raise ValueError(f"{len(lengths)} lengths for {len(train_rows)} examples")
    device = next(module.parameters()).device
    amp = MixedPrecision(precision or config.precision, device)
    sampler = LengthBucketSampler(lengths, config.batch_size, shuffle=config.shuffle,
                                  seed=config.seed,
                                  bucket_size_multiplier=config.bucket_size_multiplier,
                                  drop_last=config.drop_last)
    chosen = _representative(sampler, lengths, measure)
    batches = [collate_fn([train_rows[i] for i in b]) for b in chosen]
    was_training = module.training
    rng_state = torch.get_rng_state()  # dropout draws: the run itself stays as seeded
    # learning rate 0: the run's update runs (and is timed) but moves no weight
    optimizer = build_optimizer(module, lr=0.0, weight_decay=config.weight_decay,
                                betas=config.betas, eps=config.eps)
    params = [p for g in optimizer.param_groups for p in g["params"]]

    def forward_backward(batch: Mapping[str, Any]) -> None:
        with amp.autocast():
            loss = loss_of(module(**to_device(batch, device)))
        amp.backward(loss.float())

    def apply_update() -> None:
        amp.unscale_(optimizer)
        if config.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        amp.step(optimizer)
        optimizer.zero_grad(set_to_none=True)

    def eval_batch(batch: Mapping[str, Any]) -> None:
        with torch.no_grad(), amp.autocast():
            module(**to_device(batch, device))

    try:
        module.train()
        forward_backward(batches[-1])  # untimed: the first call allocates
        apply_update()
        backward, update = [], []
        for batch in batches:
            backward.append(_timed(lambda b=batch: forward_backward(b)))
            update.append(_timed(apply_update))
        module.eval()
        evaluation = statistics.fmean(_timed(lambda b=b: eval_batch(b)) for b in batches)
    finally:
        module.zero_grad(set_to_none=True)
        module.train(was_training)
        torch.set_rng_state(rng_state)
        optimizer.state.clear()
    step = (config.grad_accum_steps * statistics.fmean(backward)
            + statistics.fmean(update))
    per_epoch = math.ceil(sampler.batches_per_epoch / config.grad_accum_steps)
    steps = config.max_steps or per_epoch * config.epochs
    eval_batches = math.ceil(valid_rows / config.batch_size) * config.epochs
    return TrainingEstimate(step_seconds=step, eval_batch_seconds=evaluation, steps=steps,
                            eval_batches=eval_batches, measured_batches=measure,
                            precision=amp.precision)
