"""Block-sparse (banded) attention: only the key blocks a sparse pattern needs, with autograd.

The sequence is cut into blocks of ``block`` positions. From the pattern's block layout
(:meth:`AttentionPattern.block_layout`: which ``block x block`` tiles hold any allowed
pair), each query block gets the list of key blocks it needs. The key and value blocks
are gathered into one ``(query blocks, batch * kv_heads, K * block, dim)`` tensor per
group of query blocks (``K`` = the group's longest list, shorter lists padded with an
all-masked dummy block), the pair mask of those gathered positions is evaluated from the
pattern's own rule on absolute indices (once per pattern and shape, then cached), and
PyTorch's fused ``scaled_dot_product_attention`` runs on the whole batch of blocks at
once. Autograd flows through the gathers (advanced indexing, whose backward accumulates
into the source) and SDPA, so the kernel trains on CPU, where FlexAttention has no
backward.

Cost and memory are ``O(n * K * block)``: linear in the sequence length for a fixed
window. Global query rows (Longformer's global tokens, BigBird's global blocks) need
every key block; they would make ``K`` the whole sequence for every block, so query
blocks are split into two groups at the key-list length that minimises the number of
computed tiles (a light, banded group and a heavy group of the few blocks that see
nearly everything). The split is chosen from the layout alone; nothing is tuned.

When a group's key blocks are consecutive for every query block (a band), its slots are
instead each block's contiguous key range (``BlockGroup.k_start``; keys of the range the
block does not need are masked), so keys can be read as views.

On CPU without dropout (and with a bias that needs no gradient), the work goes to
:mod:`~headwise.attention.kernels.blocksparse_cpu`: a custom autograd function that runs
PyTorch's fused CPU attention a bounded chunk of blocks at a time in the forward and the
backward (keys of banded groups as strided views, never copied), so memory is the inputs,
output and gradients plus one chunk. Elsewhere autograd runs through gathers and SDPA as
described above.

A query row with no allowed key returns zeros and passes zero gradient (it is given its
whole gathered row inside SDPA and zeroed afterwards, so no backend can produce NaN).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from headwise.attention.kernels import blocksparse_cpu
from headwise.attention.kernels.blocksparse_cpu import (
    ChunkSpec,
    fused_available,
    fused_blocksparse,
    make_chunks,
)
from headwise.attention.kernels.tiled import MaskTiles
from headwise.attention.kernels.validate import expand_to_lengths
from headwise.attention.masks import AttentionPattern

#: default block size (query and key blocks are the same size)
DEFAULT_BLOCK = 128
#: query blocks are split into a light and a heavy group only when that computes at most
#: this fraction of the tiles one group would (a second group costs a gather and an SDPA call)
SPLIT_MAX_RATIO = 0.75

_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class BlockGroup:
    """Query blocks computed together, each against ``k_blocks.shape[1]`` key blocks.

    Attributes:
        q_blocks: (n,) query block indices.
        k_blocks: (n, K) key block indices per query block; ``n_k_blocks`` (one past the
            last real block) marks an all-masked padding slot.
        mask: None (every gathered pair allowed), or the boolean SDPA mask
            (n, rows | 1, heads | 1, block, K * block); fully masked rows are all True.
        row_ok: None, or (n, rows | 1, heads | 1, block, 1): False on query rows with no
            allowed key, whose output is zeroed.
        k_start: None, or (n,) when every query block's key blocks are consecutive: its
            slots are then the contiguous key range ``[k_start, k_start + K * block)``
            (clamped into the sequence; keys of that range it does not need are masked),
            so keys can be taken as views instead of gathered.
    """

    q_blocks: Tensor
    k_blocks: Tensor
    k_start: Tensor | None = None
    mask: Tensor | None = None
    row_ok: Tensor | None = None
    _rendered: bool = field(default=False, repr=False)
    _chunks: dict = field(default_factory=dict, repr=False)


@dataclass
class BlockPlan:
    """Which key blocks each query block attends to, grouped by key-list length."""

    q_len: int
    k_len: int
    block: int
    groups: list[BlockGroup]

    @property
    def n_q_blocks(self) -> int:
        """Number of query blocks (the last one may be partial)."""
        return -(-self.q_len // self.block)

    @property
    def n_k_blocks(self) -> int:
        """Number of key blocks (the last one may be partial)."""
        return -(-self.k_len // self.block)

    def computed_tiles(self) -> int:
        """``block x block`` tiles the kernel computes, padding slots included."""
        return sum(int(g.k_blocks.numel()) for g in self.groups)

    def density(self) -> float:
        """Computed tiles over all tiles: the kernel's cost relative to dense attention."""
        return self.computed_tiles() / max(1, self.n_q_blocks * self.n_k_blocks)


