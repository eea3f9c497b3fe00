"""PyTorch's fused ``scaled_dot_product_attention`` behind ``attend``."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from headwise.attention.masks import AttentionPattern


def sdpa_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | AttentionPattern | None,
                   bias: Tensor | None, scale: float, dropout_p: float = 0.0) -> Tensor:
    """Attention through ``F.scaled_dot_product_attention``.

    A causal pattern that is aligned the way SDPA's ``is_causal`` is (top-left, or any
    alignment when ``q_len == k_len``) takes the ``is_causal`` fast path with no mask
    tensor; any other pattern is rendered densely. Grouped-query heads use SDPA's
    ``enable_gqa``. A bias is folded into a float mask (-inf where forbidden).

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
        mask = mask.to_dense(lq, lk, device=q.device)
    attn_mask = mask
    if bias is not None:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                          scale=scale, enable_gqa=gqa)
