"""Linear (kernel) attention: ``phi(q) . phi(k)`` replaces ``exp(q . k)``, O(n) time and memory.

With a positive feature map ``phi``, attention becomes

    out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j)),

so the keys are summarised once in a ``(features, d_v)`` state instead of an ``n x n``
score matrix. Causal attention sums over ``j <= i`` only: here as a chunked scan (a
masked quadratic product inside each chunk, plus the running state of all earlier chunks,
formed by a cumulative sum over chunk states), so memory stays O(n).

Both stream over the sequence in blocks of :data:`BLOCK_SIZE` (causal:
:data:`CAUSAL_BLOCK_SIZE`) rows: features, values and
the per-row results exist one block at a time, small enough to stay in cache, while the
state (``sum_j phi(k_j) v_j^T`` with the normaliser ``sum_j phi(k_j)`` as one more
column, so that one matmul per query block yields both) is carried from block to block.
So time, not only memory, stays linear in n once the whole sequence no longer fits in
the caches.

Feature maps:

* ``"elu"``: ``phi(x) = elu(x) + 1`` (Katharopoulos et al. 2020, "Transformers are RNNs").
  A different kernel from softmax, not an approximation of it.
* ``"favor"``: FAVOR+ positive orthogonal random features (Choromanski et al. 2021,
  "Rethinking Attention with Performers"): ``phi(x) = exp(w_r . x' - |x'|^2 / 2) / sqrt(m)``
  with ``x' = x d^-1/4``, so that ``E[phi(q) . phi(k)] = exp(q . k / sqrt(d))``, the
  softmax kernel. The error of that estimate falls as ``num_features`` grows;
  :func:`approximation_error` measures it against exact softmax attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from headwise.attention.kernels import attend
from headwise.attention.masks import causal as causal_mask

FEATURE_MAPS = ("elu", "favor")
#: Rows of q, k and v per block of the non-causal passes. A float32 block of 8 heads x 64
#: features is 8 * 1024 * 64 * 4 B = 2 MiB, the size of one core's L2 here (each head's
#: part, 256 KiB, is what one matmul works on), so the elementwise passes and matmuls over a
#: block run from cache. Much larger blocks fall out to memory (the time per row then rises
#: with n: 4096 was a third slower than 1024 at N = 8192); much smaller ones pay per-block
#: overhead (512 to 2048 timed alike at N = 16384 and 32768). Results do not depend on it beyond
#: float rounding (tests shrink it to exercise many blocks).
BLOCK_SIZE = 1024
#: Rows per block of the causal scan, rounded down to whole chunks (at least one). Smaller
#: than BLOCK_SIZE because a causal row carries more temporaries (chunk scores, the chunk
#: states and their prefix sums besides its features); on the 2-core CPU here, 256 rows
#: ran faster than 1024 at N = 16384 with the default chunk of 64 (a timing probe, not a
#: benchmark record).
CAUSAL_BLOCK_SIZE = 256


def orthogonal_features(num_features: int, dim: int, seed: int = 0, *,
                        dtype: torch.dtype = torch.float32,
                        device: torch.device | str | None = None) -> Tensor:
    """Random projection ``(num_features, dim)`` of FAVOR+: orthogonal rows, Gaussian norms.

    Rows come in blocks of ``dim`` mutually orthogonal directions (QR of a Gaussian
    matrix, signs fixed so the directions are uniform on the sphere), each rescaled to
    the norm of an independent Gaussian vector, so every row is marginally ``N(0, I)``
    while rows of a block are exactly orthogonal.

    Args:
        num_features: number of random features ``m``.
        dim: size of the vectors being projected.
        seed: seed of the generator (the projection is deterministic given the seed).
        dtype, device: of the result.
    """
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(-(-num_features // dim)):
        qmat, r = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
        # sign fix: without it QR's convention biases each direction (not Haar-uniform)
        blocks.append((qmat * torch.sign(torch.diagonal(r))).T)
    w = torch.cat(blocks)[:num_features]
    norms = torch.randn(num_features, dim, generator=gen, dtype=torch.float64).norm(dim=1)
    return (w * norms[:, None]).to(dtype=dtype, device=device)


def elu_features(x: Tensor) -> Tensor:
    """``elu(x) + 1``: positive features of Katharopoulos et al. (2020)."""
    return F.elu(x).add_(1.0)  # in place: elu's backward needs its input, not its output


def _favor_projection(x: Tensor, w: Tensor) -> Tensor:
    """``w x' - |x'|^2 / 2`` with ``x' = x d^-1/4``: the exponent of FAVOR+ before stabilising."""
    xs = x * x.shape[-1] ** -0.25
    proj = xs @ w.T.to(x.dtype)
    return proj - 0.5 * xs.pow(2).sum(-1, keepdim=True)


