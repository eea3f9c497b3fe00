"""Position information for attention: sinusoidal, learned, and rotary (RoPE).

Three ways to tell attention where a token sits:

* :class:`SinusoidalPositionalEncoding` -- the fixed table of "Attention Is All You
  Need" (Vaswani et al., 2017), added to the token embeddings.
* :class:`LearnedPositionalEmbedding` -- one trained vector per position (BERT, GPT-2),
  added to the token embeddings.
* :class:`RotaryEmbedding` and :func:`apply_rotary` -- RoPE (Su et al., "RoFormer"),
  which rotates queries and keys inside each head so that the score
  ``<q_m, k_n>`` depends on positions only through ``m - n``.

Tensors inside attention are ``(batch, heads, seq, head_dim)``; embeddings fed to the
additive encodings are ``(batch, seq, d_model)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from headwise.attention.tracing import building_graph

__all__ = [
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "apply_rotary",
]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _check_offset_length(length: int, offset: int) -> None:
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")


def _is_integer(t: Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def _grown_length(needed: int, current: int) -> int:
    """Length to grow a cache to: at least ``needed``, at least double the current one."""
    return max(needed, 2 * current)


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal positional encoding of "Attention Is All You Need".

    ``PE[pos, 2i] = sin(pos / 10000^(2i / d_model))`` and
    ``PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))``.

    The table is computed in float64 and stored as float32 in a non-persistent buffer
    (it is never saved in a checkpoint). It grows automatically when a longer sequence
    arrives.

    Args:
        d_model: Embedding width; must be even and positive.
        max_len: Number of positions to precompute.

    Raises:
        ValueError: If ``d_model`` is odd or not positive, or ``max_len`` is not positive.
    """

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 4096) -> None:
        super().__init__()
        if d_model <= 0:
            raise ValueError(f"d_model must be positive, got {d_model}")
        if d_model % 2 != 0:
            raise ValueError(
                f"SinusoidalPositionalEncoding needs an even d_model (sin/cos pairs), got {d_model}"
            )
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.d_model = d_model
        self.register_buffer("pe", self._table(max_len, torch.device("cpu")), persistent=False)

    def _table(self, length: int, device: torch.device) -> Tensor:
        position = torch.arange(length, dtype=torch.float64, device=device).unsqueeze(1)
        two_i = torch.arange(0, self.d_model, 2, dtype=torch.float64, device=device)
        angle = position / torch.pow(10000.0, two_i / self.d_model)
        table = torch.empty(length, self.d_model, dtype=torch.float64, device=device)
        table[:, 0::2] = torch.sin(angle)
        table[:, 1::2] = torch.cos(angle)
        return table.to(torch.float32)

    def _ensure(self, length: int) -> None:
        current = self.pe.shape[0]
        if length > current or self.pe.dtype != torch.float32:
            # A module-wide ``.to(dtype)`` may have cast the buffer; rebuild in float32.
            new_len = _grown_length(length, current) if length > current else current
            self.pe = self._table(new_len, self.pe.device)

    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """Return the encodings of positions ``offset, ..., offset + length - 1``.

        Args:
            length: Number of positions.
            offset: First position (e.g. the number of tokens already in a KV cache).

        Returns:
            Float32 tensor of shape ``(length, d_model)``.

        Raises:
            ValueError: If ``length`` or ``offset`` is negative.
        """
        _check_offset_length(length, offset)
        self._ensure(offset + length)
        return self.pe[offset : offset + length]

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Add the positional encoding to a batch of embeddings.

        Args:
            x: Embeddings of shape ``(batch, seq, d_model)``.
            offset: Absolute position of ``x[:, 0]``.

        Returns:
            ``x + PE[offset : offset + seq]``, in ``x``'s dtype and on its device.

        Raises:
            ValueError: If ``x`` is not 3-D, its last dimension is not ``d_model``, or
                ``offset`` is negative.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected x of shape (batch, seq, {self.d_model}), got {tuple(x.shape)}"
            )
        pe = self.encoding(x.shape[1], offset)
        return x + pe.to(device=x.device, dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, cached_len={self.pe.shape[0]}"


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute position embeddings (one trained vector per position).

    Weights are initialised from ``N(0, 0.02^2)`` as in BERT and GPT-2.

    Args:
        max_len: Number of positions with an embedding; longer inputs are an error.
        d_model: Embedding width.

    Raises:
        ValueError: If ``max_len`` or ``d_model`` is not positive.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        if d_model <= 0:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.max_len = max_len
        self.d_model = d_model
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Add the embeddings of positions ``offset, ..., offset + seq - 1`` to ``x``.

        Args:
            x: Embeddings of shape ``(batch, seq, d_model)``.
            offset: Absolute position of ``x[:, 0]``.

        Returns:
            ``x + E[offset : offset + seq]`` in ``x``'s dtype.

        Raises:
            ValueError: If ``x`` has the wrong shape, ``offset`` is negative, or the
                positions run past ``max_len``.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected x of shape (batch, seq, {self.d_model}), got {tuple(x.shape)}"
            )
        seq = x.shape[1]
        _check_offset_length(seq, offset)
        end = offset + seq
        if end > self.max_len:
            raise ValueError(
                f"sequence needs positions up to {end} (offset {offset} + length {seq}), "
                f"but LearnedPositionalEmbedding has max_len={self.max_len}"
            )
        positions = torch.arange(offset, end, device=self.embedding.weight.device)
        return x + self.embedding(positions).to(device=x.device, dtype=x.dtype)

    def add_at(self, x: Tensor, position_ids: Tensor) -> Tensor:
        """Add the embeddings of explicit positions: ``x + E[position_ids]``.

        Args:
            x: Embeddings of shape ``(batch, seq, d_model)``.
            position_ids: Long tensor of shape ``(batch, seq)`` (or ``(seq,)``), every
                value in ``[0, max_len)``.

        Raises:
            ValueError: If the shapes disagree or a position is out of range.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected x of shape (batch, seq, {self.d_model}), got {tuple(x.shape)}"
            )
        if position_ids.shape[-1] != x.shape[1] or position_ids.dim() not in (1, 2):
            raise ValueError(f"position_ids of shape {tuple(position_ids.shape)} do not fit x "
                             f"of shape {tuple(x.shape)}")
        if not building_graph() and position_ids.numel() \
                and int(position_ids.max()) >= self.max_len:
            raise ValueError(f"position {int(position_ids.max())} is past the "
                             f"LearnedPositionalEmbedding's max_len={self.max_len}")
        return x + self.embedding(position_ids).to(device=x.device, dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def positions_from_padding(input_ids: Tensor, pad_token_id: int) -> Tensor:
    """RoBERTa's (fairseq's) position ids: non-padding tokens count from
    ``pad_token_id + 1`` in order, and every padding token sits at ``pad_token_id``.

    This is ``make_positions`` of fairseq and ``create_position_ids_from_input_ids`` of
    Hugging Face's RoBERTa and XLM-R: with ``pad_token_id = 1`` the first real token is at
    position 2, wherever the padding is (right, left or in between).

    Args:
        input_ids: ``(batch, seq)`` token ids.
        pad_token_id: the padding id (also the padding position).

    Returns:
        ``(batch, seq)`` long position ids.
    """
    real = input_ids.ne(pad_token_id).long()
    return torch.cumsum(real, dim=-1) * real + pad_token_id


def _rotate_half(x: Tensor) -> Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_interleaved(x: Tensor) -> Tensor:
    """``(x[2i], x[2i+1]) -> (-x[2i+1], x[2i])`` for every adjacent pair."""
    even = x[..., 0::2]
    odd = x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotate ``x`` by the angles whose cosines and sines are given (RoPE).

    Each pair of features ``(a, b)`` becomes ``(a cos - b sin, b cos + a sin)``, i.e.
    the complex number ``a + ib`` multiplied by ``exp(i * angle)``.

    Args:
        x: Tensor whose last dimension is ``head_dim`` (even), typically
            ``(batch, heads, seq, head_dim)``.
        cos: Cosines in the same layout as ``x``'s last dimension, broadcastable
            against ``x`` (for instance from :meth:`RotaryEmbedding.cos_sin`).
        sin: Sines, same shape as ``cos``.
        interleaved: ``False`` pairs ``(x[i], x[i + head_dim/2])`` ("rotate half",
            GPT-NeoX / LLaMA); ``True`` pairs ``(x[2i], x[2i+1])`` (RoFormer paper).

    Returns:
        The rotated tensor, same shape and dtype as ``x``. Half-precision inputs are
        rotated in float32 and cast back.

    Raises:
        ValueError: If the last dimension of ``x`` is odd or does not match ``cos``.
    """
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"rotary embedding needs an even head_dim, got {head_dim}")
    if cos.shape[-1] != head_dim or sin.shape[-1] != head_dim:
        raise ValueError(
            f"cos/sin last dimension ({cos.shape[-1]}, {sin.shape[-1]}) must equal "
            f"x's head_dim ({head_dim})"
        )
    compute_dtype = torch.float32 if x.dtype in _LOW_PRECISION else x.dtype
    xc = x.to(compute_dtype)
    cos = cos.to(device=x.device, dtype=compute_dtype)
    sin = sin.to(device=x.device, dtype=compute_dtype)
    rotated = _rotate_interleaved(xc) if interleaved else _rotate_half(xc)
    return (xc * cos + rotated * sin).to(x.dtype)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) of Su et al., "RoFormer".

    Feature pair ``i`` of a query or key at position ``m`` is rotated by the angle
    ``m * theta_i`` with ``theta_i = inv_freq[i] = base^(-2i / head_dim)``. Because
    rotations compose, ``<rope(q, m), rope(k, n)>`` depends only on ``m - n``.

    The cos/sin tables are computed in float64 and stored as float32 in non-persistent
    buffers, already expanded to ``head_dim`` in the chosen layout; they grow on
    demand.

    Args:
        head_dim: Per-head feature size; must be even and positive.
        base: The frequency base (10000 in the paper).
        max_len: Number of positions to precompute.
        interleaved: ``False`` for the "rotate half" layout (pairs ``(x[i],
            x[i + head_dim/2])``, GPT-NeoX / LLaMA in Hugging Face); ``True`` for the
            paper's adjacent pairs ``(x[2i], x[2i+1])``.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``base`` is not positive,
            or ``max_len`` is not positive.
    """

    inv_freq: Tensor
    cos_cached: Tensor
    sin_cached: Tensor

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        max_len: int = 4096,
        interleaved: bool = False,
    ) -> None:
        super().__init__()
        if head_dim <= 0 or head_dim % 2 != 0:
            raise ValueError(f"RotaryEmbedding needs an even, positive head_dim, got {head_dim}")
        if base <= 0:
            raise ValueError(f"base must be positive, got {base}")
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.head_dim = head_dim
        self.base = float(base)
        self.interleaved = interleaved
        cpu = torch.device("cpu")
        self.register_buffer("inv_freq", self._inv_freq64(cpu).to(torch.float32), persistent=False)
        cos, sin = self._tables(max_len, cpu)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    def _inv_freq64(self, device: torch.device) -> Tensor:
        two_i = torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=device)
        return torch.pow(self.base, -two_i / self.head_dim)

    def _tables(self, length: int, device: torch.device) -> tuple[Tensor, Tensor]:
        position = torch.arange(length, dtype=torch.float64, device=device)
        angle = torch.outer(position, self._inv_freq64(device))  # (length, head_dim / 2)
        if self.interleaved:
            angle = angle.repeat_interleave(2, dim=-1)
        else:
            angle = torch.cat((angle, angle), dim=-1)
        return torch.cos(angle).to(torch.float32), torch.sin(angle).to(torch.float32)

    @property
    def cached_len(self) -> int:
        """Number of positions currently held in the cos/sin cache."""
        return self.cos_cached.shape[0]

    def _ensure(self, length: int) -> None:
        current = self.cached_len
        if length > current or self.cos_cached.dtype != torch.float32:
            # A module-wide ``.to(dtype)`` may have cast the cache; rebuild in float32.
            new_len = _grown_length(length, current) if length > current else current
            self.cos_cached, self.sin_cached = self._tables(new_len, self.cos_cached.device)

    def cos_sin(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Look up the cosines and sines for the given absolute positions.

        Args:
            positions: Integer tensor of shape ``(seq,)`` or ``(batch, seq)``.

        Returns:
            ``(cos, sin)``, float32, each of shape ``(1, 1, seq, head_dim)`` or
            ``(batch, 1, seq, head_dim)`` so they broadcast over heads.

        Raises:
            TypeError: If ``positions`` is not an integer tensor.
            ValueError: If ``positions`` is not 1-D or 2-D, or holds a negative value.
        """
        if not _is_integer(positions):
            raise TypeError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.dim() not in (1, 2):
            raise ValueError(
                f"positions must have shape (seq,) or (batch, seq), got {tuple(positions.shape)}"
            )
        if positions.numel() > 0:
            low, high = (int(v) for v in torch.stack(torch.aminmax(positions)).tolist())
            if low < 0:
                raise ValueError(f"positions must be >= 0, got minimum {low}")
            self._ensure(high + 1)
        index = positions.to(device=self.cos_cached.device, dtype=torch.long)
        cos = self.cos_cached[index]
        sin = self.sin_cached[index]
        if positions.dim() == 1:
            return cos[None, None], sin[None, None]
        return cos.unsqueeze(1), sin.unsqueeze(1)

    def forward(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """Rotate queries or keys by their positions.

        Args:
            x: Tensor of shape ``(batch, heads, seq, head_dim)``.
            positions: Absolute positions, integer ``(seq,)`` or ``(batch, seq)``;
                defaults to ``0, ..., seq - 1``.

        Returns:
            The rotated tensor, same shape and dtype as ``x`` (computed in float32 for
            float16 / bfloat16 inputs).

        Raises:
            ValueError: If ``x`` is not 4-D with last dimension ``head_dim``, or
                ``positions`` does not match ``x``'s sequence length.
            TypeError: If ``positions`` is not an integer tensor.
        """
        if x.dim() != 4 or x.shape[-1] != self.head_dim:
            raise ValueError(
                f"expected x of shape (batch, heads, seq, {self.head_dim}), got {tuple(x.shape)}"
            )
        seq = x.shape[-2]
        if positions is None:
            self._ensure(seq)
            cos = self.cos_cached[:seq][None, None]
            sin = self.sin_cached[:seq][None, None]
        else:
            if positions.shape[-1] != seq:
                raise ValueError(
                    f"positions cover {positions.shape[-1]} tokens but x has seq={seq}"
                )
            cos, sin = self.cos_sin(positions)
        return apply_rotary(x, cos, sin, interleaved=self.interleaved)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, base={self.base}, interleaved={self.interleaved}, "
            f"cached_len={self.cached_len}"
        )
