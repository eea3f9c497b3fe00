"""The reference ("math") attention: explicit scores, float32 softmax, per-head weights."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from headwise.attention.dropout import dropout
from headwise.attention.tracing import building_graph

#: float32 lanes of one vector register, by ATen's CPU capability: torch's CPU softmax over
#: a last dimension shorter than this takes a scalar path, much slower per element
#: (BENCHMARKS ``cpu_finetune:cpu``, the dropout part)
_LANES = {"AVX512": 16, "AVX2": 8}
#: below this many keys the scalar path is cheaper than padding a row to a register
_MIN_PADDED = 4


@functools.cache
def _cpu_lanes() -> int:
    """The float32 lanes of this CPU's vector register for ATen's kernels (0: unknown), read
    once: the capability does not change while the process runs."""
    return _LANES.get(torch.backends.cpu.get_cpu_capability(), 0)


def _softmax(scores: Tensor) -> Tensor:
    """``torch.softmax`` over the last dim; on the CPU, a row shorter than one vector
    register is padded to one with -inf first (the same values, no scalar path)."""
    n = scores.shape[-1]
    # not while tracing (torch.export, ONNX): the padding's width would be baked into a graph
    # that serves every length
    if scores.device.type == "cpu" and n >= _MIN_PADDED and not building_graph():
        lanes = _cpu_lanes()
        if n < lanes:
            padded = F.pad(scores, (0, lanes - n), value=float("-inf"))
            return torch.softmax(padded, dim=-1)[..., :n]
    return torch.softmax(scores, dim=-1)


def softmax_rows(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last dim where a row with no allowed key gives zeros, not NaN.

    Rows with no allowed key are softmaxed unmasked and then zeroed, so both the output
    and the gradient of such a row are exactly zero (torch's fused softmax does the rest).

    Args:
        scores: (..., k_len) float scores.
        mask: boolean, broadcastable to ``scores``, True = may attend; or None.
    """
    if mask is None:
        return _softmax(scores)
    row_ok = mask.any(-1, keepdim=True)
    w = _softmax(scores.masked_fill(~(mask | ~row_ok), float("-inf")))
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
        mask: boolean, broadcastable to (batch, heads, q_len, k_len), True = may attend,
            or None.
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
    w = dropout(weights, dropout_p)
    out = torch.matmul(w.reshape(b, hk, g, lq, lk).to(v.dtype), v.unsqueeze(2))
    return out.reshape(b, h, lq, v.shape[-1]), weights
