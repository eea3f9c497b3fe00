"""KV cache for incremental decoding: preallocated, or a sliding-window ring buffer.

A cache belongs to one attention layer. For self-attention it implies causal decoding:
each new query sees every cached key at or before its own position (and, with a
``window``, only the last ``window`` of them, as :func:`masks.sliding_window` combined
with :func:`masks.causal` does in a full forward pass). For cross-attention the layer
stores the projected context once and reuses it on every later step.
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor


class KVCache:
    """Keys and values of the tokens seen so far, in preallocated buffers.

    Args:
        batch_size: rows decoded together.
        max_len: capacity in tokens (ignored in size when ``window`` is set: the ring
            buffer holds ``window`` tokens and never fills up; the window may not exceed
            it).
        num_kv_heads: key/value heads of the layer.
        head_dim: size of each key (and value, unless ``v_dim`` is given).
        window: keep only the last ``window`` tokens (a ring buffer), or None.
        dtype, device: of the buffers.
        v_dim: size of each value when it differs from ``head_dim``.

    Raises:
        ValueError: sizes or a window that are not positive integers, or a window larger
            than ``max_len`` (a ring of ``window`` slots for at most ``max_len`` tokens).
    """

    def __init__(self, batch_size: int, max_len: int, num_kv_heads: int, head_dim: int, *,
                 window: int | None = None, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None, v_dim: int | None = None) -> None:
        for name, val in (("batch_size", batch_size), ("max_len", max_len),
                          ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                          ("window", window), ("v_dim", v_dim)):
            if val is None and name in ("window", "v_dim"):
                continue
            if not isinstance(val, numbers.Integral) or isinstance(val, bool):
                raise ValueError(f"{name} must be an int, got {val!r}")
            if val <= 0:
                raise ValueError(f"{name} must be positive, got {val}")
        if window is not None and window > max_len:
            raise ValueError(f"window={window} exceeds the cache's capacity max_len={max_len}: "
                             f"a ring buffer holds at most max_len tokens (use window <= "
                             f"max_len, or window=None for a full cache)")
        self.window = window
        self.max_len = max_len
        slots = window if window is not None else max_len
        v_dim = head_dim if v_dim is None else v_dim
        self.k = torch.zeros(batch_size, num_kv_heads, slots, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros(batch_size, num_kv_heads, slots, v_dim, dtype=dtype, device=device)
        # absolute position held by each slot; -1 = empty
        self.slot_pos = torch.full((slots,), -1, dtype=torch.long, device=device)
        self.length = 0

    @property
    def keys(self) -> Tensor:
        """Cached keys (batch, kv_heads, filled, head_dim), in slot order."""
        return self.k[:, :, : self._filled()]

    @property
    def values(self) -> Tensor:
        """Cached values (batch, kv_heads, filled, v_dim), in slot order."""
        return self.v[:, :, : self._filled()]

    def _filled(self) -> int:
        return min(self.length, self.k.shape[2])

    def reset(self) -> None:
        """Forget every token (the buffers are kept)."""
        self.length = 0
        self.slot_pos.fill_(-1)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search): ``row i <- row index[i]``."""
        self.k = self.k.index_select(0, index)
        self.v = self.v.index_select(0, index)

    def update(self, k: Tensor, v: Tensor, *, causal: bool = True
               ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Append new keys/values; return what the new queries attend over, and the mask.

        Args:
            k: (batch, kv_heads, t, head_dim) keys of ``t`` new tokens (RoPE applied).
            v: (batch, kv_heads, t, v_dim) their values.
            causal: build the causal (and window) mask for the new queries; False for a
                cross-attention cache, whose keys are all visible.

        Returns:
            ``(keys, values, mask)``: keys/values (batch, kv_heads, L, dim) to attend over
            and a boolean mask (1, 1, t, L) for causal (and windowed) decoding, or None
            when every key is visible to every new query.

        Raises:
            ValueError: shape mismatch, a preallocated cache that would overflow, or
                ``causal=False`` on a ring buffer whose window cannot hold every key
                (each key must stay visible, but the ring keeps only the last ``window``).
        """
        if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1] \
                or v.shape[:3] != k.shape[:3] or v.shape[-1] != self.v.shape[-1]:
            raise ValueError(f"cache holds k {tuple(self.k.shape)}, v {tuple(self.v.shape)}; "
                             f"got k {tuple(k.shape)}, v {tuple(v.shape)}")
        t = k.shape[2]
        start = self.length
        if not causal and self.window is not None and start + t > self.window:
            raise ValueError(f"a non-causal (cross-attention) update keeps every key visible, "
                             f"but this ring buffer holds only window={self.window} tokens: "
                             f"got {start} + {t}; use a cache without a window")
        q_pos = torch.arange(start, start + t, device=self.slot_pos.device)
        if self.window is None:
            if start + t > self.max_len:
                raise ValueError(f"KV cache full: {start} + {t} tokens exceed max_len="
                                 f"{self.max_len}")
            self.k[:, :, start: start + t] = k
            self.v[:, :, start: start + t] = v
            self.slot_pos[start: start + t] = q_pos
            self.length += t
            keys, values, k_pos = self.keys, self.values, self.slot_pos[: self.length]
        elif t == 1:
            # Write first: the slot overwritten held position q - window, outside the window.
            slot = start % self.window
            self.k[:, :, slot] = k[:, :, 0]
            self.v[:, :, slot] = v[:, :, 0]
            self.slot_pos[slot] = start
            self.length += 1
            keys, values, k_pos = self.k, self.v, self.slot_pos
        else:
            # A chunk: attend over the old ring plus the whole chunk, then keep its tail.
            keys = torch.cat([self.k, k], 2)
            values = torch.cat([self.v, v], 2)
            k_pos = torch.cat([self.slot_pos, q_pos])
            keep = min(t, self.window)
            for i in range(t - keep, t):
                slot = (start + i) % self.window
                self.k[:, :, slot] = k[:, :, i]
                self.v[:, :, slot] = v[:, :, i]
                self.slot_pos[slot] = start + i
            self.length += t
        if self.window is None and (t == 1 or not causal):
            return keys, values, None  # one new query sees every cached key: no mask, no sync
        visible = k_pos[None, :] >= 0  # a ring's empty slots are never visible
        if not causal:
            return keys, values, None if bool(visible.all()) else visible.expand(t, -1)[None, None]
        visible = visible & (k_pos[None, :] <= q_pos[:, None])
        if self.window is not None:
            visible &= q_pos[:, None] - k_pos[None, :] < self.window
        if bool(visible.all()):
            return keys, values, None
        return keys, values, visible[None, None]
