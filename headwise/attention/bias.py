"""Additive attention-score biases: ALiBi and T5 relative position buckets.

A bias has shape ``(1, heads, q_len, k_len)`` and is added to ``q . k / sqrt(d)``
before the softmax. Queries are aligned to keys bottom-right, as with a KV cache:
query row ``i`` sits at absolute position ``i + (k_len - q_len)`` and key column ``j``
at position ``j``. When ``q_len == k_len`` this is simply position ``i``.

* :func:`alibi_slopes` and :class:`ALiBi` -- Press et al., "Train Short, Test Long:
  Attention with Linear Biases Enables Input Length Extrapolation" (2022).
* :class:`T5RelativePositionBias` -- the learned, log-bucketed relative position bias
  of Raffel et al., "Exploring the Limits of Transfer Learning with a Unified
  Text-to-Text Transformer" (T5, 2020).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["ALiBi", "T5RelativePositionBias", "alibi_slopes"]


def _power_of_two_slopes(n: int) -> list[float]:
    """Geometric sequence starting at ``2^(-8/n)`` with ratio ``2^(-8/n)``."""
    ratio = 2.0 ** (-8.0 / n)
    return [ratio ** (k + 1) for k in range(n)]


def alibi_slopes(num_heads: int) -> Tensor:
    """Per-head ALiBi slopes of Press et al.

    For ``num_heads`` a power of two, the slopes are the geometric sequence that starts
    at ``2^(-8/n)`` with ratio ``2^(-8/n)`` (8 heads: ``1/2, 1/4, ..., 1/256``). Otherwise
    they are the slopes for the closest lower power of two ``p``, followed by the
    slopes at indices ``0, 2, 4, ...`` of the sequence for ``2p``, as many as needed.

    Args:
        num_heads: Number of attention heads.

    Returns:
        Float32 tensor of shape ``(num_heads,)``.

    Raises:
        ValueError: If ``num_heads`` is not positive.
    """
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")
    closest = 1 << (num_heads.bit_length() - 1)  # 2^floor(log2(num_heads))
    slopes = _power_of_two_slopes(closest)
    if closest != num_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def _check_lengths(q_len: int, k_len: int) -> None:
    if q_len < 0 or k_len < 0:
        raise ValueError(f"q_len and k_len must be >= 0, got q_len={q_len}, k_len={k_len}")


def _relative_positions(q_len: int, k_len: int, device: torch.device | None) -> Tensor:
    """``key_pos - query_pos`` of shape ``(q_len, k_len)``, queries aligned bottom-right."""
    query_pos = torch.arange(q_len, device=device) + (k_len - q_len)
    key_pos = torch.arange(k_len, device=device)
    return key_pos[None, :] - query_pos[:, None]


class ALiBi(nn.Module):
    """Attention with Linear Biases: ``bias[h, i, j] = -slope[h] * |pos(i) - j|``.

    This is the symmetric form; on the causal part (``j <= pos(i)``) it equals the
    paper's ``slope * (j - pos(i))``. Combine with a causal mask for decoder use.

    Args:
        num_heads: Number of attention heads.

    Raises:
        ValueError: If ``num_heads`` is not positive.
    """

    slopes: Tensor

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def forward(
        self,
        q_len: int,
        k_len: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> Tensor:
        """Build the bias for ``q_len`` queries against ``k_len`` keys.

        Args:
            q_len: Number of queries (the last ``q_len`` positions of the keys' span).
            k_len: Number of keys.
            device: Where to build the bias; defaults to the slopes' device.
            dtype: Floating dtype of the result.

        Returns:
            Tensor of shape ``(1, num_heads, q_len, k_len)``.

        Raises:
            ValueError: If ``q_len`` or ``k_len`` is negative.
        """
        _check_lengths(q_len, k_len)
        device = self.slopes.device if device is None else torch.device(device)
        distance = _relative_positions(q_len, k_len, device).abs().to(torch.float32)
        slopes = self.slopes.to(device=device, dtype=torch.float32)
        bias = -slopes[:, None, None] * distance
        return bias.unsqueeze(0).to(dtype)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"


class T5RelativePositionBias(nn.Module):
    """Learned relative position bias of T5, one scalar per (bucket, head).

    Relative positions ``key_pos - query_pos`` are mapped to buckets by
    :meth:`relative_position_bucket` and each bucket has a learned bias per head.

    Args:
        num_heads: Number of attention heads.
        num_buckets: Number of buckets (split in two halves when bidirectional).
        max_distance: Offsets at or beyond this distance share the last bucket.
        bidirectional: Whether keys after the query get their own buckets (encoder)
            or share bucket 0 (decoder self-attention).

    Raises:
        ValueError: If ``num_heads`` is not positive or the bucket settings are invalid.
    """

    def __init__(
        self,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        if num_heads <= 0:
            raise ValueError(f"num_heads must be positive, got {num_heads}")
        _check_bucket_settings(bidirectional, num_buckets, max_distance)
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    @staticmethod
    def relative_position_bucket(
        relative_position: Tensor,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> Tensor:
        """Map relative positions ``key_pos - query_pos`` to T5 bucket indices.

        Bidirectional: half the buckets serve keys at or before the query, the upper
        half (offset by ``num_buckets / 2``) keys after it, both by distance ``|rel|``.
        Unidirectional: every key after the query falls in bucket 0 and the distance
        is ``-min(rel, 0)``. Within the buckets ``B`` of one direction, distances
        ``0 .. B/2 - 1`` get a bucket each; larger distances ``n`` go to bucket
        ``B/2 + floor(log(n / (B/2)) / log(max_distance / (B/2)) * (B - B/2))``,
        clamped to ``B - 1``. The log is taken in float32, as in T5.

        Args:
            relative_position: Integer tensor of ``key_pos - query_pos``, any shape.
            bidirectional: Whether positive offsets get their own buckets.
            num_buckets: Total number of buckets.
            max_distance: Distance from which on the last bucket is used.

        Returns:
            Long tensor of bucket indices in ``[0, num_buckets)``, same shape.

        Raises:
            ValueError: If the bucket settings are invalid.
        """
        _check_bucket_settings(bidirectional, num_buckets, max_distance)
        relative_position = relative_position.long()
        if bidirectional:
            half = num_buckets // 2
            direction_offset = (relative_position > 0).long() * half
            distance = relative_position.abs()
            buckets_per_direction = half
        else:
            direction_offset = torch.zeros_like(relative_position)
            distance = -torch.clamp(relative_position, max=0)
            buckets_per_direction = num_buckets
        max_exact = buckets_per_direction // 2
        # Clamp before the log so that small distances never reach log(0).
        scaled = distance.clamp(min=max_exact).float() / max_exact
        log_ratio = torch.log(scaled) / math.log(max_distance / max_exact)
        log_bucket = max_exact + (log_ratio * (buckets_per_direction - max_exact)).long()
        log_bucket = log_bucket.clamp(max=buckets_per_direction - 1)
        return direction_offset + torch.where(distance < max_exact, distance, log_bucket)

    def forward(
        self, q_len: int, k_len: int, *, device: torch.device | str | None = None
    ) -> Tensor:
        """Build the learned bias for ``q_len`` queries against ``k_len`` keys.

        Args:
            q_len: Number of queries (the last ``q_len`` positions of the keys' span).
            k_len: Number of keys.
            device: Where to build the bias; defaults to the embedding's device.

        Returns:
            Tensor of shape ``(1, num_heads, q_len, k_len)`` in the embedding's dtype;
            gradients flow to the embedding.

        Raises:
            ValueError: If ``q_len`` or ``k_len`` is negative.
        """
        _check_lengths(q_len, k_len)
        weight = self.relative_attention_bias.weight
        device = weight.device if device is None else torch.device(device)
        relative = _relative_positions(q_len, k_len, weight.device)
        buckets = self.relative_position_bucket(
            relative,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        values = self.relative_attention_bias(buckets)  # (q_len, k_len, heads)
        return values.permute(2, 0, 1).unsqueeze(0).to(device)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )


def _check_bucket_settings(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    if per_direction < 2:
        raise ValueError(
            f"num_buckets={num_buckets} is too small: each direction needs at least 2 "
            f"buckets ({'4' if bidirectional else '2'} in total)"
        )
    if max_distance <= per_direction // 2:
        raise ValueError(
            f"max_distance={max_distance} must exceed the exact range "
            f"({per_direction // 2} positions) for num_buckets={num_buckets}"
        )
