"""Compiled FlexAttention (torch.nn.attention.flex_attention) behind ``attend``.

Patterns become cached ``BlockMask`` objects, so only the blocks a pattern allows are
computed. On CPU, torch 2.13 gives FlexAttention no backward pass: a request that needs
gradients there is refused with a clear error (the dispatcher never sends one).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from headwise.attention.masks import AttentionPattern

_COMPILED: dict[str, Callable] = {}
#: dtypes compiled FlexAttention accepts on CPU (torch 2.13)
CPU_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: recompilations allowed before dynamo falls back to eager (one per pattern x shape)
RECOMPILE_LIMIT = 64


def flex_available(device: torch.device) -> bool:
    """Whether compiled FlexAttention can run on ``device`` with this torch."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return device.type in ("cpu", "cuda")


def supports_backward(device: torch.device) -> bool:
    """FlexAttention has a backward pass on GPUs, not on CPU (torch 2.13)."""
    return device.type == "cuda"


def _compiled_flex() -> Callable:
    from torch.nn.attention.flex_attention import flex_attention

    if "fn" not in _COMPILED:
        # Each new pattern (mask_mod) or shape is one recompilation; dynamo's default limit
        # of 8 would silently drop to the unfused eager path after the 8th pattern.
        import torch._dynamo.config as dynamo_config

        dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
        _COMPILED["fn"] = torch.compile(flex_attention, dynamic=False)
    return _COMPILED["fn"]


def flex_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | AttentionPattern | None,
                   bias: Tensor | None, scale: float, *, compiled: bool = True) -> Tensor:
    """Attention through FlexAttention with a block mask and an optional score bias.

    Args:
        q, k, v: as for :func:`headwise.attention.attend`.
        mask: a pattern (its block mask is cached), a 4-D boolean tensor, or None.
        bias: additive float scores, or None (applied through a ``score_mod``).
        scale: multiplier of the dot products.
        compiled: run the compiled kernel (default); False runs FlexAttention's eager
            reference, which materialises the scores (for debugging).

    Returns:
        (batch, heads, q_len, d_v) in q's dtype.

    Raises:
        RuntimeError: gradients requested on a device where FlexAttention has no backward.
        TypeError: a dtype FlexAttention cannot run on this device (float64 on CPU).
    """
    from torch.nn.attention.flex_attention import create_block_mask
    from torch.nn.attention.flex_attention import flex_attention as eager_flex

    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    needs_grad = needs_grad or (bias is not None and bias.requires_grad and torch.is_grad_enabled())
    if needs_grad and not supports_backward(q.device):
        raise RuntimeError(f"FlexAttention has no backward pass on {q.device.type} in this torch; "
                           "use backend='tiled' or 'sdpa' for training there")
    if q.device.type == "cpu" and q.dtype not in CPU_DTYPES:
        raise TypeError(f"FlexAttention on CPU runs {CPU_DTYPES}, not {q.dtype}")
    b, h, lq, _ = q.shape
    lk = k.shape[2]
    if isinstance(mask, AttentionPattern):
        block_mask = mask.to_block_mask(lq, lk, device=q.device)
    elif mask is not None:
        dense = mask.expand(b, h, lq, lk)

        def mask_mod(bi, hi, qi, ki):
            return dense[bi, hi, qi, ki]

        block_mask = create_block_mask(mask_mod, b, h, lq, lk, device=q.device)
    else:
        block_mask = None
    score_mod = None
    if bias is not None:
        full_bias = bias.expand(b, h, lq, lk)

        def score_mod(score, bi, hi, qi, ki):
            return score + full_bias[bi, hi, qi, ki].to(score.dtype)

    fn = _compiled_flex() if compiled else eager_flex
    out = fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale,
             enable_gqa=h != k.shape[1])
    return out
