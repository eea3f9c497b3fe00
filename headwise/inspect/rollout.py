"""Attention rollout (Abnar & Zuidema 2020) for the classification token.

Each layer's head-averaged attention is mixed with the identity for the residual path,
``Â = 0.5 A + 0.5 I`` (rows renormalised), and the layers are composed,
``R = Â_L ... Â_1``: row ``i`` of ``R`` says how much of the input token ``j`` reaches
position ``i`` at the top. The classification token is the classifier's pooled vector:
position 0 for ``[CLS]`` pooling, the mean of all real positions for mean pooling, for
max pooling each position weighted by the share of pooled dimensions it supplies (per
example), so its rollout is ``pool @ R`` — computed here as a chain of vector-matrix
products from the left, which never forms ``R`` (O(L n²), not O(L n³)); :func:`rollout_matrix`
forms it, for the service's ``/v1/explain``, which shows the whole matrix.

:func:`head_rollout` gives the same for each head: the pooled row of ``Â_{l,h}`` (that
head alone at layer ``l``) carried down through the head-averaged layers below it — which
input tokens that head's output at the classification position is drawn from.
"""

from __future__ import annotations

import numpy as np


def residual_attention(weights: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """``(1 - residual) A + residual I`` with rows renormalised, for (..., n, n) weights."""
    n = weights.shape[-1]
    mixed = (1.0 - residual) * np.asarray(weights, dtype=np.float64) + residual * np.eye(n)
    return mixed / mixed.sum(-1, keepdims=True)


def pool_vector(n: int, pooling: str | np.ndarray) -> np.ndarray:
    """(n,) the classification token as a mix of positions: ``e_0`` (``"cls"``), uniform
    (``"mean"``), or a given (n,) mix (a max-pooled example's, from
    :func:`~headwise.inspect.forward.max_pool_mix`).

    Raises:
        ValueError: an unknown pooling, ``"max"`` without the example's mix, or a mix of
            another length, with a negative share or not summing to 1.
    """
    if isinstance(pooling, np.ndarray):
        mix = np.asarray(pooling, dtype=np.float64)
        if mix.shape != (n,) or (mix < 0).any() or not np.isclose(mix.sum(), 1.0):
            raise ValueError(f"a pooling mix must be {n} non-negative shares summing to 1, "
                             f"got shape {mix.shape}")
        return mix
    if pooling == "cls":
        v = np.zeros(n)
        v[0] = 1.0
        return v
    if pooling == "mean":
        return np.full(n, 1.0 / n)
    if pooling == "max":
        raise ValueError("a max-pooled model has no fixed mix of positions: pass the "
                         "example's own (headwise.inspect.max_pool_mix: the share "
                         "of pooled dimensions each position supplies)")
    raise ValueError(f"pooling must be 'cls', 'mean' or an (n,) mix of positions, "
                     f"got {pooling!r}")


def rollout_matrix(weights: np.ndarray, residual: float | None = 0.5) -> np.ndarray:
    """The whole rollout matrix ``R = Â_L ... Â_1`` (what ``/v1/explain`` returns).

    Args:
        weights: per-layer attention of one example, bottom layer first: (layers, heads,
            n, n), or a sequence of (heads, n, n) arrays (anything :func:`numpy.asarray`
            takes, CPU tensors included).
        residual: weight of the identity in each layer (0.5: the paper's ``(A + I) / 2``);
            None multiplies the head-averaged weights alone, rows renormalised.

    Returns:
        (n, n) float64: row ``i`` is how much of each input token reaches position ``i``.

    Raises:
        ValueError: no layers, or weights that are not (heads, n, n) per layer.
    """
    layers = [np.asarray(w, dtype=np.float64) for w in weights]
    if not layers:
        raise ValueError("attention rollout needs at least one layer")
    n = layers[0].shape[-1]
    out = np.eye(n)
    for i, w in enumerate(layers):
        if w.ndim != 3 or w.shape[-2:] != (n, n):
            raise ValueError(f"layer {i}: weights must be (heads, {n}, {n}), got {w.shape}")
        a = w.mean(0)
        if residual is None:
            a = a / np.maximum(a.sum(-1, keepdims=True), np.finfo(np.float64).tiny)
        else:
            a = residual_attention(a, residual)
        out = a @ out
    return out


def attention_rollout(weights: np.ndarray, pooling: str | np.ndarray = "cls",
                      residual: float = 0.5) -> np.ndarray:
    """Rollout of the classification token onto the input tokens.

    Args:
        weights: (layers, heads, n, n) attention of one example (real tokens only).
        pooling: ``"cls"``, ``"mean"`` or an (n,) mix of positions (:func:`pool_vector`).
        residual: weight of the identity (the residual connection).

    Returns:
        (n,) non-negative, summing to 1.
    """
    layers = residual_attention(np.asarray(weights, dtype=np.float64).mean(1), residual)
    v = pool_vector(layers.shape[-1], pooling)
    for a in layers[::-1]:
        v = v @ a
    return v


def head_rollout(weights: np.ndarray, pooling: str | np.ndarray = "cls",
                 residual: float = 0.5) -> np.ndarray:
    """Per-head rollout of the classification token.

    Args:
        weights: (layers, heads, n, n) attention of one example.
        pooling: ``"cls"``, ``"mean"`` or an (n,) mix of positions (:func:`pool_vector`).
        residual: weight of the identity.

    Returns:
        (layers, heads, n): row (l, h) is ``pool @ Â_{l,h} @ Â_{l-1} ... Â_1`` with the
        layers below ``l`` head-averaged; each row sums to 1.
    """
    w = np.asarray(weights, dtype=np.float64)
    mean = residual_attention(w.mean(1), residual)
    per_head = residual_attention(w, residual)
    v = pool_vector(w.shape[-1], pooling)
    out = np.empty(w.shape[:3])
    for layer in range(w.shape[0]):
        rows = v @ per_head[layer]  # (heads, n)
        for below in range(layer - 1, -1, -1):
            rows = rows @ mean[below]
        out[layer] = rows
    return out
