"""Input checks for :func:`headwise.attention.attend`: clear errors, never a silent broadcast."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headwise.attention.masks import AttentionPattern


@dataclass(frozen=True)
class AttentionShape:
    """The sizes of one attention call."""

    batch: int
    heads: int
    kv_heads: int
    q_len: int
    k_len: int
    head_dim: int
    v_dim: int

    @property
    def groups(self) -> int:
        """Query heads per key/value head (1 for plain multi-head attention)."""
        return self.heads // self.kv_heads


def check_qkv(q: Tensor, k: Tensor, v: Tensor) -> AttentionShape:
    """Validate q, k, v and return their sizes.

    Raises:
        TypeError: non-tensors, non-floating dtypes or mixed dtypes.
        ValueError: wrong ranks, mismatched batch / lengths / head dims, or a number of
            query heads that is not a multiple of the key/value heads.
    """
    try:
        fine = (q.ndim == k.ndim == v.ndim == 4 and q.dtype == k.dtype == v.dtype
                and q.is_floating_point() and q.device == k.device == v.device)
    except AttributeError:
        fine = False
    if not fine:  # find and name the problem (kept off the hot path)
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
            if t.ndim != 4:
                raise ValueError(f"{name} must be 4-D (batch, heads, seq, head_dim), got shape "
                                 f"{tuple(t.shape)}")
            if not t.is_floating_point():
                raise TypeError(f"{name} must be floating point, got {t.dtype}")
        if not (q.dtype == k.dtype == v.dtype):
            raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    b, h, lq, d = q.shape
    bk, hk, lk, dk = k.shape
    bv, hv, lv, dv = v.shape
    if not (b == bk == bv):
        raise ValueError(f"batch sizes differ: q {b}, k {bk}, v {bv}")
    if dk != d:
        raise ValueError(f"head dims differ: q has {d}, k has {dk}")
    if (hk, lk) != (hv, lv):
        raise ValueError(f"k and v must agree in heads and length, got k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if hk == 0 or h % hk:
        raise ValueError(f"q heads ({h}) must be a multiple of k/v heads ({hk})")
    return AttentionShape(b, h, hk, lq, lk, d, dv)


def _check_broadcast(name: str, t: Tensor, shape: AttentionShape) -> Tensor:
    target = (shape.batch, shape.heads, shape.q_len, shape.k_len)
    if t.ndim < 2 or t.ndim > 4:
        raise ValueError(f"{name} must have 2 to 4 dims broadcastable to (batch, heads, q_len, "
                         f"k_len) = {target}, got shape {tuple(t.shape)}")
    full = t.reshape((1,) * (4 - t.ndim) + tuple(t.shape))
    for i, (got, want) in enumerate(zip(full.shape, target, strict=True)):
        if got not in (1, want):
            dim = ("batch", "heads", "q_len", "k_len")[i]
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not fit (batch, heads, q_len, "
                             f"k_len) = {target}: its {dim} size is {got}, expected {want} or 1")
    return full


def check_mask(mask: Tensor | AttentionPattern | None, shape: AttentionShape,
               device: torch.device) -> Tensor | AttentionPattern | None:
    """Validate a mask; boolean tensors come back 4-D.

    Raises:
        TypeError: a non-boolean tensor or an unsupported object.
        ValueError: a shape that does not broadcast exactly, or a pattern for another batch.
    """
    if mask is None:
        return None
    if isinstance(mask, AttentionPattern):
        if mask.batch_size not in (None, shape.batch):
            raise ValueError(f"the mask pattern is for batch {mask.batch_size}, but q has batch "
                             f"{shape.batch}")
        return mask
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be None, a boolean tensor or an AttentionPattern, got "
                        f"{type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}; "
                        "pass additive float scores as bias= instead")
    if mask.device != device:
        raise ValueError(f"mask is on {mask.device} but q is on {device}")
    return _check_broadcast("mask", mask, shape)


def check_bias(bias: Tensor | None, shape: AttentionShape, q: Tensor) -> Tensor | None:
    """Validate an additive score bias (ALiBi, T5 buckets); returns it 4-D.

    Raises:
        TypeError: a non-floating bias.
        ValueError: a shape that does not broadcast exactly, or another device.
    """
    if bias is None:
        return None
    if not isinstance(bias, Tensor) or not bias.is_floating_point():
        raise TypeError("bias must be a floating-point tensor of additive scores")
    if bias.device != q.device:
        raise ValueError(f"bias is on {bias.device} but q is on {q.device}")
    return _check_broadcast("bias", bias, shape)


def expand_to_lengths(t: Tensor | AttentionPattern | None, q_len: int, k_len: int
                      ) -> Tensor | AttentionPattern | None:
    """A 4-D mask or bias broadcast along its query and key dims, as a view of the full
    ``(B | 1, H | 1, q_len, k_len)``; patterns and None pass through.

    Kernels that slice or index masks and biases by query and key position (tiles, gathered
    blocks) need the full lengths; the validated ones may hold 1 there (a padding mask
    ``(B, 1, 1, k_len)``). ``expand`` copies nothing, and its backward sums a bias's
    gradient back to the broadcast shape.
    """
    if not isinstance(t, Tensor) or t.shape[-2:] == (q_len, k_len):
        return t
    return t.expand(t.shape[0], t.shape[1], q_len, k_len)