def split_point(counts: list[int]) -> int:
    """The key-list length at which to split query blocks into a light and a heavy group.

    Query blocks needing at most the returned number of key blocks form the light group
    (each padded to that length); the rest form the heavy group (padded to the largest
    count). The split minimises computed tiles, and is taken only when it computes at
    most :data:`SPLIT_MAX_RATIO` of the tiles of a single group.

    Args:
        counts: key blocks needed by each query block.

    Returns:
        The light group's key-list length (the largest count when one group is best).
    """
    top = max(counts, default=0)
    single = top * len(counts)
    best, best_cost = top, single
    srt = sorted(counts)
    for i, c in enumerate(srt):  # i + 1 blocks have count <= c when srt[i + 1] > c
        if i + 1 < len(srt) and srt[i + 1] == c:
            continue
        cost = (i + 1) * c + (len(srt) - i - 1) * top
        if cost < best_cost:
            best, best_cost = c, cost
    return best if best_cost <= SPLIT_MAX_RATIO * single else top


def _make_groups(layout: Tensor, block: int, k_len: int) -> list[BlockGroup]:
    n_k_blocks = layout.shape[1]
    counts = layout.sum(1).tolist()
    cut = split_point(counts)
    groups = []
    for sel in (layout.sum(1) <= cut, layout.sum(1) > cut):
        q_blocks = sel.nonzero().flatten()
        if q_blocks.numel() == 0:
            continue
        rows = layout[q_blocks]
        width = max(1, int(rows.sum(1).max()))
        # stable sort puts the needed blocks first, in order; the rest become padding
        order = torch.sort((~rows).to(torch.int8), dim=1, stable=True).indices[:, :width]
        k_blocks = torch.where(rows.gather(1, order), order, n_k_blocks)
        need = rows.sum(1)
        first = order[:, 0]
        last = k_blocks.gather(1, (need - 1).clamp(min=0)[:, None])[:, 0]
        k_start = None
        if width * block <= k_len and bool((last - first + 1 == need).all()):
            k_start = (first * block).clamp(max=k_len - width * block)
        groups.append(BlockGroup(q_blocks, k_blocks, k_start))
    return groups


def _mask_fn(mask: Tensor | AttentionPattern, q_len: int, k_len: int, device: torch.device):
    """``(mask_mod, rows, heads)``: the pair rule of a pattern or a 4-D boolean tensor."""
    if isinstance(mask, AttentionPattern):
        return mask.bind(q_len, k_len, device), mask.batch_size or 1, 1
    m = mask

    def mask_mod(b, h, q_idx, kv_idx):
        return m[b, h, q_idx, kv_idx]

    return mask_mod, m.shape[0], m.shape[1]


