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


def as_pattern(obj: AttentionPattern | Tensor) -> AttentionPattern:
    """Return ``obj`` if it is a pattern, else wrap a boolean tensor with :func:`from_tensor`."""
    if isinstance(obj, AttentionPattern):
        return obj
    if isinstance(obj, Tensor):
        return DenseMask(obj)
    raise TypeError(f"expected an AttentionPattern or a boolean tensor, got {type(obj).__name__}")
