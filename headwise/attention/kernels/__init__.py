"""``attend(q, k, v, ...)``: one call in front of every attention kernel, and its dispatcher.

Backends:

* ``"math"``: the reference; explicit scores, float32 softmax; the only one that can
  return per-head weights.
* ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels).
* ``"tiled"``: online softmax over tiles, O(n) memory, recomputing backward; skips tiles
  a sparse pattern forbids.
* ``"blocksparse"``: only the key blocks a sparse pattern needs, gathered and run through
  SDPA as one batch of blocks; O(n * window) time and memory, with autograd on every
  device (so sparse patterns train on CPU).
* ``"flex"``: compiled FlexAttention with cached block masks (no backward on CPU).
* ``"auto"``: :func:`select_backend` picks the fastest backend that is correct for the
  request.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from headwise.attention.kernels.blocksparse import (
    DEFAULT_BLOCK,
    block_plan,
    blocksparse_attention,
)
from headwise.attention.kernels.flex import (
    CPU_DTYPES,
    flex_attention,
    flex_available,
    supports_backward,
)
from headwise.attention.kernels.reference import math_attention
from headwise.attention.kernels.sdpa import sdpa_attention
from headwise.attention.kernels.tiled import tiled_attention
from headwise.attention.kernels.validate import (
    AttentionShape,
    check_bias,
    check_mask,
    check_qkv,
)
from headwise.attention.masks import AttentionPattern
from headwise.attention.tracing import building_graph

BACKENDS = ("auto", "math", "sdpa", "tiled", "blocksparse", "flex")

#: a pattern (not merely causal) at least this long is considered for a sparse backend
SPARSE_MIN_LEN = 512
#: ... and taken there when the block-sparse kernel would compute at most this fraction
#: of the ``DEFAULT_BLOCK``-sized tiles (padding slots and the dense rows of global
#: tokens included; see :meth:`~headwise.attention.kernels.blocksparse.BlockPlan.density`).
#: Both thresholds were set below the crossovers that BENCHMARKS ``sparse_dispatch:cpu``
#: measured on the CPU (block-sparse against SDPA with the dense mask, by length and
#: density); the GPU shares them, unmeasured there.
SPARSE_MAX_DENSITY = 0.8
#: the sparse backend per device type, where it is not "blocksparse": FlexAttention on CUDA,
#: where it is compiled for the GPU and has a backward (not yet measured against
#: "blocksparse" there). Requests FlexAttention cannot serve (dropout, float64) stay on
#: "blocksparse".
SPARSE_BACKEND = {"cuda": "flex"}
#: with gradients on the CPU and no more keys than this (by the dtype of q), the math kernel
#: (batched matmuls, a float32 softmax whose weights the backward reuses) is faster forward
#: and backward than PyTorch's fused CPU kernel, which loops over (batch, head) blocks and
#: recomputes the weights in its backward ...
CPU_GRAD_MATH_MAX_KEYS = {torch.float32: 48, torch.bfloat16: 128}
#: ... once the call has at least this many scores (batch x heads x queries x keys): below
#: it the math kernel's dozen small operations cost more than the fused kernel's one (an
#: explanation's few interpolated points of one short text, for one). Both set at or inside
#: the crossovers BENCHMARKS ``cpu_finetune:cpu`` measures (its attention part, by shape,
#: dtype and length). A dtype not listed stays on SDPA.
CPU_GRAD_MATH_MIN_SCORES = {torch.float32: 40_000, torch.bfloat16: 16_000}


def select_backend(q: Tensor, k: Tensor, mask: Tensor | AttentionPattern | None = None, *,
                   dropout_p: float = 0.0, return_weights: bool = False,
                   bias: Tensor | None = None) -> str:
    """The backend ``attend(..., backend="auto")`` runs for this request.

    Rules (thresholds are the module constants above; ``benchmarks/attention.py`` measures
    the dense choices at long lengths, ``benchmarks/cpu_finetune.py`` the CPU's short ones
    with dropout and gradients, ``benchmarks/sparse_dispatch.py`` the sparse thresholds):

    1. per-head weights requested: ``"math"``, the only backend that returns them;
    2. a sparse pattern (not merely causal: SDPA's ``is_causal`` already skips the
       forbidden half) of length at least :data:`SPARSE_MIN_LEN` whose block plan computes
       at most :data:`SPARSE_MAX_DENSITY` of the tiles: the device's entry in
       :data:`SPARSE_BACKEND` (``"flex"`` on CUDA, when FlexAttention is available, no
       dropout is asked for and the dtype is a float32 or half type), else
       ``"blocksparse"``, which computes only those tiles and has a backward everywhere;
    3. attention dropout on the CPU: ``"math"``. PyTorch's CPU SDPA has no fused dropout:
       with ``dropout_p > 0`` it runs its own explicit math path (the weights materialised,
       one Bernoulli draw per weight); the math kernel does the same work with the mask
       drawn in bulk (:func:`headwise.attention.dropout`), faster forward and
       backward at the lengths intent training runs (BENCHMARKS ``cpu_finetune:cpu``, the
       dropout part);
    4. gradients on the CPU (``torch.is_grad_enabled()`` and q or k requiring them; not while
       tracing or compiling, whose graphs serve inference) with at most
       :data:`CPU_GRAD_MATH_MAX_KEYS` keys and at least :data:`CPU_GRAD_MATH_MIN_SCORES`
       scores for q's dtype: ``"math"``, faster forward and backward there than PyTorch's
       fused CPU kernel (BENCHMARKS ``cpu_finetune:cpu``, the attention part): fine-tuning
       without attention dropout, and explanations (gradients in eval mode) of long texts
       only: an intent-length text's explanation stays under the minimum size (the explain
       part);
    5. otherwise ``"sdpa"``: PyTorch's fused kernels are the fastest dense path on CPU and
       GPU, handle dropout (on the GPU), grouped heads, biases and fully masked rows, and
       keep memory O(n) when no dense mask is needed.

    Args:
        q, k: the query and key tensors of the call.
        mask, dropout_p, return_weights, bias: as for :func:`attend`.

    Returns:
        One of ``"math"``, ``"sdpa"``, ``"blocksparse"``, ``"flex"``.
    """
    if return_weights:
        return "math"
    lq, lk = q.shape[2], k.shape[2]
    if (isinstance(mask, AttentionPattern) and mask.causal_alignment() is None
            and max(lq, lk) >= SPARSE_MIN_LEN
            and block_plan(mask, lq, lk, DEFAULT_BLOCK, q.device).density()
            <= SPARSE_MAX_DENSITY):
        choice = SPARSE_BACKEND.get(q.device.type, "blocksparse")
        if choice == "flex" and (dropout_p > 0 or q.dtype not in CPU_DTYPES
                                 or not flex_available(q.device)):
            choice = "blocksparse"
        return choice
    if q.device.type == "cpu" and (dropout_p > 0 or _cpu_grad_wants_math(q, k)):
        return "math"
    return "sdpa"


def _cpu_grad_wants_math(q: Tensor, k: Tensor) -> bool:
    """Rule 4 of :func:`select_backend` (the caller checked the device)."""
    if building_graph() or not torch.is_grad_enabled():
        return False
    limit = CPU_GRAD_MATH_MAX_KEYS.get(q.dtype)
    if limit is None or not (q.requires_grad or k.requires_grad) or k.shape[2] > limit:
        return False
    b, h, lq = q.shape[:3]
    return b * h * lq * k.shape[2] >= CPU_GRAD_MATH_MIN_SCORES[q.dtype]


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
        backend: ``"auto"``, ``"math"``, ``"sdpa"``, ``"tiled"``, ``"blocksparse"`` or
            ``"flex"``.
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
        dense = mask.to_broadcast(shape.q_len, shape.k_len, device=q.device) \
            if isinstance(mask, AttentionPattern) else mask
        out, weights = math_attention(q, k, v, dense, bias, scale, dropout_p)
        return (out, weights) if return_weights else out
    if backend == "sdpa":
        return sdpa_attention(q, k, v, mask, bias, scale, dropout_p)
    if backend == "tiled":
        return tiled_attention(q, k, v, mask, bias, scale)
    if backend == "blocksparse":
        return blocksparse_attention(q, k, v, mask, bias, scale, dropout_p)
    if not flex_available(q.device):
        raise RuntimeError(f"FlexAttention is not available on {q.device}")
    return flex_attention(q, k, v, mask, bias, scale)


__all__ = [
    "BACKENDS",
    "attend",
    "block_plan",
    "blocksparse_attention",
    "flex_attention",
    "math_attention",
    "sdpa_attention",
    "select_backend",
    "supports_backward",
    "tiled_attention",
]
