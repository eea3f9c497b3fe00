"""The block-sparse kernel's CPU path: PyTorch's fused CPU attention per chunk of blocks.

:func:`~headwise.attention.kernels.blocksparse.blocksparse_attention` gathers, for each
query block, the key blocks its plan lists and runs attention on the batch of blocks. Left
to autograd, every gathered key and value (each key is gathered once per query block that
needs it: about five times for a window of two blocks) and every gradient of them lives at
once. Here a custom autograd function runs the kernel under PyTorch's CPU flash attention
(the op ``F.scaled_dot_product_attention`` itself calls on CPU, which also returns the
log-sum-exp of every row) a chunk of query blocks at a time, in the forward and in the
backward, and scatter-adds each chunk's key and value gradients into the result at once.
Only the output, the log-sum-exp and one chunk's gathered keys, values, mask and
gradients exist at any time: memory is the size of the inputs plus a bounded chunk, and
no key is copied more than the chunk needs.

Served here: CPU tensors, no dropout, equal query and value head sizes (the fused op's
requirement) and a bias that needs no gradient (it is added to the chunk's float mask).
Everything else takes the autograd path of the caller.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

_FWD = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
_BWD = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)

#: key elements (chunk query blocks x batch*heads x key slots x head dim) per chunk of the
#: backward, which holds their gradients (2 MiB per tensor in float32); bounds a call's
#: temporaries
CHUNK_ELEMENTS = 1 << 19
#: the forward holds keys of strided chunks as views and only query-sized outputs, so its
#: chunks may hold this many times more blocks (fewer, larger calls)
FORWARD_CHUNK_FACTOR = 16


def fused_available(q: Tensor, v: Tensor, bias: Tensor | None, dropout_p: float) -> bool:
    """Whether :func:`fused_blocksparse` can serve this request (see the module docstring)."""
    return (_FWD is not None and _BWD is not None and q.device.type == "cpu"
            and dropout_p == 0.0 and q.shape[-1] == v.shape[-1]
            and (bias is None or not bias.requires_grad)
            and q.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16))


class ChunkSpec:
    """One chunk of a group: its query blocks, key slots and mask.

    Attributes:
        q_pos: (n, block) query positions; those past the query length (a partial last
            block) are dead rows, computed from a clamped copy and never read.
        k_pos: (n, S) key positions of the slots (clamped into range).
        view: None, or ``(a, t, s0)`` when the chunk is the full query blocks ``a, a + t,
            ...`` whose slots are the key ranges ``[s0 + j * t * block, ... + S)``, disjoint
            (``t * block >= S`` when n > 1): queries, keys, values, outputs and gradients
            are then strided views of the inputs and results, never copies.
        mask: None or the boolean allowed mask (n, rows | 1, heads | 1, block, S); chunks
            with equal masks share one tensor (see ``shared``).
        row_ok: None or (n, rows | 1, heads | 1, block, 1): rows that are zeroed when False.
        bias: None or the chunk's additive bias (n, B | 1, H | 1, block, S).
        shared: whether ``mask`` is the same tensor as another chunk's (its float form is
            then made once per call and kept for the backward).
    """

    def __init__(self, q_pos: Tensor, k_pos: Tensor, view: tuple[int, int, int] | None,
                 mask: Tensor | None, row_ok: Tensor | None, bias: Tensor | None = None,
                 shared: bool = False) -> None:
        self.q_pos, self.k_pos, self.view = q_pos, k_pos, view
        self.mask, self.row_ok, self.bias, self.shared = mask, row_ok, bias, shared


class _Layout:
    """The fused op's layout: batch = query blocks, heads = B * kv heads, and the query
    rows of the G = H / Hk heads that share a kv head stacked (G * block rows), so keys and
    values are never repeated for grouped-query heads."""

    def __init__(self, b: int, h: int, hk: int, q_len: int, n_q_pad: int, k_len: int,
                 device: torch.device) -> None:
        self.b, self.h, self.hk, self.g = b, h, hk, h // hk
        self.q_len, self.n_q_pad, self.k_len = q_len, n_q_pad, k_len
        bh = torch.arange(b * h, device=device).view(1, b * hk, self.g, 1)  # p * G + g
        self.q_base, self.o_base = bh * q_len, bh * n_q_pad
        self.k_base = torch.arange(b * hk, device=device).view(1, -1, 1) * k_len

    def q_rows(self, pos: Tensor, padded: bool = False) -> Tensor:
        """(n, B * Hk, G * block) flat rows of query positions ``pos`` (n, block)."""
        n = pos.shape[0]
        if padded:
            return (self.o_base + pos[:, None, None, :]).view(n, self.b * self.hk, -1)
        return (self.q_base + pos.clamp(max=self.q_len - 1)[:, None, None, :]).view(
            n, self.b * self.hk, -1)

    def k_rows(self, pos: Tensor) -> Tensor:
        """(n, B * Hk, S) flat rows of key slots ``pos`` (n, S)."""
        return self.k_base + pos[:, None, :]

    def fold(self, x: Tensor) -> Tensor:
        """(n, B | 1, H | 1, block, c) -> (n, B * Hk | 1, G * block, c)."""
        n, c = x.shape[0], x.shape[-1]
        if x.shape[1] == 1 and x.shape[2] == 1:
            x = x[:, 0]
            return x if self.g == 1 else x.repeat(1, 1, self.g, 1)
        x = x.expand(n, self.b, self.h, *x.shape[3:])
        return x.reshape(n, self.b * self.hk, -1, c)


def _float_mask(c: ChunkSpec, lay: _Layout, dtype: torch.dtype,
                cache: dict[int, Tensor]) -> Tensor | None:
    """The chunk's additive mask (0 / -inf, plus the bias) in ``dtype``, folded."""
    if c.bias is None and c.mask is None:
        return None
    if c.bias is None:
        if c.shared and id(c.mask) in cache:
            return cache[id(c.mask)]
        m = lay.fold(c.mask)
        out = torch.zeros(m.shape, dtype=dtype).masked_fill_(~m, float("-inf"))
        if c.shared:
            cache[id(c.mask)] = out
        return out
    out = lay.fold(c.bias).to(dtype)
    if c.mask is not None:
        out = out.masked_fill(~lay.fold(c.mask), float("-inf"))
    return out


