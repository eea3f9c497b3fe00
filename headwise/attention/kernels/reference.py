"""The reference ("math") attention: explicit scores, float32 softmax, per-head weights."""

from __future__ import annotations

import torch
from torch import Tensor


def softmax_rows(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last dim where a row with no allowed key gives zeros, not NaN.

    Rows with no allowed key are softmaxed unmasked and then zeroed, so both the output
    and the gradient of such a row are exactly zero (torch's fused softmax does the rest).

    Args:
        scores: (..., k_len) float scores.
        mask: boolean, broadcastable to ``scores``, True = may attend; or None.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    row_ok = mask.any(-1, keepdim=True)
    w = torch.softmax(scores.masked_fill(~(mask | ~row_ok), float("-inf")), dim=-1)
    return w.masked_fill(~row_ok, 0.0)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax statistics run in float32 for half types, otherwise in the input dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def math_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
                   scale: float, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """softmax(q k^T * scale + bias, masked) v, with grouped-query heads without copies.

    Args:
        q: (batch, heads, q_len, d).
        k, v: (batch, kv_heads, k_len, d / d_v); query head ``h`` uses kv head
            ``h // (heads // kv_heads)``.
        mask: boolean (batch | 1, heads | 1, q_len, k_len), True = may attend, or None.
        bias: additive float scores broadcastable like ``mask``, or None.
        scale: multiplier of the dot products.
        dropout_p: dropout on the attention weights.

    Returns:
        ``(output, weights)``: output (batch, heads, q_len, d_v) in q's dtype, weights
        (batch, heads, q_len, k_len) in float32 (float64 for float64 inputs).
    """
    with torch.autocast(q.device.type, enabled=False):  # dtypes are chosen explicitly here
        return _math(q, k, v, mask, bias, scale, dropout_p)


def _math(q, k, v, mask, bias, scale, dropout_p):
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    g = h // hk
    ct = compute_dtype(q.dtype)
    qg = q.reshape(b, hk, g, lq, d)
    scores = torch.matmul(qg.to(ct) * scale, k.unsqueeze(2).transpose(-1, -2).to(ct))
    scores = scores.reshape(b, h, lq, lk)
    if bias is not None:
        scores = scores + bias.to(ct)
    weights = softmax_rows(scores, mask)
    w = torch.nn.functional.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = torch.matmul(w.reshape(b, hk, g, lq, lk).to(v.dtype), v.unsqueeze(2))
    return out.reshape(b, h, lq, v.shape[-1]), weights