def favor_features(x: Tensor, w: Tensor, *, is_query: bool) -> Tensor:
    """FAVOR+ positive random features of ``x`` (..., L, d) for the softmax kernel.

    ``phi(x) = exp(w x' - |x'|^2 / 2 - c) / sqrt(m)`` with ``x' = x d^-1/4``. The
    stabiliser ``c`` (detached) is each query row's maximum, or the maximum over all keys
    of a head; either cancels between the numerator and the normaliser of attention.

    Args:
        x: queries or keys (..., L, d).
        w: projection (m, d) from :func:`orthogonal_features`.
        is_query: stabilise per row (queries) or per head over all rows (keys).
    """
    proj = _favor_projection(x, w)
    if is_query:
        c = proj.amax(-1, keepdim=True)
    else:
        c = proj.amax((-1, -2), keepdim=True)
    return torch.exp(proj - c.detach()) / math.sqrt(w.shape[0])


def default_num_features(dim: int) -> int:
    """Performer's default ``m = round(d log d)`` random features (at least ``d``)."""
    return max(dim, round(dim * math.log(dim)))


class _FeatureMap:
    """``phi`` of query and key blocks.

    Query features are per row, so a block's are exactly those of the whole sequence. So are
    ``elu`` key features; FAVOR+ keys share one stabiliser per head, here the running maximum
    over the key blocks seen so far: when it grows, :meth:`keys` returns the factor
    ``exp(c_old - c_new)`` by which the caller rescales the state it has summed, after which
    every key carries the same stabiliser again (it cancels in attention, as in
    :func:`favor_features`). Only where the normaliser falls under ``eps`` does the choice
    show: in a causal scan a row's keys may all lie far below the maximum, and the floor
    then shrinks that row. The running maximum (over keys up to the end of the row's block,
    not the whole sequence) makes that rarer but does not rule it out.
    """

    def __init__(self, feature_map: str, num_features: int | None, seed: int, dim: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        self.w: Tensor | None = None
        self.c: Tensor | None = None
        if feature_map == "elu":
            if num_features is not None:
                raise ValueError("num_features applies to feature_map='favor' only")
            return
        m = default_num_features(dim) if num_features is None else num_features
        if not isinstance(m, int) or isinstance(m, bool) or m <= 0:
            raise ValueError(f"num_features must be a positive int, got {num_features!r}")
        self.w = orthogonal_features(m, dim, seed, dtype=dtype, device=device)

    def queries(self, x: Tensor) -> Tensor:
        return elu_features(x) if self.w is None else favor_features(x, self.w, is_query=True)

    def keys(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """Features of a key block and the rescaling factor of earlier state (or None)."""
        if self.w is None:
            return elu_features(x), None
        proj = _favor_projection(x, self.w)
        c_block = proj.detach().amax((-1, -2), keepdim=True)
        scale = None
        if self.c is None:
            self.c = c_block
        else:
            c = torch.maximum(self.c, c_block)
            scale, self.c = torch.exp(self.c - c), c
        return torch.exp(proj - self.c) / math.sqrt(self.w.shape[0]), scale


def _noncausal(q: Tensor, k: Tensor, v: Tensor, fmap: _FeatureMap, hk: int, eps: float,
               ct: torch.dtype, out: Tensor | None) -> Tensor:
    """q (B, H, Lq, d), k (B, Hk, Lk, d), v (B, Hk, Lk, dv) -> (B, H, Lq, dv), blockwise.

    ``out``, when given (no autograd), receives the result block by block; otherwise the
    blocks are concatenated.
    """
    b, h, lq, _ = q.shape
    dv = v.shape[-1]
    kv = z = None  # sum_j phi(k_j) v_j^T (B, Hk, m, dv) and sum_j phi(k_j) (B, Hk, m)
    for kb, vb in zip(k.split(BLOCK_SIZE, 2), v.split(BLOCK_SIZE, 2), strict=True):
        if not kb.shape[2]:
            continue
        fk, scale = fmap.keys(kb.to(ct))
        # z by a sum over the cached block: measured faster than a ones column appended to v
        kv_b, z_b = fk.transpose(-1, -2) @ vb.to(ct), fk.sum(-2)
        if kv is None:
            kv, z = kv_b, z_b
        elif scale is None:
            kv, z = kv + kv_b, z + z_b
        else:
            kv, z = kv * scale + kv_b, z * scale.squeeze(-1) + z_b
    # one state [kv, z] (B, Hk, m, dv + 1): numerator and normaliser from one matmul per block
    state = None if kv is None else torch.cat((kv, z.unsqueeze(-1)), -1)
    blocks = []
    start = 0
    for qb in q.split(BLOCK_SIZE, 2):
        n = qb.shape[2]
        fq = fmap.queries(qb.to(ct))
        if state is None:  # no keys: a zero state, so a zero output (0 / eps)
            state = fq.new_zeros(b, hk, fq.shape[-1], dv + 1)
        # (B, H, n, m) -> (B, Hk, G * n, m): the G query heads of a kv head in one matmul
        # (reshape: q in a (batch, seq, heads, d) layout gives features in that layout)
        y = (fq.reshape(b, hk, h // hk * n, fq.shape[-1]) @ state).view(b, h, n, dv + 1)
        num, den = y[..., :dv], y[..., dv:].clamp_min(eps)
        if out is None:
            blocks.append(num / den)
        else:
            torch.div(num, den, out=out[:, :, start:start + n])
        start += n
    return out if out is not None else torch.cat(blocks, 2)


def _causal(q: Tensor, k: Tensor, v: Tensor, fmap: _FeatureMap, hk: int, chunk: int,
            eps: float, ct: torch.dtype, out: Tensor | None) -> Tensor:
    """Chunked causal scan, streamed in blocks of whole chunks; shapes as :func:`_noncausal`.

    Inside a block, each chunk's queries see the chunk's own keys through a masked quadratic
    product and all earlier keys through a state: the state carried in from earlier blocks
    plus an exclusive cumulative sum of the block's chunk states.
    """
    b, h, n, _ = q.shape
    g, dv = h // hk, v.shape[-1]
    rows = max(1, CAUSAL_BLOCK_SIZE // chunk) * chunk
    state = None  # sum over all earlier blocks of phi(k_j) [v_j, 1]: (B, Hk, m, dv + 1)
    blocks = []
    start = 0
    for qb, kb, vb in zip(q.split(rows, 2), k.split(rows, 2), v.split(rows, 2), strict=True):
        ln = qb.shape[2]
        if not ln:
            break
        fk, scale = fmap.keys(kb.to(ct))
        fq = fmap.queries(qb.to(ct))
        m = fq.shape[-1]
        nc = -(-ln // chunk)
        pad = nc * chunk - ln
        # padded keys have zero features, so they add nothing to any state
        v1 = F.pad(vb.to(ct), (0, 1, 0, pad), value=1.0).view(b, hk, nc, chunk, dv + 1)
        if pad:
            fq, fk = F.pad(fq, (0, 0, 0, pad)), F.pad(fk, (0, 0, 0, pad))
        fq = fq.view(b, hk, g, nc, chunk, m)
        fk = fk.view(b, hk, nc, chunk, m)
        kv = fk.transpose(-1, -2) @ v1  # (B, Hk, nc, m, dv + 1)
        run = kv.cumsum(2)
        prev = run - kv  # everything before each chunk, within this block
        if state is not None:
            state = state if scale is None else state * scale
            prev = prev + state.unsqueeze(2)
        state = run[:, :, -1] if state is None else state + run[:, :, -1]
        scores = (fq @ fk.unsqueeze(2).transpose(-1, -2)).tril_()  # (B, Hk, G, nc, c, c)
        y = fq @ prev.unsqueeze(2) + scores @ v1.unsqueeze(2)  # (B, Hk, G, nc, c, dv + 1)
        y = y.view(b, h, nc * chunk, dv + 1)[:, :, :ln]
        num, den = y[..., :dv], y[..., dv:].clamp_min(eps)
        if out is None:
            blocks.append(num / den)
        else:
            torch.div(num, den, out=out[:, :, start:start + ln])
        start += ln
    if out is not None:
        return out
    return torch.cat(blocks, 2) if blocks else q.new_zeros(b, h, n, dv, dtype=ct)


def linear_attention(q: Tensor, k: Tensor, v: Tensor, feature_map: str = "elu",
                     causal: bool = False, *, num_features: int | None = None, seed: int = 0,
                     chunk_size: int = 64, eps: float = 1e-6) -> Tensor:
    """Kernelised attention with a positive feature map, O(n) in time and memory.

    Args:
        q: (batch, heads, q_len, d).
        k: (batch, kv_heads, k_len, d); heads a multiple of kv_heads (grouped queries).
        v: (batch, kv_heads, k_len, d_v).
        feature_map: ``"elu"`` (``elu + 1``) or ``"favor"`` (FAVOR+ random features
            estimating softmax attention with scale ``1 / sqrt(d)``).
        causal: query ``i`` sees keys ``j <= i`` (needs ``q_len == k_len``).
        num_features: random features of ``"favor"`` (default ``round(d log d)``).
        seed: seed of the FAVOR+ projection (shared by all heads).
        chunk_size: chunk length of the causal scan (any positive value; its
            temporaries take O(r * (chunk_size + m * d_v / chunk_size)) for the r rows of
            one block, or of the whole sequence where autograd keeps them).
        eps: lower bound of the normaliser ``phi(q) . sum phi(k)``.

    Returns:
        (batch, heads, q_len, d_v) in q's dtype (computed in float32 for half types).

    Raises:
        ValueError: unknown feature map, bad sizes or options, or causal with
            ``q_len != k_len``.
    """
    if feature_map not in FEATURE_MAPS:
        raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {feature_map!r}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be 4-D (batch, heads, seq, dim), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    if k.shape[0] != b or v.shape[0] != b or k.shape[-1] != d or v.shape[1:3] != k.shape[1:3]:
        raise ValueError(f"inconsistent shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if h % hk:
        raise ValueError(f"q heads ({h}) must be a multiple of k/v heads ({hk})")
    if causal and lq != lk:
        raise ValueError(f"causal linear attention needs q_len == k_len, got {lq} and {lk}")
    if not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    fmap = _FeatureMap(feature_map, num_features, seed, d, ct, q.device)
    # without autograd, blocks are written straight into the result (no concatenation pass)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    out = None if grad else q.new_empty(b, h, lq, v.shape[-1])
    with torch.autocast(q.device.type, enabled=False):
        if causal:
            res = _causal(q, k, v, fmap, hk, chunk_size, eps, ct, out)
        else:
            res = _noncausal(q, k, v, fmap, hk, eps, ct, out)
    return res.to(q.dtype)


def approximation_error(q: Tensor, k: Tensor, v: Tensor, feature_map: str = "favor",
                        causal: bool = False, **kwargs) -> float:
    """Relative error of :func:`linear_attention` against exact softmax attention.

    ``||linear - softmax||_F / ||softmax||_F``, where softmax attention uses scale
    ``1 / sqrt(d)`` (and a causal mask when ``causal``). For ``"favor"`` it is the error of
    the random-feature estimate; for ``"elu"`` it says how far that different kernel is
    from softmax on these inputs.

    Args:
        q, k, v, feature_map, causal: as for :func:`linear_attention`.
        **kwargs: further keyword arguments of :func:`linear_attention`.

    Returns:
        The relative Frobenius error, a float.
    """
    with torch.no_grad():
        approx = linear_attention(q, k, v, feature_map, causal, **kwargs).double()
        exact = attend(q.double(), k.double(), v.double(), causal_mask() if causal else None,
                       backend="math")
    return float((approx - exact).norm() / exact.norm())


__all__ = [
    "FEATURE_MAPS",
    "approximation_error",
    "default_num_features",
    "elu_features",
    "favor_features",
    "linear_attention",
    "orthogonal_features",
]
