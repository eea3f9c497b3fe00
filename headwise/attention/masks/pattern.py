"""The pattern base class and its combinators (``&``, ``|``, ``~``, dense tensors)."""

from __future__ import annotations

from abc import ABC, abstractmethod
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
        out = self.to_broadcast(q_len, k_len, device=device).expand(rows, 1, q_len, k_len)
        if batch_size is not None and self.batch_size is None and batch_size != 1:
            out = out.expand(batch_size, 1, q_len, k_len)
        return out

    def to_broadcast(self, q_len: int, k_len: int | None = None, *,
                     device: torch.device | str | None = None) -> Tensor:
        """Render as the smallest boolean mask that broadcasts to :meth:`to_dense`'s.

        A dimension the pattern does not depend on stays 1: a key-padding pattern is
        ``(batch, 1, 1, k_len)``, a causal one ``(1, 1, q_len, k_len)``. Kernels that
        broadcast a mask themselves (SDPA turns a boolean mask into an additive one of the
        mask's own shape) then never build ``q_len x k_len`` values per batch row.

        Args:
            q_len: number of queries.
            k_len: number of keys (defaults to ``q_len``).
            device: where to build the mask.

        Returns:
            Boolean tensor, True = may attend, of 4 dimensions.
        """
        k_len = q_len if k_len is None else k_len
        rows = self.batch_size or 1
        b = torch.arange(rows, device=device).view(rows, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
        q = torch.arange(q_len, device=device).view(1, 1, q_len, 1)
        k = torch.arange(k_len, device=device).view(1, 1, 1, k_len)
        return self.allowed(b, h, q, k, q_len, k_len)

    def tile(self, q0: int, q1: int, k0: int, k1: int, q_len: int, k_len: int,
             device: torch.device | str | None = None) -> Tensor:
        """The dense mask restricted to queries ``[q0, q1)`` and keys ``[k0, k1)``."""
        rows = self.batch_size or 1
        b = torch.arange(rows, device=device).view(rows, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
        q = torch.arange(q0, q1, device=device).view(1, 1, -1, 1)
        k = torch.arange(k0, k1, device=device).view(1, 1, 1, -1)
        return self.allowed(b, h, q, k, q_len, k_len)

    def candidate_tiles(self, q_len: int, k_len: int, block_q: int, block_k: int
                        ) -> Tensor | None:
        """A cheap superset of the tiles holding any allowed pair, or None (every tile).

        Patterns with a closed form (window, causal, global tokens, BigBird, their ``&``
        and ``|``) answer from tile bounds in ``O(tiles)``, so :meth:`block_layout`
        evaluates the rule only on these tiles instead of all ``q_len x k_len`` pairs.

        Returns:
            Boolean ``(n_q_blocks, n_k_blocks)`` on the CPU, or None when unknown.
        """
        return None

    def block_layout(self, q_len: int, k_len: int, block_q: int, block_k: int,
                     device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
        """Which tiles of size ``block_q x block_k`` hold any / only allowed pairs.

        The rule is evaluated only on the tiles :meth:`candidate_tiles` leaves (every tile
        for a pattern without a closed form), a bounded batch of tiles at a time, so a
        banded pattern costs ``O(n * window)`` rather than ``O(n^2)``; results are cached
        per arguments.

        Returns:
            ``(any_allowed, all_allowed)``, boolean tensors ``(batch | 1, n_q_blocks,
            n_k_blocks)``.
        """
        key = ("layout", q_len, k_len, block_q, block_k, str(device))
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            nq, nk = -(-q_len // block_q), -(-k_len // block_k)
            cand = self.candidate_tiles(q_len, k_len, block_q, block_k)
            if cand is None:
                cand = torch.ones(nq, nk, dtype=torch.bool)
            rows = self.batch_size or 1
            any_ = torch.zeros(rows, nq, nk, dtype=torch.bool)
            all_ = torch.zeros(rows, nq, nk, dtype=torch.bool)
            ti, tj = cand.nonzero(as_tuple=True)
            step = max(1, (1 << 22) // (block_q * block_k))  # tiles per evaluation
            b = torch.arange(rows, device=device).view(rows, 1, 1, 1)
            h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
            for s in range(0, ti.numel(), step):
                i, j = ti[s: s + step], tj[s: s + step]
                qpos = i[:, None] * block_q + torch.arange(block_q)  # (T, block_q)
                kpos = j[:, None] * block_k + torch.arange(block_k)
                real = (qpos < q_len)[:, :, None] & (kpos < k_len)[:, None, :]
                t = self.allowed(b, h, qpos.clamp(max=q_len - 1).to(device)[None, :, :, None],
                                 kpos.clamp(max=k_len - 1).to(device)[None, :, None, :],
                                 q_len, k_len).cpu()
                t = t.expand(rows, *real.shape)
                any_[:, i, j] = (t & real).flatten(2).any(-1)
                all_[:, i, j] = (t | ~real).flatten(2).all(-1)
            cache[key] = (any_.to(device), all_.to(device))
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

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        a = self.left.candidate_tiles(q_len, k_len, block_q, block_k)
        b = self.right.candidate_tiles(q_len, k_len, block_q, block_k)
        return b if a is None else a if b is None else a & b


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

    def candidate_tiles(self, q_len, k_len, block_q, block_k):
        a = self.left.candidate_tiles(q_len, k_len, block_q, block_k)
        b = self.right.candidate_tiles(q_len, k_len, block_q, block_k)
        return None if a is None or b is None else a | b


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


def tile_bounds(q_len: int, k_len: int, block_q: int, block_k: int
                ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """First and last query ``(nq, 1)`` and key ``(1, nk)`` position of every tile."""
    q0 = torch.arange(0, q_len, block_q).view(-1, 1)
    k0 = torch.arange(0, k_len, block_k).view(1, -1)
    return q0, (q0 + block_q - 1).clamp(max=q_len - 1), k0, (k0 + block_k - 1).clamp(max=k_len - 1)


def _joint_batch(a: AttentionPattern, b: AttentionPattern) -> int | None:
    if a.batch_size and b.batch_size and a.batch_size != b.batch_size:
        raise ValueError(f"cannot combine patterns for batch {a.batch_size} and {b.batch_size}")
    return a.batch_size or b.batch_size


def as_pattern(obj: AttentionPattern | Tensor) -> AttentionPattern:
    """Return ``obj`` if it is a pattern, else wrap a boolean tensor with :func:`from_tensor`."""
    if isinstance(obj, AttentionPattern):
        return obj
    if isinstance(obj, Tensor):
        return DenseMask(obj)
    raise TypeError(f"expected an AttentionPattern or a boolean tensor, got {type(obj).__name__}")
