"""Tiled attention with an online softmax (FlashAttention, Dao et al. 2022; FA-2 backward).

Queries and keys are processed in tiles of ``block_q x block_k``. The forward pass keeps,
per query row, the running maximum ``m``, the running normaliser ``l`` and the running
weighted sum of values, rescaling them as each key tile arrives; it stores only the
output and the log-sum-exp per row. The backward pass recomputes each tile's
probabilities from that log-sum-exp instead of storing the ``q_len x k_len`` matrix, so
memory is O(n) in sequence length (plus a tile).

Tiles that a mask pattern fully forbids are skipped; tiles it fully allows are computed
without a mask.
"""

from __future__ import annotations

import torch
from torch import Tensor

from headwise.attention.kernels.validate import expand_to_lengths
from headwise.attention.masks import AttentionPattern

DEFAULT_BLOCK_Q = 256
DEFAULT_BLOCK_K = 512


class MaskTiles:
    """Mask tiles and the tile layout, from a pattern or a dense boolean tensor."""

    def __init__(self, mask: Tensor | AttentionPattern | None, q_len: int, k_len: int,
                 block_q: int, block_k: int, device: torch.device) -> None:
        mask = expand_to_lengths(mask, q_len, k_len)  # tiles slice it by position
        self.mask, self.q_len, self.k_len = mask, q_len, k_len
        self.block_q, self.block_k, self.device = block_q, block_k, device
        nq, nk = -(-q_len // block_q), -(-k_len // block_k)
        if mask is None:
            self.any = torch.ones(nq, nk, dtype=torch.bool)
            self.all = self.any
        elif isinstance(mask, AttentionPattern):
            a, al = mask.block_layout(q_len, k_len, block_q, block_k)
            self.any, self.all = a.any(0), al.all(0)
        else:
            m = mask.any(1)  # (B|1, q, k): a tile is needed if any head needs it
            pad = (0, nk * block_k - k_len, 0, nq * block_q - q_len)
            t = torch.nn.functional.pad(m, pad, value=False)
            t = t.view(m.shape[0], nq, block_q, nk, block_k)
            self.any = t.any(4).any(2).any(0).cpu()
            full = torch.nn.functional.pad(mask.all(1), pad, value=True)
            full = full.view(m.shape[0], nq, block_q, nk, block_k)
            self.all = full.all(4).all(2).all(0).cpu()
        self.any_list = self.any.tolist()
        self.all_list = self.all.tolist()
        self._forbidden: dict[tuple[int, int], Tensor] = {}

    def forbidden(self, i: int, j: int) -> Tensor | None:
        """The forbidden pairs of tile (i, j) (True = masked), or None when all are allowed.

        Pattern tiles are rendered once per call and reused by the backward pass.
        """
        if self.all_list[i][j]:
            return None
        if (i, j) in self._forbidden:
            return self._forbidden[(i, j)]
        q0, k0 = i * self.block_q, j * self.block_k
        q1, k1 = min(self.q_len, q0 + self.block_q), min(self.k_len, k0 + self.block_k)
        if isinstance(self.mask, AttentionPattern):
            t = ~self.mask.tile(q0, q1, k0, k1, self.q_len, self.k_len, self.device)
            self._forbidden[(i, j)] = t
            return t
        return ~self.mask[..., q0:q1, k0:k1]

    def density(self) -> float:
        """Fraction of tiles that hold at least one allowed pair."""
        return float(self.any.float().mean())


def _scores(qi: Tensor, kj: Tensor, bias_t: Tensor | None, forbid: Tensor | None,
            ct: torch.dtype) -> Tensor:
    """Scores of one tile, (B, KVH, G, bq, bk), masked to -inf (``qi`` is pre-scaled)."""
    s = torch.matmul(qi, kj.unsqueeze(2).transpose(-1, -2))
    if bias_t is not None or forbid is not None:
        flat = s.view(s.shape[0], -1, s.shape[-2], s.shape[-1])  # (B, H, bq, bk) view
        if bias_t is not None:
            flat.add_(bias_t.to(ct))
        if forbid is not None:
            flat.masked_fill_(forbid, float("-inf"))
    return s


class TiledAttention(torch.autograd.Function):
    """Autograd function of the tiled kernel (see module docstring)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, tiles: MaskTiles,
                scale: float) -> Tensor:
        b, h, lq, d = q.shape
        hk, lk, dv = k.shape[1], k.shape[2], v.shape[-1]
        g = h // hk
        ct = torch.float64 if q.dtype == torch.float64 else torch.float32
        bq, bk = tiles.block_q, tiles.block_k
        qg = q.reshape(b, hk, g, lq, d)
        out = torch.empty(b, hk, g, lq, dv, dtype=q.dtype, device=q.device)
        lse = torch.empty(b, hk, g, lq, dtype=ct, device=q.device)
        kc, vc = k.to(ct), v.to(ct)
        for i in range(-(-lq // bq)):
            q0, q1 = i * bq, min(lq, (i + 1) * bq)
            qi = qg[..., q0:q1, :].to(ct) * scale
            m = torch.full((b, hk, g, q1 - q0), float("-inf"), dtype=ct, device=q.device)
            l_ = torch.zeros_like(m)
            acc = torch.zeros(b, hk, g, q1 - q0, dv, dtype=ct, device=q.device)
            for j in range(-(-lk // bk)):
                if not tiles.any_list[i][j]:
                    continue
                k0, k1 = j * bk, min(lk, (j + 1) * bk)
                bias_t = None if bias is None else bias[..., q0:q1, k0:k1]
                s = _scores(qi, kc[:, :, k0:k1], bias_t, tiles.forbidden(i, j), ct)
                m_new = torch.maximum(m, s.amax(-1))
                m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
                p = s.sub_(m_safe.unsqueeze(-1)).exp_()  # in place: s becomes p
                alpha = torch.exp(m - m_safe)
                l_.mul_(alpha).add_(p.sum(-1))
                acc.mul_(alpha.unsqueeze(-1)).add_(torch.matmul(p, vc[:, :, k0:k1].unsqueeze(2)))
                m = m_new
            nonempty = l_ > 0
            out[..., q0:q1, :] = (acc / torch.where(nonempty, l_, 1.0).unsqueeze(-1)).to(q.dtype)
            lse[..., q0:q1] = torch.where(nonempty, m + torch.log(torch.where(nonempty, l_, 1.0)),
                                          float("inf"))
        ctx.save_for_backward(q, k, v, bias, out, lse)
        ctx.tiles, ctx.scale = tiles, scale
        return out.reshape(b, h, lq, dv)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        with torch.autocast(grad_out.device.type, enabled=False):
            return _backward(ctx, grad_out)


def _backward(ctx, grad_out: Tensor):
    q, k, v, bias, out, lse = ctx.saved_tensors
    tiles, scale = ctx.tiles, ctx.scale
    b, h, lq, d = q.shape
    hk, lk, dv = k.shape[1], k.shape[2], v.shape[-1]
    g = h // hk
    ct = lse.dtype
    bq, bk = tiles.block_q, tiles.block_k
    qg = q.reshape(b, hk, g, lq, d).to(ct)
    do = grad_out.reshape(b, hk, g, lq, dv).to(ct)
    delta = (do * out.to(ct)).sum(-1)  # D_i = rowsum(dO * O)
    kc, vc = k.to(ct), v.to(ct)
    dq = torch.zeros_like(qg)
    dk = torch.zeros(b, hk, lk, d, dtype=ct, device=q.device)
    dvv = torch.zeros(b, hk, lk, dv, dtype=ct, device=q.device)
    need_db = bias is not None and ctx.needs_input_grad[3]
    dbias = torch.zeros(b, h, lq, lk, dtype=ct, device=q.device) if need_db else None
    for i in range(-(-lq // bq)):
        q0, q1 = i * bq, min(lq, (i + 1) * bq)
        qi, doi = qg[..., q0:q1, :] * scale, do[..., q0:q1, :]
        lse_i, delta_i = lse[..., q0:q1].unsqueeze(-1), delta[..., q0:q1].unsqueeze(-1)
        for j in range(-(-lk // bk)):
            if not tiles.any_list[i][j]:
                continue
            k0, k1 = j * bk, min(lk, (j + 1) * bk)
            kj, vj = kc[:, :, k0:k1].unsqueeze(2), vc[:, :, k0:k1].unsqueeze(2)
            bias_t = None if bias is None else bias[..., q0:q1, k0:k1]
            s = _scores(qi, kc[:, :, k0:k1], bias_t, tiles.forbidden(i, j), ct)
            p = s.sub_(lse_i).exp_()  # in place: s becomes p
            dvv[:, :, k0:k1] += torch.matmul(p.transpose(-1, -2), doi).sum(2)
            ds = torch.matmul(doi, vj.transpose(-1, -2)).sub_(delta_i).mul_(p)
            dq[..., q0:q1, :] += torch.matmul(ds, kj).mul_(scale)
            dk[:, :, k0:k1] += torch.matmul(ds.transpose(-1, -2), qi).sum(2)
            if dbias is not None:
                dbias[..., q0:q1, k0:k1] = ds.reshape(b, h, q1 - q0, k1 - k0)
    if dbias is not None:
        dbias = dbias.sum_to_size(bias.shape).to(bias.dtype)
    return (dq.reshape(b, h, lq, d).to(q.dtype), dk.to(k.dtype), dvv.to(v.dtype), dbias,
            None, None)


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | AttentionPattern | None,
                    bias: Tensor | None, scale: float, *, block_q: int | None = None,
                    block_k: int | None = None) -> Tensor:
    """Tiled online-softmax attention with a recomputing backward.

    Args:
        q, k, v: as for :func:`headwise.attention.attend` (grouped heads allowed).
        mask: a pattern (rendered one tile at a time) or a 4-D boolean tensor, or None.
        bias: additive float scores (B|1, H|1, q_len, k_len), or None; differentiable.
        scale: multiplier of the dot products.
        block_q, block_k: tile sizes (default: the module's ``DEFAULT_BLOCK_Q/K``).

    Returns:
        (batch, heads, q_len, d_v) in q's dtype.
    """
    block_q = DEFAULT_BLOCK_Q if block_q is None else block_q
    block_k = DEFAULT_BLOCK_K if block_k is None else block_k
    if block_q <= 0 or block_k <= 0:
        raise ValueError(f"tile sizes must be positive, got {block_q} x {block_k}")
    # a mask or bias that broadcasts over queries or keys is sliced per tile: full lengths
    mask, bias = (expand_to_lengths(t, q.shape[2], k.shape[2]) for t in (mask, bias))
    tiles = MaskTiles(mask, q.shape[2], k.shape[2], block_q, block_k, q.device)
    with torch.autocast(q.device.type, enabled=False):  # float32 statistics, explicitly
        return TiledAttention.apply(q, k, v, bias, tiles, scale)
