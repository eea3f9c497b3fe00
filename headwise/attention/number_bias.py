"""Number-aware attention: a learned per-head score bias on keys that are number tokens.

A bank's intent often turns on one number ("charged twice for 3,500", "下调25个基点",
"第三期"). Plain attention has to learn from the token embeddings alone that such keys
deserve a look. :class:`NumberKeyBias` gives chosen heads one learned scalar each,
``b_h``, added to every score whose key is a number token::

    scores[b, h, i, j] = q_i . k_j / sqrt(d) + b_h * is_number[b, j]

so a head can raise (or lower) its attention on numbers as a whole, by one parameter,
while the other heads stay exactly as they were (their bias is fixed at zero). The
bias starts at ``init`` (0 by default: the model starts as a plain Transformer and the
gradient decides). Whether amount/rate heads form is measured (``benchmarks/compound.py``
and the head report), not assumed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["NumberKeyBias"]


class NumberKeyBias(nn.Module):
    """Learned additive bias of chosen heads towards number-token keys.

    Args:
        num_heads: heads of the attention layer the bias is for.
        heads: which heads get a learned bias (0-based); the others get none.
        init: the starting value of each learned bias.

    Raises:
        ValueError: no heads, a head out of range, or a repeated head.
    """

    def __init__(self, num_heads: int, heads: Sequence[int], *, init: float = 0.0) -> None:
        super().__init__()
        chosen = [int(h) for h in heads]
        if not chosen:
            raise ValueError("heads must name at least one head")
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"heads has repeats: {chosen}")
        bad = [h for h in chosen if not 0 <= h < num_heads]
        if bad:
            raise ValueError(f"heads {bad} out of range for {num_heads} heads")
        self.num_heads = num_heads
        self.heads = tuple(chosen)
        self.weight = nn.Parameter(torch.full((len(chosen),), float(init)))
        select = torch.zeros(num_heads, len(chosen))
        select[chosen, torch.arange(len(chosen))] = 1.0
        self.register_buffer("select", select, persistent=False)

    def per_head(self) -> Tensor:
        """The bias of every head, (num_heads,): learned for the chosen heads, 0 elsewhere."""
        return self.select @ self.weight

    def forward(self, is_number: Tensor) -> Tensor:
        """Score bias for a batch.

        Args:
            is_number: (batch, k_len) bool, True where the key is a flagged token (the
                bias is the same for every query); or (batch, q_len, k_len) bool, True
                where query ``i`` is to get the bias on key ``j`` (a flag with a scope, as
                clause-scoped negation heads use).

        Returns:
            (batch, num_heads, 1, k_len) float bias, broadcast over the queries, or
            (batch, num_heads, q_len, k_len) for per-query flags.

        Raises:
            ValueError: ``is_number`` is neither 2-D nor 3-D.
        """
        w = self.per_head()
        if is_number.ndim == 2:
            return w[None, :, None, None] * is_number[:, None, None, :].to(w.dtype)
        if is_number.ndim == 3:
            return w[None, :, None, None] * is_number[:, None, :, :].to(w.dtype)
        raise ValueError(f"is_number must be (batch, k_len) or (batch, q_len, k_len), got "
                         f"{tuple(is_number.shape)}")

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, heads={list(self.heads)}"