def _take(flat: Tensor, rows: Tensor) -> Tensor:
    """``flat[rows]`` for a (rows, d) tensor: (*rows.shape, d), contiguous (memcpy per row)."""
    return flat.index_select(0, rows.flatten()).view(*rows.shape, flat.shape[-1])


def _strided(flat: Tensor, per_head: int, n: int, rows: int, first: int, step: int) -> Tensor:
    """(n, heads, rows, d) view of a (heads * per_head, d) tensor: item j starts at row
    ``first + j * step`` of every head."""
    d = flat.shape[-1]
    heads = flat.shape[0] // per_head
    return flat.as_strided((n, heads, rows, d), (step * d, per_head * d, d, 1),
                           flat.storage_offset() + first * d)


def _rows(x: Tensor) -> Tensor:
    """``x`` (..., d) as row-major (rows, d): a view when ``x`` is contiguous, else a copy.

    :func:`_strided` addresses rows by ``row * d`` from the storage offset, so a
    ``reshape`` is not enough: it returns a view whenever the strides allow one, and
    for an expanded tensor (stride 0, the gradient of ``out.sum()``) or a transposed
    one whose merged dimensions happen to be viewable that view is not row-major.
    """
    return x.contiguous().view(-1, x.shape[-1])


def _keys(c: ChunkSpec, lay: _Layout, kf: Tensor, vf: Tensor, block: int
          ) -> tuple[Tensor, Tensor]:
    """The chunk's keys and values, (n, B * Hk, S, d): views for a strided chunk."""
    if c.view is not None:
        n, s = c.k_pos.shape
        _, t, s0 = c.view
        return tuple(_strided(x, lay.k_len, n, s, s0, t * block) for x in (kf, vf))
    kr = lay.k_rows(c.k_pos)
    return _take(kf, kr), _take(vf, kr)


def _queries(c: ChunkSpec, lay: _Layout, flat: Tensor, block: int, padded: bool) -> Tensor:
    """Query-shaped rows of the chunk, (n, B * Hk, G * block, d): a view when possible."""
    if c.view is not None and lay.g == 1:
        a, t, _ = c.view
        return _strided(flat, lay.n_q_pad if padded else lay.q_len, c.q_pos.shape[0], block,
                        a * block, t * block)
    return _take(flat, lay.q_rows(c.q_pos, padded))


