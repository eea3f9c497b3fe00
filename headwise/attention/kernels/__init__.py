"""``attend(q, k, v, ...)``: one call in front of every attention kernel, and its dispatcher.

Backends:

* ``"math"``: the reference; explicit scores, float32 softmax; the only one that can
  return per-head weights.
* ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels).
* ``"tiled"``: online softmax over tiles, O(n) memory, recomputing backward; skips tiles
  a sparse pattern forbids.
* ``"flex"``: compiled FlexAttention with cached block masks (no backward on CPU).
* ``"auto"``: :func:`select_backend` picks the fastest backend that is correct for the
  request.
"""

from __future__ import annotations

import math

from torch import Tensor

from headwise.attention.kernels.flex import flex_attention, flex_available, supports_backward
from headwise.attention.kernels.reference import math_attention
from headwise.attention.kernels.sdpa import sdpa_attention
from headwise.attention.kernels.tiled import (
    DEFAULT_BLOCK_K,
    DEFAULT_BLOCK_Q,
    MaskTiles,
    tiled_attention,
)
from headwise.attention.kernels.validate import (
    AttentionShape,
    check_bias,
    check_mask,
    check_qkv,
)
from headwise.attention.masks import AttentionPattern

BACKENDS = ("auto", "math", "sdpa", "tiled", "flex")

#: a non-causal pattern at least this long whose tiles are mostly empty goes to "tiled"
SPARSE_MIN_LEN = 4096
#: ... when at most this fraction of its tiles hold any allowed pair
SPARSE_MAX_DENSITY = 0.25


def select_backend(q: Tensor, k: Tensor, mask: Tensor | AttentionPattern | None = None, *,
                   dropout_p: float = 0.0, return_weights: bool = False,
                   bias: Tensor | None = None) -> str:
    """The backend ``attend(..., backend="auto")`` runs for this request.

    Rules (measured in ``benchmarks/attention.py``):

    1. per-head weights requested: ``"math"``, the only backend that returns them;
    2. a sparse pattern (not merely causal) at long length whose tiles are mostly empty:
       ``"tiled"``, which skips the empty tiles (SDPA computes every one);
    3. otherwise ``"sdpa"``: PyTorch's fused kernels are the fastest dense path on CPU and
       GPU, handle dropout, grouped heads, biases and fully masked rows, and keep memory
       O(n) when no dense mask is needed.

    Args:
        q, k: the query and key tensors of the call.
        mask, dropout_p, return_weights, bias: as for :func:`attend`.

    Returns:
        One of ``"math"``, ``"sdpa"``, ``"tiled"``.
    """
    if return_weights:
        return "math"
    n = max(q.shape[2], k.shape[2])
    if (isinstance(mask, AttentionPattern) and mask.causal_alignment() is None
            and dropout_p == 0.0 and n >= SPARSE_MIN_LEN):
        tiles = MaskTiles(mask, q.shape[2], k.shape[2], DEFAULT_BLOCK_Q, DEFAULT_BLOCK_K,
                          q.device)
        if tiles.density() <= SPARSE_MAX_DENSITY:
            return "tiled"
    return "sdpa"


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | AttentionPattern | None = None, *,
           backend: str = "auto", scale: float | None = None, dropout_p: float = 0.0,
           return_weights: bool = False, bias: Tensor | None = None
           ) -> Tensor | tuple[Tensor, Tensor]:
    """Scaled dot-product attention: ``softmax(q k^T * scale + bias, mask) v``.

    Args:
        q: (batch, heads, q_len, head_dim).
        k: (batch, kv_heads, k_len, head_dim), heads a multiple of kv_heads (grouped-query
            and multi-query attention: query head ``h`` uses kv head
            ``h // (heads // kv_heads)``).
        v: (batch, kv_heads, k_len, v_dim).
        mask: None, a boolean tensor broadcastable to (batch, heads, q_len, k_len) with
            True = may attend, or a pattern from :mod:`headwise.attention.masks`.
        backend: ``"auto"``, ``"math"``, ``"sdpa"``, ``"tiled"`` or ``"flex"``.
        scale: dot-product multiplier; default ``1 / sqrt(head_dim)``.
        dropout_p: dropout probability on the attention weights (pass 0 in eval).
        return_weights: also return the (batch, heads, q_len, k_len) weights (math only).
        bias: additive float scores broadcastable like ``mask`` (ALiBi, T5 buckets).

    Returns:
        The output (batch, heads, q_len, v_dim) in q's dtype, or ``(output, weights)``
        when ``return_weights``. A query row with no allowed key gives zeros (and zero
        gradients) on every backend.

    Raises:
        TypeError: non-tensor or mixed-dtype inputs, a non-boolean mask, a non-float bias.
        ValueError: inconsistent shapes, a mask that does not broadcast exactly, an
            unknown backend, or an option the chosen backend cannot honour.
        RuntimeError: ``"flex"`` with gradients on a device where it has no backward.
    """
    shape: AttentionShape = check_qkv(q, k, v)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    mask = check_mask(mask, shape, q.device)
    bias = check_bias(bias, shape, q)
    if scale is None:
        scale = 1.0 / math.sqrt(shape.head_dim)
    if backend == "auto":
        backend = select_backend(q, k, mask, dropout_p=dropout_p,
                                 return_weights=return_weights, bias=bias)
    if return_weights and backend != "math":
        raise ValueError(f"return_weights=True needs backend='math' (or 'auto'), not {backend!r}")
    if dropout_p > 0 and backend in ("tiled", "flex"):
        raise ValueError(f"backend {backend!r} has no attention dropout; use 'sdpa' or 'math'")
    if backend == "math":
        dense = mask.to_dense(shape.q_len, shape.k_len, device=q.device) \
            if isinstance(mask, AttentionPattern) else mask
        out, weights = math_attention(q, k, v, dense, bias, scale, dropout_p)
        return (out, weights) if return_weights else out
    if backend == "sdpa":
        return sdpa_attention(q, k, v, mask, bias, scale, dropout_p)
    if backend == "tiled":
        return tiled_attention(q, k, v, mask, bias, scale)
    if not flex_available(q.device):
        raise RuntimeError(f"FlexAttention is not available on {q.device}")
    return flex_attention(q, k, v, mask, bias, scale)


__all__ = [
    "BACKENDS",
    "attend",
    "flex_attention",
    "math_attention",
    "sdpa_attention",
    "select_backend",
    "supports_backward",
    "tiled_attention",
]
