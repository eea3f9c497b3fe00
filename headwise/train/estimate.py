"""How long a training run will take, measured before it starts.

:func:`estimate_training` times a few real training steps of the model (forward, backward
and an AdamW update) and a validation forward pass, and scales them to the run's steps: a
user who starts a 12-layer encoder on two CPU cores learns up front whether it is minutes
or hours. The update is timed with a throw-away AdamW at learning rate 0, which leaves
every weight exactly as it was (``p - 0 * u == p`` and ``p * (1 - 0 * wd) == p``).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["TrainingEstimate", "estimate_training"]


@dataclass(frozen=True)
class TrainingEstimate:
    """A measured forecast of a training run.

    Attributes:
        step_seconds: median seconds of one training step: forward, backward and the
            AdamW update.
        eval_batch_seconds: median seconds of one validation batch's forward pass.
        steps: optimizer steps of the run (every epoch).
        eval_batches: validation batches of the run (every epoch).
        measured_batches: how many batches were timed.
    """

    step_seconds: float
    eval_batch_seconds: float
    steps: int
    eval_batches: int
    measured_batches: int

    @property
    def total_seconds(self) -> float:
        """The forecast: ``steps * step_seconds + eval_batches * eval_batch_seconds``."""
        return self.steps * self.step_seconds + self.eval_batches * self.eval_batch_seconds

    def describe(self, epochs: int) -> str:
        """One line for a user, e.g. ``about 14 min (4 epochs x 313 steps, 0.61 s a
        step measured on 3 batches, plus validation)``."""
        total = self.total_seconds
        when = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
        per_epoch = self.steps // max(epochs, 1)
        return (f"about {when} ({epochs} epochs x {per_epoch} steps, {self.step_seconds:.2f} "
                f"s a step measured on {self.measured_batches} batches, plus validation)")


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def estimate_training(module: nn.Module, train_rows: Sequence[Mapping[str, Any]],
                      collate_fn: Callable[[list[Any]], Mapping[str, Tensor]], *,
                      batch_size: int, epochs: int, valid_rows: int = 0,
                      measure: int = 3, seed: int = 0) -> TrainingEstimate:
    """Time ``measure`` random training batches and forecast ``epochs`` of training.

    The module's ``forward(**batch)`` must return ``{"loss": ...}`` (as the Trainer's). Its
    gradients are cleared afterwards, its weights are never changed (the AdamW update runs
    at learning rate 0), its train/eval mode and torch's random state are restored. One
    extra batch is run first, untimed (the first call pays for allocation).

    Args:
        module: the module the Trainer will train.
        train_rows: the training examples, as the Trainer gets them.
        collate_fn: the Trainer's collate function.
        batch_size: examples per step.
        epochs: epochs of the run.
        valid_rows: validation examples scored after every epoch.
        measure: batches to time (the median is used).
        seed: which batches are drawn.

    Raises:
        ValueError: no training rows, or ``measure`` below 1.
    """
    if not train_rows:
        raise ValueError("cannot estimate a run with no training rows")
    if measure < 1:
        raise ValueError(f"measure must be >= 1, got {measure}")
    rng = random.Random(seed)
    batches = [collate_fn([train_rows[rng.randrange(len(train_rows))]
                           for _ in range(min(batch_size, len(train_rows)))])
               for _ in range(measure + 1)]
    was_training = module.training
    device = next(module.parameters()).device
    rng_state = torch.get_rng_state()  # dropout draws: the run itself stays as seeded

    def on_device(batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}

    params = [p for p in module.parameters() if p.requires_grad]
    # learning rate 0: the update runs (and is timed) but moves no weight
    optimizer = torch.optim.AdamW(params, lr=0.0, weight_decay=0.01)

    def train_step(batch: Mapping[str, Tensor]) -> None:
        module.zero_grad(set_to_none=True)
        module(**on_device(batch))["loss"].backward()
        optimizer.step()

    def eval_step(batch: Mapping[str, Tensor]) -> None:
        with torch.no_grad():
            module(**on_device(batch))

    try:
        module.train()
        train_step(batches[0])
        step = statistics.median(_timed(lambda b=b: train_step(b)) for b in batches[1:])
        module.eval()
        evaluation = statistics.median(_timed(lambda b=b: eval_step(b)) for b in batches[1:])
    finally:
        module.zero_grad(set_to_none=True)
        module.train(was_training)
        torch.set_rng_state(rng_state)
        optimizer.state.clear()
    per_epoch = math.ceil(len(train_rows) / batch_size)
    eval_batches = math.ceil(valid_rows / batch_size) * epochs
    return TrainingEstimate(step_seconds=step, eval_batch_seconds=evaluation,
                            steps=per_epoch * epochs, eval_batches=eval_batches,
                            measured_batches=measure)
