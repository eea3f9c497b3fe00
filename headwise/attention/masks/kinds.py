"""The concrete attention patterns: causal, padding, window, global, BigBird, documents."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from headwise.attention.masks.pattern import (
    Align,
    AttentionPattern,
    _check_align,
    _offset,
    tile_bounds,
)


class Causal(AttentionPattern):
    """Each query sees keys at or before its own position."""

    def __init__(self, align: Align = "top_left") -> None:
        self.align = _check_align(align)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return kv_idx <= q_idx + _offset(self.align, q_len, k_len)

    def causal_alignment(self) -> str | None:
        return self.align

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        q0, q1, k0, _ = tile_bounds(q_len, k_len, block_q, block_k)
        return k0 <= q1 + _offset(self.align, q_len, k_len)


class KeyPadding(AttentionPattern):
    """Padding keys are never attended.

    Given lengths, keys at or past ``lengths[b]`` are padding (any key length works, so
    it also serves a growing KV cache). Given a boolean ``(batch, k_len)`` keep-mask
    (True = real token), exactly those keys are visible.
    """

    def __init__(self, lengths: Tensor | Sequence[int]) -> None:
        lengths = torch.as_tensor(lengths)
        self.keep: Tensor | None = None
        if lengths.dtype == torch.bool:
            if lengths.ndim != 2:
                raise ValueError(f"a keep-mask must be (batch, k_len), got shape "
                                 f"{tuple(lengths.shape)}")
            self.keep = lengths
            self.batch_size = int(lengths.shape[0])
            self.lengths = lengths.sum(1)
            return
        if lengths.ndim != 1 or lengths.numel() == 0:
            raise ValueError(f"lengths must be a non-empty 1-D sequence, got shape "
                             f"{tuple(lengths.shape)}")
        if lengths.is_floating_point():
            raise TypeError(f"lengths must be integers, got {lengths.dtype}")
        if (lengths < 0).any():
            raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
        self.lengths = lengths.long()
        self.batch_size = int(lengths.numel())

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return self.bind(q_len, k_len, kv_idx.device)(b, h, q_idx, kv_idx)

    def to_broadcast(self, q_len, k_len=None, *, device=None):
        """``(batch, 1, 1, k_len)`` straight from the keep-mask or the lengths (the encoder's
        every call: no index grids)."""
        k_len = q_len if k_len is None else k_len
        if self.keep is not None:
            return self._keep_on(k_len, device)[:, None, None, :]
        keys = torch.arange(k_len, device=device)
        return (keys < self.lengths.to(device)[:, None])[:, None, None, :]

    def _keep_on(self, k_len: int, device) -> Tensor:
        """The keep-mask on ``device``, checked against the attention's key count."""
        if self.keep.shape[1] != k_len:
            raise ValueError(f"keep-mask has {self.keep.shape[1]} keys, attention has {k_len}")
        return self.keep.to(device)

    def bind(self, q_len, k_len, device=None):
        if self.keep is not None:
            keep = self._keep_on(k_len, device)

            def mask_mod(b, h, q_idx, kv_idx):
                return keep[b, kv_idx]

            return mask_mod
        lengths = self.lengths.to(device)

        def mask_mod(b, h, q_idx, kv_idx):
            return kv_idx < lengths[b]

        return mask_mod


class SlidingWindow(AttentionPattern):
    """Local attention (Longformer): query ``i`` sees key ``j`` when ``|i - j| < window``.

    Combined with :func:`causal` it is the left-only window of ``window`` keys
    (the query itself included) used by Mistral-style models and the ring-buffer cache.
    """

    def __init__(self, window: int, align: Align = "top_left") -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            raise ValueError(f"window must be a positive int, got {window!r}")
        self.window = window
        self.align = _check_align(align)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        d = q_idx + _offset(self.align, q_len, k_len) - kv_idx
        return (d < self.window) & (d > -self.window)

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        q0, q1, k0, k1 = tile_bounds(q_len, k_len, block_q, block_k)
        off = _offset(self.align, q_len, k_len)
        # the tile's offsets q - k span [q0 - k1, q1 - k0]: exact, as it is an interval
        return (q0 + off - k1 < self.window) & (q1 + off - k0 > -self.window)