def _put(c: ChunkSpec, lay: _Layout, flat: Tensor, x: Tensor, block: int) -> None:
    """Write query-shaped ``x`` into the padded (B * H * n_q_pad, d) ``flat``."""
    if c.view is not None and lay.g == 1:
        _queries(c, lay, flat, block, padded=True).copy_(x)
    else:
        flat.index_copy_(0, lay.q_rows(c.q_pos, padded=True).flatten(),
                         x.reshape(-1, x.shape[-1]).to(flat.dtype))


class _FusedBlockSparse(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, chunks: list[ChunkSpec],
                bwd_chunks: list[ChunkSpec], block: int, n_q_pad: int, scale: float) -> Tensor:
        b, h, q_len, d = q.shape
        lay = _Layout(b, h, k.shape[1], q_len, n_q_pad, k.shape[2], q.device)
        qf, kf, vf = (_rows(x) for x in (q, k, v))  # views for contiguous inputs
        out = q.new_empty(b * h * n_q_pad, d)
        lse_all, masks = None, {}
        for c in chunks:
            kc, vc = _keys(c, lay, kf, vf, block)
            oc, lse = _FWD(_queries(c, lay, qf, block, False), kc, vc,
                           attn_mask=_float_mask(c, lay, q.dtype, masks), scale=scale)
            if c.row_ok is not None:
                oc = oc.masked_fill_(~lay.fold(c.row_ok), 0.0)
            _put(c, lay, out, oc, block)
            if lse_all is None:
                lse_all = lse.new_empty(b * h * n_q_pad, 1)
            _put(c, lay, lse_all, lse[..., None], block)
        ctx.chunks, ctx.lse, ctx.masks, ctx.lay = bwd_chunks, lse_all, masks, lay
        ctx.block, ctx.scale, ctx.out = block, scale, out
        ctx.save_for_backward(q, k, v)
        return out.view(b, h, n_q_pad, d)[:, :, :q_len]  # a view: no copy

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v = ctx.saved_tensors
        lay, block, scale, of = ctx.lay, ctx.block, ctx.scale, ctx.out
        d = q.shape[-1]
        acc = torch.float32 if q.dtype in (torch.bfloat16, torch.float16) else q.dtype
        dq = torch.empty(of.shape, dtype=acc)
        dk = torch.zeros(k.shape, dtype=acc).view(-1, d)
        dv = torch.zeros(v.shape, dtype=acc).view(-1, d)
        # the incoming gradient may be expanded (``out.sum()``: stride 0), transposed or a
        # slice's: the strided views below need row-major rows, as do the inputs
        qf, kf, vf, gf = (_rows(x) for x in (q, k, v, grad))
        for c in ctx.chunks:
            # dead rows (past q_len) read a clamped copy; their row_ok is False, so their
            # gradient is zeroed and they contribute nothing
            gc = _queries(c, lay, gf, block, False)
            if c.row_ok is not None:  # rows with no allowed key pass no gradient
                gc = gc.masked_fill(~lay.fold(c.row_ok), 0.0)
            kc, vc = _keys(c, lay, kf, vf, block)
            lse = _queries(c, lay, ctx.lse, block, True)[..., 0].contiguous()
            gq, gk, gv = _BWD(gc, _queries(c, lay, qf, block, False), kc, vc,
                              _queries(c, lay, of, block, True), lse, 0.0, False,
                              attn_mask=_float_mask(c, lay, q.dtype, ctx.masks), scale=scale)
            del gc, kc, vc
            _put(c, lay, dq, gq, block)
            if c.view is not None:  # disjoint key ranges: add in place through views
                for acc_, g in ((dk, gk), (dv, gv)):
                    _keys(c, lay, acc_, acc_, block)[0].add_(g)
            else:
                kr = lay.k_rows(c.k_pos).flatten()
                dk.index_add_(0, kr, gk.reshape(-1, d).to(acc))
                dv.index_add_(0, kr, gv.reshape(-1, d).to(acc))
            del gq, gk, gv
        dq = dq.view(lay.b, lay.h, lay.n_q_pad, d)[:, :, :lay.q_len]
        return (dq.to(q.dtype), dk.view(k.shape).to(k.dtype), dv.view(v.shape).to(v.dtype),
                None, None, None, None, None)


