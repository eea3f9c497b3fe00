"""Attention patterns: which query may attend which key.

Convention everywhere: ``True`` = may attend. A pattern is an immutable object with one
rule, :meth:`AttentionPattern.allowed`, written with broadcasting integer index tensors
``(b, h, q_idx, kv_idx)``. That single rule renders three ways:

* :meth:`AttentionPattern.to_dense`: a boolean tensor ``(batch | 1, 1, q_len, k_len)``;
* :meth:`AttentionPattern.to_block_mask`: a FlexAttention ``BlockMask`` (cached);
* :meth:`AttentionPattern.block_layout`: which (query block, key block) tiles hold any
  allowed pair and which are entirely allowed, used by the tiled kernel to skip work.

Patterns combine with ``&`` (both allow), ``|`` (either allows) and ``~`` (negation).

Alignment when ``q_len != k_len`` (a KV cache holds more keys than there are new
queries): ``"top_left"`` puts query ``i`` at key position ``i``; ``"bottom_right"`` puts
it at ``i + k_len - q_len`` so the last query lines up with the last key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

Align = Literal["top_left", "bottom_right"]
_ALIGNS = ("top_left", "bottom_right")


def _offset(align: str, q_len: int, k_len: int) -> int:
    return 0 if align == "top_left" else k_len - q_len


def _check_align(align: str) -> str:
    if align not in _ALIGNS:
        raise ValueError(f"align must be one of {_ALIGNS}, got {align!r}")
    return align


class AttentionPattern(ABC):
    """Base class of all patterns. Subclasses implement :meth:`allowed`."""

    #: number of batch rows the pattern distinguishes, or None when it is batch-free
    batch_size: int | None = None

    @abstractmethod
    def allowed(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor,
                q_len: int, k_len: int) -> Tensor:
        """Whether query ``q_idx`` may attend key ``kv_idx`` (broadcasting index tensors).

        Args:
            b, h, q_idx, kv_idx: integer tensors that broadcast against each other.
            q_len, k_len: the full query and key lengths (for alignment and tables).

        Returns:
            A boolean tensor of the broadcast shape.
        """

    def bind(self, q_len: int, k_len: int, device: torch.device | str | None = None):
        """A ``mask_mod(b, h, q_idx, kv_idx)`` for these lengths, with its tables on ``device``.

        The returned function holds only tensors and arithmetic, so FlexAttention can
        compile it. Patterns with lookup tables override this to prepare them once.
        """
        def mask_mod(b, h, q_idx, kv_idx):
            return self.allowed(b, h, q_idx, kv_idx, q_len, k_len)

        return mask_mod

    # --- combination -------------------------------------------------------------
    def __and__(self, other: AttentionPattern) -> AttentionPattern:
        return And(self, as_pattern(other))

    def __or__(self, other: AttentionPattern) -> AttentionPattern:
        return Or(self, as_pattern(other))

    def __invert__(self) -> AttentionPattern:
        return Not(self)

    # --- queries used by the dispatcher --------------------------------------------
    def causal_alignment(self) -> str | None:
        """``"top_left"``/``"bottom_right"`` when the pattern is exactly a causal mask."""
        return None

    # --- rendering ------------------------------------------------------------------
    def to_dense(self, q_len: int, k_len: int | None = None, *, batch_size: int | None = None,
                 device: torch.device | str | None = None) -> Tensor:
        """Render as a boolean mask of shape ``(batch | 1, 1, q_len, k_len)``.

        Args:
            q_len: number of queries.
            k_len: number of keys (defaults to ``q_len``).
            batch_size: rows to render for a batch-free pattern (default 1, broadcasting).
            device: where to build the mask.

        Returns:
            Boolean tensor, True = may attend.
        """
        k_len = q_len if k_len is None else k_len
        rows = self.batch_size or 1
        b = torch.arange(rows, device=device).view(rows, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
        q = torch.arange(q_len, device=device).view(1, 1, q_len, 1)
        k = torch.arange(k_len, device=device).view(1, 1, 1, k_len)
        out = self.allowed(b, h, q, k, q_len, k_len).expand(rows, 1, q_len, k_len)
        if batch_size is not None and self.batch_size is None and batch_size != 1:
            out = out.expand(batch_size, 1, q_len, k_len)
        return out

    def tile(self, q0: int, q1: int, k0: int, k1: int, q_len: int, k_len: int,
             device: torch.device | str | None = None) -> Tensor:
        """The dense mask restricted to queries ``[q0, q1)`` and keys ``[k0, k1)``."""
        rows = self.batch_size or 1
        b = torch.arange(rows, device=device).view(rows, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
        q = torch.arange(q0, q1, device=device).view(1, 1, -1, 1)
        k = torch.arange(k0, k1, device=device).view(1, 1, 1, -1)
        return self.allowed(b, h, q, k, q_len, k_len)

    def block_layout(self, q_len: int, k_len: int, block_q: int, block_k: int,
                     device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
        """Which tiles of size ``block_q x block_k`` hold any / only allowed pairs.

        Evaluated one query block at a time, so memory stays ``O(block_q * k_len)``;
        results are cached per arguments.

        Returns:
            ``(any_allowed, all_allowed)``, boolean tensors ``(batch | 1, n_q_blocks,
            n_k_blocks)``.
        """
        key = ("layout", q_len, k_len, block_q, block_k, str(device))
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            nq, nk = -(-q_len // block_q), -(-k_len // block_k)
            pad_k = nk * block_k - k_len
            anys, alls = [], []
            for i in range(nq):
                q0, q1 = i * block_q, min(q_len, (i + 1) * block_q)
                t = self.tile(q0, q1, 0, k_len, q_len, k_len, device)
                t = t.expand(t.shape[0], 1, q1 - q0, k_len)[:, 0]
                ta = torch.nn.functional.pad(t, (0, pad_k), value=False)
                tl = torch.nn.functional.pad(t, (0, pad_k), value=True)
                anys.append(ta.view(t.shape[0], q1 - q0, nk, block_k).any(-1).any(1))
                alls.append(tl.view(t.shape[0], q1 - q0, nk, block_k).all(-1).all(1))
            cache[key] = (torch.stack(anys, 1), torch.stack(alls, 1))
        return cache[key]

    def to_block_mask(self, q_len: int, k_len: int | None = None, *, batch_size: int | None = None,
                      num_heads: int | None = None, device: torch.device | str = "cpu",
                      block_size: int = 128):
        """Render as a FlexAttention ``BlockMask`` (cached per shape and device).

        Raises:
            RuntimeError: if this torch build has no FlexAttention.
        """
        try:
            from torch.nn.attention.flex_attention import create_block_mask
        except ImportError as e:  # pragma: no cover - torch >= 2.5 always has it
            raise RuntimeError("this torch build has no FlexAttention") from e
        k_len = q_len if k_len is None else k_len
        rows = self.batch_size
        key = ("block_mask", q_len, k_len, rows, str(device), block_size)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            mask_mod = self.bind(q_len, k_len, device)
            cache[key] = create_block_mask(mask_mod, rows, None, q_len, k_len,
                                           device=device, BLOCK_SIZE=block_size)
        return cache[key]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


# ------------------------------------------------------------------------------------
# Concrete patterns
# ------------------------------------------------------------------------------------
class Causal(AttentionPattern):
    """Each query sees keys at or before its own position."""

    def __init__(self, align: Align = "top_left") -> None:
        self.align = _check_align(align)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return kv_idx <= q_idx + _offset(self.align, q_len, k_len)

    def causal_alignment(self) -> str | None:
        return self.align


class KeyPadding(AttentionPattern):
    """Keys past each sequence's length are padding and never attended."""

    def __init__(self, lengths: Tensor | Sequence[int]) -> None:
        lengths = torch.as_tensor(lengths)
        if lengths.dtype == torch.bool:
            raise TypeError("key_padding() takes lengths; for a boolean keep-mask (batch, k_len) "
                            "use masks.from_tensor(mask[:, None, None, :])")
        if lengths.ndim != 1 or lengths.numel() == 0:
            raise ValueError(f"lengths must be a non-empty 1-D sequence, got shape "
                             f"{tuple(lengths.shape)}")
        if (lengths < 0).any():
            raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
        self.lengths = lengths.long()
        self.batch_size = int(lengths.numel())

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return kv_idx < self.lengths.to(kv_idx.device)[b]

    def bind(self, q_len, k_len, device=None):
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