def _positions(group: BlockGroup, block: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Absolute query (n, block) and key (n, K * block) positions of a group's slots."""
    offs = torch.arange(block, device=device)
    qpos = group.q_blocks[:, None] * block + offs
    if group.k_start is not None:
        return qpos, group.k_start[:, None] + torch.arange(group.k_blocks.numel()
                                                           // len(group.k_blocks) * block,
                                                           device=device)
    kpos = (group.k_blocks[:, :, None] * block + offs).flatten(1)
    return qpos, kpos


def _render(group: BlockGroup, mask: Tensor | AttentionPattern | None, q_len: int, k_len: int,
            block: int, device: torch.device) -> None:
    """Evaluate the pair mask of a group's gathered slots (once; patterns cache it)."""
    if group._rendered:
        return
    with torch.inference_mode(False):  # cached masks must serve calls that need gradients
        _render_group(group, mask, q_len, k_len, block, device)
    group._rendered = True


def _render_group(group: BlockGroup, mask: Tensor | AttentionPattern | None, q_len: int,
                  k_len: int, block: int, device: torch.device) -> None:
    qpos, kpos = _positions(group, block, device)
    qpos, kpos = qpos[:, None, None, :, None], kpos[:, None, None, None, :]
    valid = (qpos < q_len) & (kpos < k_len)
    if mask is None:
        allowed = valid
    else:
        mask_mod, rows, heads = _mask_fn(mask, q_len, k_len, device)
        b = torch.arange(rows, device=device).view(1, rows, 1, 1, 1)
        h = torch.arange(heads, device=device).view(1, 1, heads, 1, 1)
        allowed = mask_mod(b, h, qpos.clamp(max=q_len - 1), kpos.clamp(max=k_len - 1)) & valid
    if bool(allowed.all()):
        group.mask, group.row_ok = None, None
    else:
        row_ok = allowed.any(-1, keepdim=True)
        full_rows = bool(row_ok.all())
        group.mask = allowed if full_rows else allowed | ~row_ok
        group.row_ok = None if full_rows else row_ok


def block_plan(mask: Tensor | AttentionPattern | None, q_len: int, k_len: int,
               block: int = DEFAULT_BLOCK, device: torch.device | str = "cpu") -> BlockPlan:
    """The key blocks each query block needs, grouped (cached per pattern and shape).

    Args:
        mask: a pattern, a 4-D boolean tensor (True = may attend), or None (dense).
        q_len, k_len: query and key lengths.
        block: block size of queries and keys.
        device: where the index tensors and masks live.

    Returns:
        The plan; its masks are rendered on first use by :func:`blocksparse_attention`.

    Raises:
        ValueError: a non-positive block size or length.
    """
    if not isinstance(block, int) or block <= 0:
        raise ValueError(f"block must be a positive int, got {block!r}")
    if q_len <= 0 or k_len <= 0:
        raise ValueError(f"lengths must be positive, got q_len={q_len}, k_len={k_len}")
    device = torch.device(device)
    key = (q_len, k_len, block, str(device))
    cache = _PLANS.setdefault(mask, {}) if isinstance(mask, AttentionPattern) else None
    if cache is not None and key in cache:
        return cache[key]
    # a plan made under inference mode must still serve later calls that need gradients
    with torch.inference_mode(False):
        layout = MaskTiles(mask, q_len, k_len, block, block, device).any.clone()
        groups = _make_groups(layout, block, k_len)
        for g in groups:
            g.q_blocks, g.k_blocks = g.q_blocks.to(device), g.k_blocks.to(device)
            g.k_start = None if g.k_start is None else g.k_start.to(device)
    plan = BlockPlan(q_len, k_len, block, groups)
    if cache is not None:
        cache[key] = plan
    return plan


def _gather_bias(bias: Tensor, group: BlockGroup, block: int, q_len: int, k_len: int
                 ) -> Tensor:
    """The bias at a group's gathered slots: (n, B | 1, H | 1, block, K * block)."""
    qpos, kpos = _positions(group, block, bias.device)
    b = torch.arange(bias.shape[0], device=bias.device).view(1, -1, 1, 1, 1)
    h = torch.arange(bias.shape[1], device=bias.device).view(1, 1, -1, 1, 1)
    return bias[b, h, qpos.clamp(max=q_len - 1)[:, None, None, :, None],
                kpos.clamp(max=k_len - 1)[:, None, None, None, :]]


def _chunks(group: BlockGroup, slots: int, block: int, q_len: int, k_len: int,
            bias: Tensor | None) -> list[ChunkSpec]:
    """The group's chunks for the fused CPU path, about ``slots`` key slots each (cached
    per chunk size)."""
    n, width = group.k_blocks.shape
    step = max(1, slots // (width * block))
    if step not in group._chunks:
        qpos, kpos = _positions(group, block, group.q_blocks.device)
        group._chunks[step] = make_chunks(group.q_blocks, group.k_start, qpos,
                                          kpos.clamp(max=k_len - 1), group.mask, group.row_ok,
                                          block, q_len, step)
    chunks = group._chunks[step]
    if bias is None:
        return chunks
    out = []
    for c in chunks:  # the bias at the chunk's pairs (queries clamped like its positions)
        b = torch.arange(bias.shape[0], device=bias.device).view(1, -1, 1, 1, 1)
        h = torch.arange(bias.shape[1], device=bias.device).view(1, 1, -1, 1, 1)
        gb = bias[b, h, c.q_pos.clamp(max=q_len - 1)[:, None, None, :, None],
                  c.k_pos[:, None, None, None, :]]
        out.append(ChunkSpec(c.q_pos, c.k_pos, c.view, c.mask, c.row_ok, gb))
    return out


def _flat_heads(x: Tensor, b: int, h: int) -> Tensor:
    """(n, B | 1, H | 1, r, c) -> (n, B * H | 1, r, c), the layout of the SDPA call."""
    if x.shape[1] == 1 and x.shape[2] == 1:
        return x[:, 0]
    return x.expand(x.shape[0], b, h, *x.shape[3:]).reshape(x.shape[0], b * h, *x.shape[3:])


def _blocks(x: Tensor, n_blocks: int, block: int) -> Tensor:
    """(B, H, L, D) -> (B, H, n_blocks, block, D), zero-padded at the end."""
    pad = n_blocks * block - x.shape[2]
    if pad:
        x = F.pad(x, (0, 0, 0, pad))
    return x.view(x.shape[0], x.shape[1], n_blocks, block, x.shape[-1])


def blocksparse_attention(q: Tensor, k: Tensor, v: Tensor,
                          mask: Tensor | AttentionPattern | None, bias: Tensor | None,
                          scale: float, dropout_p: float = 0.0, *, block: int | None = None
                          ) -> Tensor:
    """Attention over only the key blocks the mask needs (see the module docstring).

    Args:
        q: (batch, heads, q_len, d).
        k, v: (batch, kv_heads, k_len, d / d_v); grouped-query heads allowed.
        mask: a pattern, a 4-D boolean tensor broadcastable to (batch, heads, q_len,
            k_len), or None (then every block is computed: dense attention).
        bias: additive float scores (B | 1, H | 1, q_len, k_len), or None; gathered at the
            computed pairs only, differentiable.
        scale: multiplier of the dot products.
        dropout_p: dropout on the attention weights (SDPA's).
        block: block size (default :data:`DEFAULT_BLOCK`).

    Returns:
        (batch, heads, q_len, d_v) in q's dtype; rows with no allowed key are zeros.

    Raises:
        ValueError: a non-positive block size.
    """
    block = DEFAULT_BLOCK if block is None else block
    b, h, q_len, _ = q.shape
    k_len = k.shape[2]
    # masks and biases are indexed at query and key positions: broadcast dims expanded
    mask, bias = (expand_to_lengths(t, q_len, k_len) for t in (mask, bias))
    plan = block_plan(mask, q_len, k_len, block, q.device)
    nq = plan.n_q_blocks
    if fused_available(q, v, bias, dropout_p):
        fwd, bwd = [], []
        for group in plan.groups:
            _render(group, mask, q_len, k_len, block, q.device)
            elems = blocksparse_cpu.CHUNK_ELEMENTS // (b * k.shape[1] * q.shape[-1])
            fwd += _chunks(group, elems * blocksparse_cpu.FORWARD_CHUNK_FACTOR, block, q_len,
                           k_len, bias)
            bwd += _chunks(group, elems, block, q_len, k_len, bias)
        return fused_blocksparse(q, k, v, fwd, bwd, block, nq * block, scale)
    hk, dv = k.shape[1], v.shape[-1]
    # One 4-D SDPA call per group, laid out (query blocks, batch * heads, rows, dim) (a 5-D
    # call falls back to the unfused math path on CPU): query head b * H + h maps to kv
    # head b * Hk + h // (H / Hk) under enable_gqa, and every reshape below is a view.
    qb = _blocks(q, nq, block).permute(2, 0, 1, 3, 4)  # (nq, B, H, block, d)
    outs = []
    for group in plan.groups:
        _render(group, mask, q_len, k_len, block, q.device)
        n, width = group.k_blocks.shape
        ki = _positions(group, block, q.device)[1].clamp(max=k_len - 1).flatten()
        qg = (qb if n == nq else qb[group.q_blocks]).reshape(n, b * h, block, -1)
        kg = k[:, :, ki].view(b, hk, n, width * block, -1).permute(2, 0, 1, 3, 4)
        vg = v[:, :, ki].view(b, hk, n, width * block, dv).permute(2, 0, 1, 3, 4)
        kg, vg = kg.reshape(n, b * hk, width * block, -1), vg.reshape(n, b * hk, width * block, dv)
        attn_mask = None if group.mask is None else _flat_heads(group.mask, b, h)
        if bias is not None:
            gb = _flat_heads(_gather_bias(bias, group, block, q_len, k_len), b, h).to(q.dtype)
            attn_mask = gb if attn_mask is None else gb.masked_fill(~attn_mask, float("-inf"))
        out = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=attn_mask,
                                             dropout_p=dropout_p, scale=scale,
                                             enable_gqa=h != hk)
        if group.row_ok is not None:
            out = out.masked_fill(~_flat_heads(group.row_ok, b, h), 0.0)
        outs.append(out)
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    if len(plan.groups) > 1:
        out = out[torch.cat([g.q_blocks for g in plan.groups]).argsort()]
    out = out.view(nq, b, h, block, dv).permute(1, 2, 0, 3, 4).reshape(b, h, nq * block, dv)
    return out[:, :, :q_len]