class GlobalTokens(AttentionPattern):
    """Global tokens (Longformer): they attend everywhere and everyone attends them."""

    def __init__(self, positions: Sequence[int] | Tensor) -> None:
        positions = torch.as_tensor(positions, dtype=torch.long).flatten()
        if (positions < 0).any():
            raise ValueError(f"global positions must be >= 0, got {positions.tolist()}")
        self.positions = positions

    def _is_global(self, idx: Tensor) -> Tensor:
        pos = self.positions.to(idx.device)
        if pos.numel() == 0:
            return torch.zeros_like(idx, dtype=torch.bool)
        return (idx.unsqueeze(-1) == pos).any(-1)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return self._is_global(q_idx) | self._is_global(kv_idx)

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        nq, nk = -(-q_len // block_q), -(-k_len // block_k)
        rows = torch.zeros(nq, dtype=torch.bool)
        cols = torch.zeros(nk, dtype=torch.bool)
        rows[self.positions[self.positions < q_len] // block_q] = True
        cols[self.positions[self.positions < k_len] // block_k] = True
        return rows[:, None] | cols[None, :]

    def bind(self, q_len, k_len, device=None):
        n = max(q_len, k_len)
        flag = torch.zeros(n, dtype=torch.bool)
        pos = self.positions[self.positions < n]
        flag[pos] = True
        flag = flag.to(device)

        def mask_mod(b, h, q_idx, kv_idx):
            return flag[q_idx] | flag[kv_idx]

        return mask_mod


class BigBird(AttentionPattern):
    """BigBird block-sparse attention (Zaheer et al. 2020), ITC form.

    The sequence is cut into blocks of ``block_size``. A query block sees: its
    ``num_window_blocks`` neighbouring key blocks (centred), the first ``num_global_blocks``
    blocks (which also see everything), and ``num_random_blocks`` key blocks drawn at
    random (seeded, without replacement, among the blocks not already covered).
    Set ``num_window_blocks=0`` and ``num_global_blocks=0`` for the random part alone.
    """

    def __init__(self, block_size: int, num_random_blocks: int, seed: int = 0, *,
                 num_window_blocks: int = 3, num_global_blocks: int = 1) -> None:
        for name, val, lo in (("block_size", block_size, 1), ("num_random_blocks",
                              num_random_blocks, 0), ("num_window_blocks", num_window_blocks, 0),
                              ("num_global_blocks", num_global_blocks, 0)):
            if not isinstance(val, int) or val < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
        self.block_size = block_size
        self.num_random_blocks = num_random_blocks
        self.seed = int(seed)
        self.num_window_blocks = num_window_blocks
        self.num_global_blocks = num_global_blocks

    def block_table(self, q_len: int, k_len: int, device=None) -> Tensor:
        """Boolean (n_q_blocks, n_k_blocks) table of allowed block pairs (cached)."""
        key = ("table", q_len, k_len, str(device))
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            nq, nk = -(-q_len // self.block_size), -(-k_len // self.block_size)
            qi = torch.arange(nq).view(-1, 1)
            ki = torch.arange(nk).view(1, -1)
            half = self.num_window_blocks // 2
            lo = -half
            hi = self.num_window_blocks - 1 - half
            table = ((ki - qi) >= lo) & ((ki - qi) <= hi) if self.num_window_blocks else \
                torch.zeros(nq, nk, dtype=torch.bool)
            g = self.num_global_blocks
            table[:, :g] = True
            table[:g, :] = True
            gen = torch.Generator().manual_seed(self.seed)
            for i in range(g, nq):
                free = (~table[i]).nonzero().flatten()
                take = min(self.num_random_blocks, free.numel())
                if take:
                    pick = free[torch.randperm(free.numel(), generator=gen)[:take]]
                    table[i, pick] = True
            cache[key] = table.to(device)
        return cache[key]

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        table = self.block_table(q_len, k_len, q_idx.device)
        return table[q_idx // self.block_size, kv_idx // self.block_size]

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        table = self.block_table(q_len, k_len).float()
        q0, q1, k0, k1 = tile_bounds(q_len, k_len, block_q, block_k)
        bq = torch.arange(table.shape[0]).view(1, -1)  # tile i covers BigBird rows a..b
        bk = torch.arange(table.shape[1]).view(1, -1)
        cover_q = ((bq >= q0 // self.block_size) & (bq <= q1 // self.block_size)).float()
        cover_k = ((bk >= k0.view(-1, 1) // self.block_size)
                   & (bk <= k1.view(-1, 1) // self.block_size)).float()
        return (cover_q @ table @ cover_k.T) > 0

    def bind(self, q_len, k_len, device=None):
        table, bs = self.block_table(q_len, k_len, device), self.block_size

        def mask_mod(b, h, q_idx, kv_idx):
            return table[q_idx // bs, kv_idx // bs]

        return mask_mod


class Documents(AttentionPattern):
    """Packed documents: a token attends only tokens of its own document.

    ``lengths`` is one list of document lengths shared by every batch row, or one list
    per row. Positions past the documents (padding) belong to none and attend nothing.
    """

    def __init__(self, lengths: Sequence[int] | Sequence[Sequence[int]]) -> None:
        rows = [list(lengths)] if lengths and isinstance(next(iter(lengths)), int) else \
            [list(r) for r in lengths]
        if not rows or any(not r for r in rows):
            raise ValueError("documents() needs at least one document length per row")
        if any(n <= 0 for r in rows for n in r):
            raise ValueError(f"document lengths must be positive, got {rows}")
        total = max(sum(r) for r in rows)
        ids = torch.full((len(rows), total), -1, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : sum(r)] = torch.repeat_interleave(torch.arange(len(r)), torch.tensor(r))
        self.lengths = rows
        self.doc_ids = ids
        self.batch_size = len(rows) if len(rows) > 1 else None

    def _ids(self, q_len: int, k_len: int, device) -> Tensor:
        pad = max(q_len, k_len) - self.doc_ids.shape[1]
        ids = torch.nn.functional.pad(self.doc_ids, (0, pad), value=-1) if pad > 0 \
            else self.doc_ids
        return ids.to(device)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return self.bind(q_len, k_len, q_idx.device)(b, h, q_idx, kv_idx)

    def bind(self, q_len, k_len, device=None):
        ids = self._ids(q_len, k_len, device)
        shared = self.batch_size is None

        def mask_mod(b, h, q_idx, kv_idx):
            row = b * 0 if shared else b
            dq = ids[row, q_idx]
            return (dq == ids[row, kv_idx]) & (dq >= 0)

        return mask_mod