class DenseMask(AttentionPattern):
    """A user-given boolean tensor broadcastable to ``(batch, heads, q_len, k_len)``.

    Only batch- and head-broadcast shapes are rendered exactly; heads must be 1 here
    (patterns are shared across heads). The tensor's last two sizes fix the lengths.
    """

    def __init__(self, mask: Tensor) -> None:
        if mask.dtype != torch.bool:
            raise TypeError(f"a mask must be a boolean tensor (True = may attend), "
                            f"got {mask.dtype}")
        while mask.ndim < 4:
            mask = mask.unsqueeze(0)
        if mask.ndim != 4 or mask.shape[1] != 1:
            raise ValueError(f"DenseMask takes (batch, 1, q_len, k_len), got {tuple(mask.shape)}")
        self.mask = mask
        self.batch_size = mask.shape[0] if mask.shape[0] > 1 else None

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return self.bind(q_len, k_len, q_idx.device)(b, h, q_idx, kv_idx)

    def bind(self, q_len, k_len, device=None):
        if (q_len, k_len) != tuple(self.mask.shape[-2:]):
            raise ValueError(f"mask is {tuple(self.mask.shape[-2:])} but attention is "
                             f"{(q_len, k_len)}")
        m = self.mask.to(device)
        shared = self.batch_size is None

        def mask_mod(b, h, q_idx, kv_idx):
            return m[b * 0 if shared else b, h * 0, q_idx, kv_idx]

        return mask_mod


