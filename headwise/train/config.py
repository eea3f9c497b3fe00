"""Training configuration: one dataclass, round-tripped through JSON."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEDULES = ("linear", "cosine", "constant")
PRECISIONS = ("fp32", "bf16", "fp16", "auto")


@dataclass
class TrainConfig:
    """Everything that decides how a :class:`~headwise.train.Trainer` trains.

    Args:
        lr: peak learning rate of AdamW.
        weight_decay: decoupled (AdamW) weight decay, applied to parameters with two or
            more dimensions only; biases and norm weights (ndim < 2) are never decayed.
        betas: AdamW moment coefficients.
        eps: AdamW denominator epsilon.
        epochs: passes over the training data (ignored when ``max_steps`` is set).
        max_steps: optimizer steps to run, overriding ``epochs``.
        batch_size: global batch size of one forward pass, summed over all
            data-parallel processes (each gets ``batch_size / world_size``).
        grad_accum_steps: batches accumulated into one optimizer step; an update sees
            ``batch_size * grad_accum_steps`` examples.
        warmup_steps: steps of linear warmup; when 0, ``warmup_ratio`` of all steps.
        warmup_ratio: warmup as a fraction of all optimizer steps.
        schedule: learning-rate decay after warmup: "linear", "cosine" or "constant".
        max_grad_norm: clip the global gradient L2 norm to this; None disables clipping.
        precision: "auto" (bf16 autocast where the device runs it fast, else fp32),
            "fp32", "bf16" or "fp16" (CUDA only, with a loss scaler). On the CPU "auto"
            takes bf16 only with native BF16 instructions that a short probe finds faster
            than fp32 (:func:`~headwise.train.precision.resolve_precision`); on CUDA bf16,
            or fp16 without it. Weights stay fp32 in every case.
        gradient_checkpointing: recompute activations in backward; the model must have
            ``set_gradient_checkpointing(enabled)``.
        seed: seeds torch, ``random`` and numpy, and the data order.
        eval_every: evaluate every this many optimizer steps, or "epoch".
        early_stopping_metric: key of the validation metrics that decides the best
            checkpoint (the trainer's own validation metric is "loss").
        early_stopping_mode: "min" or "max": whether smaller or larger is better.
        patience: stop after this many evaluations without improvement; None never
            stops early (the best checkpoint is still tracked).
        checkpoint_every: save a checkpoint every this many steps; None saves at the end
            of every epoch. Training also saves at every new best and at the end.
        keep_checkpoints: most recent checkpoints kept (the best one is always kept);
            None keeps all.
        num_workers: DataLoader worker processes.
        log_every: write a metrics line every this many steps.
        progress: show a tqdm progress bar.
        shuffle: shuffle the training data every epoch.
        drop_last: drop the last, smaller batch of every epoch.
        bucket_size_multiplier: batches per length-sorted chunk of the sampler.
        device: "cpu", "cuda", "cuda:1", ...; None picks CUDA when available.

    Raises:
        ValueError: an out-of-range or unknown value.
    """

    lr: float = 5e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    epochs: int = 3
    max_steps: int | None = None
    batch_size: int = 32
    grad_accum_steps: int = 1
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    schedule: str = "linear"
    max_grad_norm: float | None = 1.0
    precision: str = "fp32"
    gradient_checkpointing: bool = False
    seed: int = 0
    eval_every: int | str = "epoch"
    early_stopping_metric: str = "loss"
    early_stopping_mode: str = "min"
    patience: int | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int | None = 2
    num_workers: int = 0
    log_every: int = 10
    progress: bool = True
    shuffle: bool = True
    drop_last: bool = False
    bucket_size_multiplier: int = 50
    device: str | None = None

    def __post_init__(self) -> None:
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1), got {self.betas}")
        for name in ("epochs", "batch_size", "grad_accum_steps", "log_every",
                     "bucket_size_multiplier"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("max_steps", "patience", "checkpoint_every", "keep_checkpoints"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        if self.warmup_steps < 0 or not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"need warmup_steps >= 0 and 0 <= warmup_ratio < 1, got "
                             f"{self.warmup_steps}, {self.warmup_ratio}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be positive or None, got {self.max_grad_norm}")
        if self.eval_every != "epoch" and (not isinstance(self.eval_every, int)
                                           or self.eval_every <= 0):
            raise ValueError(f"eval_every must be a positive step count or 'epoch', "
                             f"got {self.eval_every!r}")
        if self.early_stopping_mode not in ("min", "max"):
            raise ValueError(f"early_stopping_mode must be 'min' or 'max', "
                             f"got {self.early_stopping_mode!r}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``betas`` as a list)."""
        out = dataclasses.asdict(self)
        out["betas"] = list(self.betas)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output.

        Raises:
            ValueError: unknown keys (a typo would otherwise be silently ignored).
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig fields: {unknown}")
        kwargs = dict(data)
        if "betas" in kwargs:
            kwargs["betas"] = tuple(kwargs["betas"])
        return cls(**kwargs)

    def to_json(self, path: str | Path) -> None:
        """Write the config as a JSON file."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_json(cls, path: str | Path) -> TrainConfig:
        """Read a config written by :meth:`to_json`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def warmup_for(self, total_steps: int) -> int:
        """Warmup steps for a run of ``total_steps`` optimizer steps."""
        if self.warmup_steps:
            return min(self.warmup_steps, total_steps)
        return int(round(self.warmup_ratio * total_steps))
