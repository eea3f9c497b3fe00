"""The training objective of an intent classifier: label-smoothed cross-entropy.

:class:`SmoothedClassification` wraps any classifier returning ``{"logits"}`` so the
:class:`~headwise.train.Trainer` trains it with label smoothing (Szegedy et al. 2016):
the target puts ``1 - eps`` on the true intent and spreads ``eps`` uniformly, which keeps
a small-data classifier from becoming over-confident. Optional per-intent weights
(:func:`balanced_class_weights`) make rare intents count as much as frequent ones, which is
what macro-F1 rewards on imbalanced data. The wrapped model is trained in place; after
training use it directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def balanced_class_weights(labels: Sequence[int], num_classes: int) -> Tensor:
    """scikit-learn's "balanced" weights: ``n / (num_classes * count_c)`` per class
    (classes absent from ``labels`` get weight 1).

    Raises:
        ValueError: no labels, or an id outside ``[0, num_classes)``.
    """
    y = torch.as_tensor(list(labels), dtype=torch.long)
    if y.numel() == 0:
        raise ValueError("balanced_class_weights needs labels")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"label ids must be in [0, {num_classes})")
    counts = torch.bincount(y, minlength=num_classes).double()
    weights = torch.where(counts > 0, y.numel() / (num_classes * counts.clamp_min(1)),
                          torch.ones_like(counts))
    return weights.float()


class SmoothedClassification(nn.Module):
    """``model`` plus a label-smoothed cross-entropy loss.

    Args:
        model: a classifier whose ``forward(input_ids, attention_mask)`` returns
            ``{"logits": (batch, classes)}``.
        label_smoothing: the smoothing ``eps`` in [0, 1).
        class_weights: optional (classes,) loss weight per intent (a buffer: it follows
            the module to the device and is saved in training checkpoints).

    Raises:
        ValueError: ``label_smoothing`` outside [0, 1), or non-positive weights.
    """

    def __init__(self, model: nn.Module, label_smoothing: float = 0.0,
                 class_weights: Tensor | None = None) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if class_weights is not None and not bool((class_weights > 0).all()):
            raise ValueError("class weights must be positive")
        self.model = model
        self.label_smoothing = float(label_smoothing)
        self.register_buffer("class_weights", None if class_weights is None
                             else class_weights.float())

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None) -> dict[str, Tensor]:
        """``{"logits"}``, plus ``"loss"`` (mean over the batch) when labels are given."""
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask)["logits"]
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.float(), labels, weight=self.class_weights,
                                          label_smoothing=self.label_smoothing)
        return out

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Forward to the wrapped model (the Trainer's gradient checkpointing switch)."""
        fn = getattr(self.model, "set_gradient_checkpointing", None)
        if fn is None:
            raise TypeError(f"{type(self.model).__name__} has no gradient checkpointing")
        fn(enabled)
