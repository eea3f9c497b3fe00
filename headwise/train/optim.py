"""AdamW with decoupled weight decay on matrices only."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Split the trainable parameters into a decayed and an undecayed group.

    Parameters with two or more dimensions (weight matrices, embeddings) are decayed;
    biases and norm weights (fewer than two dimensions) are not. Frozen parameters are
    left out. Empty groups are dropped.

    Returns:
        Parameter groups for a torch optimizer, in ``named_parameters`` order.
    """
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def build_optimizer(model: nn.Module, *, lr: float, weight_decay: float,
                    betas: tuple[float, float], eps: float) -> torch.optim.AdamW:
    """AdamW over :func:`parameter_groups` (decay is decoupled: ``p -= lr * wd * p``).

    Raises:
        ValueError: the model has no trainable parameter.
    """
    groups = parameter_groups(model, weight_decay)
    if not groups:
        raise ValueError("the model has no trainable parameters")
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