class And(AttentionPattern):
    """Allowed where both patterns allow."""

    def __init__(self, left: AttentionPattern, right: AttentionPattern) -> None:
        self.left, self.right = left, right
        self.batch_size = _joint_batch(left, right)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return (self.left.allowed(b, h, q_idx, kv_idx, q_len, k_len)
                & self.right.allowed(b, h, q_idx, kv_idx, q_len, k_len))

    def bind(self, q_len, k_len, device=None):
        f, g = self.left.bind(q_len, k_len, device), self.right.bind(q_len, k_len, device)
        return lambda b, h, q, k: f(b, h, q, k) & g(b, h, q, k)


class Or(AttentionPattern):
    """Allowed where either pattern allows."""

    def __init__(self, left: AttentionPattern, right: AttentionPattern) -> None:
        self.left, self.right = left, right
        self.batch_size = _joint_batch(left, right)

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return (self.left.allowed(b, h, q_idx, kv_idx, q_len, k_len)
                | self.right.allowed(b, h, q_idx, kv_idx, q_len, k_len))

    def bind(self, q_len, k_len, device=None):
        f, g = self.left.bind(q_len, k_len, device), self.right.bind(q_len, k_len, device)
        return lambda b, h, q, k: f(b, h, q, k) | g(b, h, q, k)


class Not(AttentionPattern):
    """Allowed where the pattern forbids."""

    def __init__(self, inner: AttentionPattern) -> None:
        self.inner = inner
        self.batch_size = inner.batch_size

    def allowed(self, b, h, q_idx, kv_idx, q_len, k_len):
        return ~self.inner.allowed(b, h, q_idx, kv_idx, q_len, k_len)

    def bind(self, q_len, k_len, device=None):
        f = self.inner.bind(q_len, k_len, device)
        return lambda b, h, q, k: ~f(b, h, q, k)


def _joint_batch(a: AttentionPattern, b: AttentionPattern) -> int | None:
    if a.batch_size and b.batch_size and a.batch_size != b.batch_size:
        raise ValueError(f"cannot combine patterns for batch {a.batch_size} and {b.batch_size}")
    return a.batch_size or b.batch_size


# ------------------------------------------------------------------------------------
# Constructors (the public API)
# ------------------------------------------------------------------------------------
def causal(align: Align = "top_left") -> AttentionPattern:
    """Causal mask; ``align`` places queries when ``q_len != k_len`` (see module doc).

    Raises:
        ValueError: for an unknown alignment.
    """
    return Causal(align)


def key_padding(lengths: Tensor | Sequence[int]) -> AttentionPattern:
    """Mask keys at or past ``lengths[b]`` in batch row ``b``.

    Raises:
        ValueError: for negative or non 1-D lengths.
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


def as_pattern(obj: AttentionPattern | Tensor) -> AttentionPattern:
    """Return ``obj`` if it is a pattern, else wrap a boolean tensor with :func:`from_tensor`."""
    if isinstance(obj, AttentionPattern):
        return obj
    if isinstance(obj, Tensor):
        return DenseMask(obj)
    raise TypeError(f"expected an AttentionPattern or a boolean tensor, got {type(obj).__name__}")


__all__ = [
    "And", "AttentionPattern", "BigBird", "Causal", "DenseMask", "Documents", "GlobalTokens",
    "KeyPadding", "Not", "Or", "SlidingWindow", "as_pattern", "bigbird", "causal", "documents",
    "from_tensor", "global_tokens", "key_padding", "sliding_window",
]
