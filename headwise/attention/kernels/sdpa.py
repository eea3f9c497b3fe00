"""PyTorch's fused ``scaled_dot_product_attention`` behind ``attend``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headwise.attention.masks import AttentionPattern


def sdpa_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | AttentionPattern | None,
                   bias: Tensor | None, scale: float, dropout_p: float = 0.0) -> Tensor:
    """Attention through ``F.scaled_dot_product_attention``.

    A causal pattern that is aligned the way SDPA's ``is_causal`` is (top-left, or any
    alignment when ``q_len == k_len``) takes the ``is_causal`` fast path with no mask
    tensor; any other pattern is rendered as the smallest mask that broadcasts
    (:meth:`~headwise.attention.masks.AttentionPattern.to_broadcast`). Grouped-query heads
    use SDPA's ``enable_gqa``. A bias is folded into a float mask (-inf where forbidden).

    Returns:
        (batch, heads, q_len, d_v) in q's dtype. Fully masked rows are zeros.
    """
    lq, lk = q.shape[2], k.shape[2]
    gqa = q.shape[1] != k.shape[1]
    if isinstance(mask, AttentionPattern):
        align = mask.causal_alignment()
        if bias is None and (align == "top_left" or (align is not None and lq == lk)):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True,
                                                  scale=scale, enable_gqa=gqa)
        # the smallest broadcastable mask: SDPA makes an additive mask of its shape, so a
        # key-padding pattern costs (batch, 1, 1, k_len) values, not q_len x k_len per row
        mask = mask.to_broadcast(lq, lk, device=q.device)
    attn_mask = mask
    if bias is not None:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                         scale=scale, enable_gqa=gqa)
    if mask is not None and not zeroes_dead_rows(q.device):
        # a query with no allowed key: zeros, and no gradient through it
        out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return out


def zeroes_dead_rows(device: torch.device) -> bool:
    """Whether PyTorch's SDPA kernels on ``device`` already give zeros for a query with no
    allowed key. On the CPU they do (tests/attention/test_kernels.py); on CUDA the cuDNN
    kernel that SDPA picks for a boolean mask in half precision does not (torch 2.11 on an
    H200 returned other values there: tests/attention/test_cuda.py), so those rows are
    zeroed after the call on every other device."""
    return device.type == "cpu"
