"""Attention patterns: which query may attend which key.

Convention everywhere: ``True`` = may attend. A pattern is an immutable object with one
rule, :meth:`AttentionPattern.allowed`, written with broadcasting integer index tensors
``(b, h, q_idx, kv_idx)``. That single rule renders three ways:

* :meth:`AttentionPattern.to_dense`: a boolean tensor ``(batch | 1, 1, q_len, k_len)``
  (:meth:`AttentionPattern.to_broadcast`: the same before broadcasting, for SDPA);
* :meth:`AttentionPattern.to_block_mask`: a FlexAttention ``BlockMask`` (cached);
* :meth:`AttentionPattern.block_layout`: which (query block, key block) tiles hold any
  allowed pair and which are entirely allowed, used by the tiled kernel to skip work.

Patterns combine with ``&`` (both allow), ``|`` (either allows) and ``~`` (negation).

Alignment when ``q_len != k_len`` (a KV cache holds more keys than there are new
queries): ``"top_left"`` puts query ``i`` at key position ``i``; ``"bottom_right"`` puts
it at ``i + k_len - q_len`` so the last query lines up with the last key.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from headwise.attention.masks.kinds import (
    BigBird,
    Causal,
    Documents,
    GlobalTokens,
    KeyPadding,
    SlidingWindow,
)
from headwise.attention.masks.pattern import (
    Align,
    And,
    AttentionPattern,
    DenseMask,
    Not,
    Or,
    as_pattern,
)


def causal(align: Align = "top_left") -> AttentionPattern:
    """Causal mask; ``align`` places queries when ``q_len != k_len`` (see module doc).

    Raises:
        ValueError: for an unknown alignment.
    """
    return Causal(align)


def key_padding(lengths: Tensor | Sequence[int]) -> AttentionPattern:
    """Mask keys at or past ``lengths[b]`` in batch row ``b``; or, given a boolean
    ``(batch, k_len)`` tensor (True = real token, like an ``attention_mask``), mask the
    keys where it is False.

    Raises:
        ValueError: negative or non 1-D lengths, or a keep-mask that is not 2-D.
    """
    return KeyPadding(lengths)


def sliding_window(window: int, align: Align = "top_left") -> AttentionPattern:
    """Local window: ``|i - j| < window`` (with :func:`causal`: the last ``window`` keys).

    Raises:
        ValueError: if ``window <= 0``.
    """
    return SlidingWindow(window, align)


def global_tokens(positions: Sequence[int] | Tensor) -> AttentionPattern:
    """Tokens at ``positions`` attend everywhere and are attended from everywhere."""
    return GlobalTokens(positions)


def bigbird(block_size: int, num_random_blocks: int, seed: int = 0, *,
            num_window_blocks: int = 3, num_global_blocks: int = 1) -> AttentionPattern:
    """BigBird window + global + seeded random blocks (see :class:`BigBird`)."""
    return BigBird(block_size, num_random_blocks, seed, num_window_blocks=num_window_blocks,
                   num_global_blocks=num_global_blocks)


def documents(lengths: Sequence[int] | Sequence[Sequence[int]]) -> AttentionPattern:
    """Packed documents of the given lengths attend only within themselves."""
    return Documents(lengths)


def from_tensor(mask: Tensor) -> AttentionPattern:
    """Wrap a boolean tensor ``(batch | 1, 1, q_len, k_len)`` so it combines with patterns."""
    return DenseMask(mask)


__all__ = [
    "And", "AttentionPattern", "BigBird", "Causal", "DenseMask", "Documents", "GlobalTokens",
    "KeyPadding", "Not", "Or", "SlidingWindow", "as_pattern", "bigbird", "causal", "documents",
    "from_tensor", "global_tokens", "key_padding", "sliding_window",
]
