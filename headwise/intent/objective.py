"""The training objective of an intent classifier: label-smoothed cross-entropy.

:class:`SmoothedClassification` wraps any classifier returning ``{"logits"}`` so the
:class:`~headwise.train.Trainer` trains it with label smoothing (Szegedy et al. 2016):
the target puts ``1 - eps`` on the true intent and spreads ``eps`` uniformly, which keeps
a small-data classifier from becoming over-confident. The wrapped model is trained in
place; after training use it directly.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class SmoothedClassification(nn.Module):
    """``model`` plus a label-smoothed cross-entropy loss.

    Args:
        model: a classifier whose ``forward(input_ids, attention_mask)`` returns
            ``{"logits": (batch, classes)}``.
        label_smoothing: the smoothing ``eps`` in [0, 1).

    Raises:
        ValueError: ``label_smoothing`` outside [0, 1).
    """

    def __init__(self, model: nn.Module, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.model = model
        self.label_smoothing = float(label_smoothing)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None) -> dict[str, Tensor]:
        """``{"logits"}``, plus ``"loss"`` (mean over the batch) when labels are given."""
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask)["logits"]
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.float(), labels,
                                          label_smoothing=self.label_smoothing)
        return out

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Forward to the wrapped model (the Trainer's gradient checkpointing switch)."""
        fn = getattr(self.model, "set_gradient_checkpointing", None)
        if fn is None:
            raise TypeError(f"{type(self.model).__name__} has no gradient checkpointing")
        fn(enabled)
