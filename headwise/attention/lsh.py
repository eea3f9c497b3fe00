"""LSH attention (Kitaev et al. 2020, "Reformer: The Efficient Transformer").

Queries and keys are shared: a token's key is its query vector normalised to unit
length. Angular locality-sensitive hashing (a random rotation ``R``, bucket =
``argmax([x R; -x R])``) puts vectors with a large dot product into the same bucket with
high probability. Per hash round, positions are sorted by ``(bucket, position)``, cut into
chunks of ``chunk_size``, and each chunk attends to itself and to the previous chunk
(the first chunk has no previous one here, where Reformer wraps around to the last: this
way one chunk covering the sequence is exactly dense attention). A query never attends its
own position unless nothing else is visible: that score is set to
:data:`SELF_MASK_VALUE` (a shared-QK query's dot product with itself would otherwise
dominate). Causal attention also masks later positions.

Several hash rounds are combined with the weights ``exp(lse_r - logsumexp_r lse_r)`` of
their per-round log-sum-exps (Reformer, section 3). A key seen by a query in ``c`` rounds
has its score lowered by ``log c`` in each, so the result is exactly softmax attention over
the union of the keys seen in any round. Cost per round: O(n * chunk_size).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

#: score of a query for its own position (Reformer's value): used only when alone
SELF_MASK_VALUE = -1e5


def _check(qk: Tensor, v: Tensor, num_buckets: int, num_hashes: int, chunk_size: int,
           mask: Tensor | None) -> None:
    for name, val, lo in (("num_buckets", num_buckets, 2), ("num_hashes", num_hashes, 1),
                          ("chunk_size", chunk_size, 1)):
        if not isinstance(val, int) or isinstance(val, bool) or val < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
    if num_buckets % 2:
        raise ValueError(f"num_buckets must be even (angular LSH takes the argmax over "
                         f"[xR, -xR]), got {num_buckets}")
    if qk.ndim != 4 or v.ndim != 4 or qk.shape[:3] != v.shape[:3]:
        raise ValueError(f"qk (batch, heads, seq, d) and v (batch, heads, seq, d_v) must agree, "
                         f"got {tuple(qk.shape)} and {tuple(v.shape)}")
    if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != (qk.shape[0],
                                                                                qk.shape[2])):
        raise ValueError(f"mask must be a boolean (batch, seq) keep-mask, got "
                         f"{mask.dtype} {tuple(mask.shape)}")


def lsh_buckets(x: Tensor, num_buckets: int, num_hashes: int = 1, seed: int = 0) -> Tensor:
    """Angular LSH buckets of ``x`` (batch, heads, L, d): (batch, heads, num_hashes, L).

    One random Gaussian rotation ``(d, num_buckets / 2)`` per head and round, drawn from
    ``seed``; bucket = ``argmax(concat(x R, -x R))``.
    """
    b, h, _, d = x.shape
    gen = torch.Generator().manual_seed(seed)
    rot = torch.randn(h, num_hashes, d, num_buckets // 2, generator=gen, dtype=torch.float64)
    rotated = torch.einsum("bhld,hrdk->bhrlk", x.detach(), rot.to(x.dtype).to(x.device))
    return torch.cat([rotated, -rotated], -1).argmax(-1)


def _look_back(x: Tensor, fill: float) -> Tensor:
    """(..., nc, C, *) -> (..., nc, 2C, *): each chunk preceded by the previous one."""
    prev = torch.cat([torch.full_like(x[..., :1, :, :], fill), x[..., :-1, :, :]], -3)
    return torch.cat([prev, x], -2)


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """x (B, H, L, D), index (B, H, R, N) -> (B, H, R, N, D)."""
    b, h, _, d = x.shape
    r, n = index.shape[2:]
    flat = torch.gather(x, 2, index.reshape(b, h, r * n, 1).expand(b, h, r * n, d))
    return flat.view(b, h, r, n, d)


def _dup_log_counts(chunk_of: Tensor, qpos: Tensor, kpos: Tensor, dtype: torch.dtype) -> Tensor:
    """log(number of rounds in which each (query, key) pair is within the query's window)."""
    b, h, r, lp = chunk_of.shape
    counts = torch.zeros(qpos.shape[:-1] + (qpos.shape[-1], kpos.shape[-1]),
                         dtype=torch.int16 if r < 2**15 else torch.int32, device=qpos.device)
    for rr in range(r):
        cid = chunk_of[:, :, rr]
        cq = torch.gather(cid, 2, qpos.reshape(b, h, -1)).view(qpos.shape)
        ck = torch.gather(cid, 2, kpos.reshape(b, h, -1)).view(kpos.shape)
        diff = ck.unsqueeze(-2) - cq.unsqueeze(-1)
        counts += (diff == 0) | (diff == -1)
    return counts.clamp_min(1).to(dtype).log()


def lsh_attention(qk: Tensor, v: Tensor, num_buckets: int, num_hashes: int = 1,
                  chunk_size: int = 64, causal: bool = False, *, seed: int = 0,
                  mask: Tensor | None = None, scale: float | None = None) -> Tensor:
    """Reformer's shared-QK LSH attention (see the module docstring).

    Args:
        qk: (batch, heads, L, d) shared query/key vectors; keys are ``qk / |qk|``.
        v: (batch, heads, L, d_v).
        num_buckets: hash buckets per round; even and >= 2.
        num_hashes: hash rounds (more rounds: closer to dense attention, more cost).
        chunk_size: positions per chunk of the sorted sequence.
        causal: also mask keys after the query.
        seed: seed of the random rotations (deterministic given the seed).
        mask: optional boolean (batch, L) keep-mask: keys where it is False are padding.
        scale: multiplier of ``q . k / |k|`` (default ``1 / sqrt(d)``).

    Returns:
        (batch, heads, L, d_v) in qk's dtype (float32 statistics for half types). A query
        with no visible key (all padding) gives zeros.

    Raises:
        ValueError: a bucket count that is odd or below 2, non-positive ``num_hashes`` or
            ``chunk_size``, or shapes that do not agree.
    """
    _check(qk, v, num_buckets, num_hashes, chunk_size, mask)
    b, h, n, d = qk.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    ct = torch.float32 if qk.dtype in (torch.float16, torch.bfloat16) else qk.dtype
    nc = -(-n // chunk_size)
    lp, dev = nc * chunk_size, qk.device
    with torch.no_grad():
        buckets = lsh_buckets(qk.to(ct), num_buckets, num_hashes, seed)
        buckets = F.pad(buckets, (0, lp - n), value=num_buckets)  # padding sorts last
        pos = torch.arange(lp, device=dev)
        perm = (buckets * lp + pos).argsort(-1)  # (B, H, R, Lp): sorted slot -> position
        rank = torch.empty_like(perm).scatter_(-1, perm, pos.expand_as(perm).contiguous())
    x = F.pad(qk.to(ct), (0, 0, 0, lp - n))
    keys = F.normalize(x, dim=-1)
    vals = F.pad(v.to(ct), (0, 0, 0, lp - n))
    shape = (b, h, num_hashes, nc, chunk_size)
    qs = _gather(x, perm).view(*shape, d)
    ks = _look_back(_gather(keys, perm).view(*shape, d), 0.0)
    vs = _look_back(_gather(vals, perm).view(*shape, -1), 0.0)
    qpos = perm.view(shape)
    kpos = _look_back(qpos.unsqueeze(-1), -1).squeeze(-1)  # -1: no previous chunk
    scores = (qs @ ks.transpose(-1, -2)) * scale  # (B, H, R, nc, C, 2C)
    with torch.no_grad():
        kq, qq = kpos.unsqueeze(-2), qpos.unsqueeze(-1)
        forbid = ((kq < 0) | (kq >= n)).expand(*shape, kpos.shape[-1])
        if causal:
            forbid = forbid | (kq > qq)
        if mask is not None:
            keep = F.pad(mask.to(dev), (0, lp - n), value=False)
            kk = kpos.clamp_min(0).reshape(b, -1)
            forbid = forbid | ~torch.gather(keep, 1, kk).view(kpos.shape).unsqueeze(-2)
        own = kq == qq
        dup = _dup_log_counts(rank // chunk_size, qpos, kpos.clamp_min(0), ct) \
            if num_hashes > 1 else None
    scores = scores.masked_fill(own, SELF_MASK_VALUE)
    if dup is not None:
        scores = scores - dup
    scores = scores.masked_fill(forbid, float("-inf"))
    lse = scores.logsumexp(-1, keepdim=True)  # (B, H, R, nc, C, 1)
    p = torch.exp(scores - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)))
    out = (p @ vs).view(b, h, num_hashes, lp, -1)
    # undo the sort: position i of round r sits at sorted slot rank[r, i]
    out = torch.gather(out, 3, rank.unsqueeze(-1).expand_as(out))[..., :n, :]
    lse = torch.gather(lse.view(b, h, num_hashes, lp), 3, rank)[..., :n]
    # the rounds' weights exp(lse_r - logsumexp_r lse_r), as a softmax over the rounds: it
    # subtracts the largest lse, exactly, where exp(lse - logsumexp) rounds the log-sum-exp
    # of a query that sees only itself (near SELF_MASK_VALUE, whose float32 ulp is 0.008:
    # a 0.5 % error in such a row's output). A query that sees nothing in any round has
    # zero outputs; its weights, uniform, multiply them.
    seen = torch.isfinite(lse).any(2, keepdim=True)
    weight = torch.softmax(torch.where(seen, lse, torch.zeros_like(lse)), dim=2)
    return (weight.unsqueeze(-1) * out).sum(2).to(qk.dtype)


def shared_qk_attention(qk: Tensor, v: Tensor, causal: bool = False, *,
                        mask: Tensor | None = None, scale: float | None = None) -> Tensor:
    """Dense shared-QK attention with Reformer's self-mask: what LSH attention approximates.

    Args:
        qk, v, causal, mask, scale: as for :func:`lsh_attention`.

    Returns:
        (batch, heads, L, d_v) in qk's dtype; O(L^2) memory.
    """
    n, d = qk.shape[2], qk.shape[3]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    ct = torch.float32 if qk.dtype in (torch.float16, torch.bfloat16) else qk.dtype
    x = qk.to(ct)
    scores = (x @ F.normalize(x, dim=-1).transpose(-1, -2)) * scale
    idx = torch.arange(n, device=qk.device)
    scores = scores.masked_fill(idx[:, None] == idx[None, :], SELF_MASK_VALUE)
    forbid = torch.zeros(n, n, dtype=torch.bool, device=qk.device)
    if causal:
        forbid = idx[None, :] > idx[:, None]
    forbid = forbid[None, None]
    if mask is not None:
        forbid = forbid | ~mask[:, None, None, :]
    scores = scores.masked_fill(forbid, float("-inf"))
    row_ok = ~forbid.all(-1, keepdim=True)
    w = torch.softmax(scores.masked_fill(~row_ok, 0.0), -1).masked_fill(~row_ok, 0.0)
    return (w @ v.to(ct)).to(qk.dtype)


def lsh_approximation_error(qk: Tensor, v: Tensor, num_buckets: int, num_hashes: int = 1,
                            chunk_size: int = 64, causal: bool = False, **kwargs) -> float:
    """Relative error ``||lsh - dense||_F / ||dense||_F`` against :func:`shared_qk_attention`.

    Args:
        qk, v, num_buckets, num_hashes, chunk_size, causal: as for :func:`lsh_attention`.
        **kwargs: ``seed``, ``mask``, ``scale`` of :func:`lsh_attention`.

    Returns:
        The relative Frobenius error, a float (computed in float64).
    """
    dense_kw = {k: val for k, val in kwargs.items() if k in ("mask", "scale")}
    with torch.no_grad():
        approx = lsh_attention(qk.double(), v.double(), num_buckets, num_hashes, chunk_size,
                               causal, **kwargs)
        exact = shared_qk_attention(qk.double(), v.double(), causal, **dense_kw)
    return float((approx - exact).norm() / exact.norm())


__all__ = [
    "SELF_MASK_VALUE",
    "lsh_approximation_error",
    "lsh_attention",
    "lsh_buckets",
    "shared_qk_attention",
]
