"""Deprecated: the service's attention rollout is :func:`headwise.inspect.rollout_matrix`
(one rollout, in ``inspect``, which ``/v1/explain`` uses). This name stays, as a thin
adapter for tensors, for callers of ``headwise.serve.attention_rollout``; see CHANGELOG.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from headwise.inspect.rollout import rollout_matrix

__all__ = ["attention_rollout"]


def attention_rollout(weights: Tensor | Sequence[Tensor], *, add_residual: bool = True
                      ) -> Tensor:
    """Deprecated: ``torch.from_numpy(headwise.inspect.rollout_matrix(weights, 0.5 if
    add_residual else None))``.

    Args:
        weights: per-layer attention, bottom layer first: a (layers, heads, q, k) tensor
            or a sequence of (heads, q, k) tensors, with q == k.
        add_residual: add the identity before renormalising (the paper's rollout).

    Returns:
        (q, k) float64 matrix.

    Raises:
        ValueError: as :func:`~headwise.inspect.rollout.rollout_matrix`.
    """
    warnings.warn("headwise.serve.attention_rollout is deprecated; use "
                  "headwise.inspect.rollout_matrix", DeprecationWarning, stacklevel=2)
    layers = list(weights.unbind(0)) if isinstance(weights, Tensor) else list(weights)
    arrays = [w.detach().to(device="cpu", dtype=torch.float64).numpy() for w in layers]
    return torch.from_numpy(rollout_matrix(arrays, 0.5 if add_residual else None))
