"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Attention weights of one layer say how much each token reads from each token of the layer
below, but the residual connection carries the token itself through as well. Rollout
models that: per layer, average the heads, add the identity (the residual path), and
renormalise each row; then multiply the layers' matrices from the bottom up. Row ``i`` of
the result says how much of each input token reaches position ``i`` at the top.

The per-layer mixing is :func:`headwise.inspect.rollout.residual_attention` (``(A + I)``
renormalised is ``0.5 A + 0.5 I``); this module composes the full matrix for
``/v1/explain``, where the head analysis only needs the pooled row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from headwise.inspect.rollout import residual_attention


def attention_rollout(weights: Tensor | Sequence[Tensor], *, add_residual: bool = True
                      ) -> Tensor:
    """Roll attention out through the layers.

    Args:
        weights: per-layer attention, bottom layer first: a (layers, heads, q, k) tensor
            or a sequence of (heads, q, k) tensors, with q == k (self-attention).
        add_residual: add the identity before renormalising (the paper's rollout); False
            multiplies the head-averaged weights alone.

    Returns:
        (q, k) float64 matrix: ``Â_L @ ... @ Â_1`` with ``Â_l = rownorm(mean_h W_l + I)``.

    Raises:
        ValueError: no layers, or weights that are not square per head.
    """
    layers = list(weights) if not isinstance(weights, Tensor) else list(weights.unbind(0))
    if not layers:
        raise ValueError("attention_rollout needs at least one layer")
    n = layers[0].shape[-1]
    out = torch.eye(n, dtype=torch.float64)
    for i, w in enumerate(layers):
        if w.ndim != 3 or w.shape[-2:] != (n, n):
            raise ValueError(f"layer {i}: weights must be (heads, {n}, {n}), got "
                             f"{tuple(w.shape)}")
        a = w.detach().to(device="cpu", dtype=torch.float64).mean(0)
        if add_residual:
            a = torch.from_numpy(residual_attention(a.numpy(), 0.5))
        else:
            a = a / a.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
        out = a @ out
    return out