def make_chunks(q_blocks: Tensor, k_start: Tensor | None, q_pos: Tensor, k_pos: Tensor,
                mask: Tensor | None, row_ok: Tensor | None, block: int, q_len: int,
                max_blocks: int) -> list[ChunkSpec]:
    """Cut a group of query blocks into chunks of at most ``max_blocks`` blocks.

    With ``k_start`` (each block's slots are a contiguous key range), runs of consecutive
    full query blocks whose range starts at the same offset from the block (a band's
    interior) become strided chunks: blocks ``r, r + K, r + 2K, ...`` of a run (``K`` =
    slots / block), whose key ranges are disjoint. Other blocks are gathered, ``max_blocks``
    at a time. A chunk whose blocks all have the same mask gets that mask once (broadcast
    over its blocks), and chunks with equal masks share one tensor.

    Args:
        q_blocks: (n,) the group's query blocks, ascending.
        k_start: None or (n,) first key position of each block's contiguous slots.
        q_pos, k_pos: (n, block) query and (n, S) key positions (keys clamped in range).
        mask, row_ok: the group's rendered mask and row flags (see ``BlockGroup``).
        block: block size.
        q_len: query length (partial last blocks are gathered).
        max_blocks: most query blocks per chunk.

    Returns:
        The chunks; each of the group's blocks is in exactly one.
    """
    n, slots = k_pos.shape
    qb = q_blocks.tolist()
    groups: list[tuple[list[int], int]] = []  # (indices, stride in blocks)
    loose: list[int] = []
    if k_start is not None:
        ks = k_start.tolist()
        width = -(-slots // block)
        i = 0
        while i < n:
            j = i
            while (j + 1 < n and qb[j + 1] == qb[j] + 1 and (qb[j + 1] + 1) * block <= q_len
                   and ks[j + 1] - qb[j + 1] * block == ks[i] - qb[i] * block):
                j += 1
            if (qb[i] + 1) * block > q_len:
                loose.append(i)
            else:
                for r in range(min(width, j - i + 1)):
                    idx = list(range(i + r, j + 1, width))
                    groups += [(idx[c: c + max_blocks], width)
                               for c in range(0, len(idx), max_blocks)]
            i = j + 1
    else:
        loose = list(range(n))
    groups += [(loose[c: c + max_blocks], 0) for c in range(0, len(loose), max_blocks)]
    chunks: list[ChunkSpec] = []
    seen: list[Tensor] = []
    for idx, stride in groups:
        sel = torch.tensor(idx)
        m = None if mask is None else mask[sel]
        if m is not None and len(idx) > 1 and bool((m == m[:1]).all()):
            m = m[:1]
        same = next((u for u in seen if m is not None and u.shape == m.shape
                     and torch.equal(u, m)), None)
        if m is not None and same is None:
            seen.append(m)
        ok = None if row_ok is None else row_ok[sel]
        if ok is not None and bool(ok.all()):
            ok = None
        view = None
        if stride and (len(idx) == 1 or stride * block >= slots):
            view = (qb[idx[0]], max(stride, 1), ks[idx[0]])
        chunks.append(ChunkSpec(q_pos[sel], k_pos[sel], view, m if same is None else same,
                                ok, shared=same is not None))
        if same is not None:
            next(c for c in chunks if c.mask is same).shared = True
    return chunks


def fused_blocksparse(q: Tensor, k: Tensor, v: Tensor, chunks: list[ChunkSpec],
                      bwd_chunks: list[ChunkSpec], block: int, n_q_pad: int, scale: float
                      ) -> Tensor:
    """Block-sparse attention over ``chunks`` with the fused CPU kernel, chunk by chunk.

    Args:
        q: (B, H, q_len, d); k, v: (B, Hk, k_len, d).
        chunks: the forward's chunks of every group; each query block is in exactly one.
        bwd_chunks: the same blocks in the backward's chunks (smaller: they hold key and
            value gradients).
        block: block size.
        n_q_pad: query length rounded up to whole blocks.
        scale: multiplier of the dot products.

    Returns:
        (B, H, q_len, d); rows whose ``row_ok`` is False are zeros.
    """
    return _FusedBlockSparse.apply(q, k, v, chunks, bwd_chunks, block, n_q_pad, scale)
